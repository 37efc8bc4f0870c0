"""The Flask app factory: blueprints, JSON errors, the Host allowlist, optional bearer-token
auth, JSON-only request bodies, body-size limit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, redirect, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

import registry as registry_pkg
from exporter.ingest.background import FollowState

from . import (
    api_alert_notifications,
    api_cards,
    api_events,
    api_fields,
    api_manage,
    api_runs,
    api_series,
    api_terms,
    dashboard_page,
    login,
    pages,
    report_page,
    simpod,
)
from .config import ANY_HOST, HOSTS_SETTING, SESSION_COOKIE, DatasourceConfig
from .dashboard_page import wants_html
from .errors import ApiError
from .history import (
    HistoryStore,
    HistoryUnavailable,
    UnknownField,
    UnknownRun,
    UnsafeName,
    open_history,
)
from .jsonio import SafeJSONProvider
from .login_guard import bearer_verdict, held_response
from .services import Services, attach, services

__all__ = ["create_app"]

_log = logging.getLogger(__name__)
_OPEN_PATHS = frozenset(
    {"/api/health", "/terms", "/terms/", "/api/terms", "/login", "/api/login", "/api/logout"}
)
_OPEN_PREFIXES = ("/terms/", "/api/terms/", "/live/static/", "/live/report.css")
"""Registry text is public: the term pages, glossary and runbook links that dashboards, alert
notifications and the report open in a plain browser tab (which sends no bearer token). So are
the sign-in page and the dashboard's own scripts and styles (the same files for every install;
the sign-in page needs them). Run data (runs, cards, series, events, the report, the pages that
show them, the simpod protocol) stays behind the token or the session cookie of `/login`."""


def _is_open(path: str) -> bool:
    if request.method == "POST" and path == api_alert_notifications.PATH:
        return True  # Grafana's webhook, which carries no token (api_alert_notifications.py)
    return path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES)


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


# Why not Flask's own `TRUSTED_HOSTS` (Flask 3.1.3, Werkzeug 3.1.8/3.1.9, read in site-packages):
# - flask/app.py:446-450 checks it in `create_url_adapter`, which flask/ctx.py:322-325 calls when
#   the request context is made, keeping the `SecurityError` (a BadRequest) as the routing
#   exception; that is raised only in `dispatch_request` (flask/app.py:890-891), after
#   `preprocess_request` has run the before_request functions (flask/app.py:915-917). The token
#   check would answer a foreign Host first, with a 401 about the token, and the 400 that does
#   come says only "Host '...' is not trusted.", not which setting allows it.
# - werkzeug/sansio/utils.py `host_is_trusted` changes within 3.1.x (Werkzeug is not pinned):
#   3.1.8 (line 53, 69) cuts names at the first ':' so a trusted '[::1]' trusts every bracketed
#   IPv6 host, and 3.1.9 (line 72) still cuts the trusted entry, so '[::1]' matches nothing; an
#   empty list trusts everything (3.1.8 line 55), which is not how '*' should read.
# So the check is ours, the first before_request function, answering every route alike: the
# static files, the redirects (`/terms` -> `/terms/`, built from the Host) and the 404s included.
def _check_host() -> tuple[Response, int] | None:
    sent = request.headers.get("Host")
    if services().config.allows_host(sent):
        return None
    what = f"Host {sent[:100]!r}" if sent else "a request with no or an empty Host header"
    return _error(
        400,
        f"{what} is not an allowed host of this server (a defence against DNS rebinding); if "
        f"clients really reach it by that name, add the name to {HOSTS_SETTING} "
        "(comma-separated) or pass `rlvitals serve --allow-host NAME`; "
        f"{HOSTS_SETTING}={ANY_HOST} answers any host, for a reverse proxy that checks Host",
    )


def _check_auth() -> BaseResponse | tuple[Response, int] | None:
    svc = services()
    verdict = bearer_verdict(svc.logins, svc.config)
    if _is_open(request.path):
        return None  # a held client's token is not checked: the open answer, as without one
    if verdict == "held":
        return held_response()
    if verdict in ("open", "right"):
        return None
    if svc.config.accepts_session(request.cookies.get(SESSION_COOKIE)):
        return None
    if request.method == "GET" and wants_html(request):
        # a browser asking for a page: sign in once, then come back to it
        back = request.full_path if request.query_string else request.path
        return redirect("/login?" + urlencode({"next": back}), code=303)
    response, status = _error(
        401,
        "missing or wrong bearer token: send 'Authorization: Bearer <RLVITALS_DATASOURCE_TOKEN>' "
        "(a browser: sign in once at /login)",
    )
    response.headers["WWW-Authenticate"] = 'Bearer realm="rlvitals"'
    return response, status


_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


# A browser sends a cross-site POST without asking first (no CORS preflight) only when its
# Content-Type is text/plain, application/x-www-form-urlencoded or multipart/form-data (or
# missing), so any web page could fire `/query`s at a local server that parsed those as JSON.
# Requiring application/json makes such a POST need a preflight, which this server never grants
# (it sends no CORS headers). Grafana's simpod JSON datasource sends it on every POST:
# simPod/GrafanaJsonDatasource 0.6.5 (commit 5624c44) sets the header in src/DataSource.ts:53
# (`this.headers = { 'Content-Type': 'application/json' }`) and src/doFetch.ts:6 puts it on each
# request, the POSTs to /query, /metric-payload-options, /metrics, /tag-keys, /tag-values
# (src/DataSource.ts:73-76, 145-152, 165-171, 199-201, 209-211) and /variable
# (src/MetricFindQuery.ts:26-32). The Infinity panels of our dashboards only GET
# (grafana/dashboards_gen/queries.py `_infinity`). A route that does not take the method keeps
# its 404 / 405 (it reads no body).
def _check_json_body() -> tuple[Response, int] | None:
    if request.method in _BODYLESS or request.routing_exception is not None:
        return None
    if request.mimetype == "application/json":  # parameters (`; charset=utf-8`) stripped
        return None
    sent = request.headers.get("Content-Type")
    what = f"Content-Type {sent[:100]!r}" if sent else "no Content-Type"
    return _error(
        415,
        f"{request.method} {request.path[:200]} sent {what}; this server reads only JSON "
        "bodies: send 'Content-Type: application/json'",
    )


def _register_errors(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> tuple[Response, int]:
        return _error(exc.status, exc.message)

    @app.errorhandler(HistoryUnavailable)
    def unavailable(exc: HistoryUnavailable) -> tuple[Response, int]:
        _log.warning("history store unavailable: %s", exc)
        return _error(503, f"history store unavailable: {exc}")

    @app.errorhandler(UnknownRun)
    @app.errorhandler(UnknownField)
    @app.errorhandler(registry_pkg.UnknownName)
    def unknown(exc: Exception) -> tuple[Response, int]:
        return _error(404, str(exc))

    @app.errorhandler(UnsafeName)
    def unsafe(exc: UnsafeName) -> tuple[Response, int]:
        return _error(400, str(exc))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        messages = {
            404: f"no such route: {request.method} {request.path[:200]}",
            405: f"method {request.method} not allowed on {request.path[:200]}",
            413: "request body too large",
        }
        response, _ = _error(status, messages.get(status, exc.description or exc.name))
        allow = exc.get_response().headers.get("Allow")
        if allow:
            response.headers["Allow"] = allow
        return response, status

    @app.errorhandler(Exception)
    def internal(exc: Exception) -> tuple[Response, int]:
        _log.exception("unhandled error on %s %s", request.method, request.path)
        return _error(500, f"internal error ({type(exc).__name__}); see the server log")


def create_app(
    config: DatasourceConfig,
    registry: registry_pkg.Registry | None = None,
    *,
    history: HistoryStore | None = None,
    follow_state: Callable[[], FollowState] | None = None,
    connection_stats: Callable[[], Mapping[str, int]] | None = None,
) -> Flask:
    """The datasource app. The registry defaults to the built-in one and the history store to
    what `config` names (InfluxDB when a URL is set, else the embedded outbox). `follow_state`
    tells what the follower of `config.following` (`rlvitals serve LOGDIR`) is doing: the run
    list and `/api/health` show it; `connection_stats`, what the server's connection guard did
    (`grafana.serving`), is in `/api/health` too.

    Every request passes, in order: the Host allowlist (`config.allows_host`, 400), the bearer
    token when one is set (401; not on the public paths), and for a method with a body the
    JSON Content-Type (415); each answers `{"error": message}`."""
    reg = registry if registry is not None else registry_pkg.load()
    store = history if history is not None else open_history(config, reg)
    # static_folder=None: Flask's default `/static/<path>` would serve `./static` of whatever
    # directory `serve` was started in (the import name is no module, so its root is the cwd);
    # the dashboard's own files are served by dashboard_page under /live/static/
    app = Flask("rlvitals.datasource", static_folder=None)
    app.json = SafeJSONProvider(app)
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    attach(
        app,
        Services(
            config=config,
            registry=reg,
            store=store,
            lifecycle=config.lifecycle,
            follow_state=follow_state,
            connection_stats=connection_stats,
        ),
    )
    # in this order: a foreign Host learns nothing, not even whether a token is needed
    app.before_request(_check_host)
    app.before_request(_check_auth)
    app.before_request(_check_json_body)
    for module in (
        api_runs,
        api_cards,
        api_series,
        api_events,
        api_terms,
        pages,
        simpod,
        report_page,
        api_fields,
        api_manage,
        dashboard_page,
        login,
        api_alert_notifications,
    ):
        app.register_blueprint(module.blueprint)
    _register_errors(app)
    return app
