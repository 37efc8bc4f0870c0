"""Signing a browser in when the server wants `RLVITALS_DATASOURCE_TOKEN`.

- `GET /login[?next=PATH][&lang=en|zh]`: the sign-in page (a page asked for without the token
  is redirected here from `app._check_auth`).
- `POST /api/login` `{"token": "..."}`: 204 with the session cookie when the token is right,
  401 when not, 400 on a body that is not that object, 429 while wrong tokens from the client
  (or from everyone) hold it (`login_guard`).
- `POST /api/logout`: 204, the cookie cleared.

The cookie holds `DatasourceConfig.session_value()`, an HMAC of the token, never the token
itself, so a cookie read off a disk does not give the bearer token Grafana uses. It is
`HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page makes the browser send
it, so a cross-site request gets no more than an anonymous one) and `Secure` when the request came
over HTTPS. Changing the token signs every browser out.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from .config import SESSION_COOKIE, SESSION_DAYS
from .errors import BadRequest, Unauthorized
from .login_guard import held_response, request_client
from .services import services

__all__ = ["blueprint", "safe_next"]

blueprint = Blueprint("login", __name__)


def safe_next(value: str | None) -> str:
    """`value` when it is a path on this server, else `/`: a sign-in link must not send the
    browser elsewhere (`//evil.example/`, `https://...`, `/\\evil`)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    if any(c in value for c in "\r\n\\") or len(value) > 2000:
        return "/"
    return value


@blueprint.get("/login")
def login_page() -> Response:
    from grafana.live import CSP
    from grafana.live.login_page import render_login

    from . import params

    lang = params.lang(request.args) or "en"
    response = Response(
        render_login(lang, safe_next(request.args.get("next"))), mimetype="text/html"
    )
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@blueprint.post("/api/login")
def login() -> Response | tuple[Response, int]:
    svc = services()
    config = svc.config
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("token"), str):
        raise BadRequest(
            'POST /api/login wants a JSON object {"token": "<RLVITALS_DATASOURCE_TOKEN>"}'
        )
    if config.token is None:
        return Response(status=204)  # nothing to sign in to: every page is open already
    client = request_client()
    hold = svc.logins.wait(client)
    if hold is not None:
        return held_response(hold)
    if not config.accepts_token(f"Bearer {body['token']}"):
        svc.logins.failed(client)
        raise Unauthorized(
            "wrong token: paste the value of RLVITALS_DATASOURCE_TOKEN this server was started with"
        )
    svc.logins.succeeded(client)
    response = Response(status=204)
    response.set_cookie(
        SESSION_COOKIE,
        config.session_value() or "",
        max_age=SESSION_DAYS * 86400,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.is_secure,
    )
    return response


@blueprint.post("/api/logout")
def logout() -> Response:
    response = Response(status=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="Strict")
    return response
