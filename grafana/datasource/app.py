"""The Flask app factory: blueprints, JSON errors, optional bearer-token auth, body-size limit."""

from __future__ import annotations

import hmac
import logging

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

import registry as registry_pkg

from . import (
    api_cards,
    api_events,
    api_fields,
    api_runs,
    api_series,
    api_terms,
    dashboard_page,
    pages,
    report_page,
    simpod,
)
from .config import DatasourceConfig
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
from .services import Services, attach, services

__all__ = ["create_app"]

_log = logging.getLogger(__name__)
_OPEN_PATHS = frozenset({"/api/health", "/terms", "/terms/", "/api/terms"})
_OPEN_PREFIXES = ("/terms/", "/api/terms/")
"""Registry text is public: the term pages, glossary and runbook links that dashboards, alert
notifications and the report open in a plain browser tab (which sends no bearer token). Run data
(runs, cards, series, events, the report, the simpod protocol) stays behind the token."""


def _is_open(path: str) -> bool:
    return path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES)


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def _check_auth() -> tuple[Response, int] | None:
    token = services().config.token
    if token is None or _is_open(request.path):
        return None
    sent = request.headers.get("Authorization", "")
    if hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {token}".encode()):
        return None
    response, status = _error(
        401,
        "missing or wrong bearer token: send 'Authorization: Bearer <RLVITALS_DATASOURCE_TOKEN>'",
    )
    response.headers["WWW-Authenticate"] = 'Bearer realm="rlvitals"'
    return response, status


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
) -> Flask:
    """The datasource app. The registry defaults to the built-in one and the history store to
    what `config` names (InfluxDB when a URL is set, else the embedded outbox)."""
    reg = registry if registry is not None else registry_pkg.load()
    store = history if history is not None else open_history(config, reg)
    app = Flask("rlvitals.datasource")
    app.json = SafeJSONProvider(app)
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    attach(app, Services(config=config, registry=reg, store=store))
    app.before_request(_check_auth)
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
        dashboard_page,
    ):
        app.register_blueprint(module.blueprint)
    _register_errors(app)
    return app
