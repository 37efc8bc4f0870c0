"""`GET /api/health` and `GET /api/runs`."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from rlvitals import __version__

from .history import HistoryError
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_runs", __name__)


@blueprint.get("/api/health")
def health() -> Response:
    svc = services()
    store: dict[str, object] = {"kind": svc.store.kind, "ok": True}
    try:
        store["runs"] = len(svc.store.runs())
    except HistoryError as exc:
        store["ok"] = False
        store["error"] = str(exc)
    body = jsonify(
        {
            "status": "ok" if store["ok"] else "degraded",
            "version": __version__,
            "store": store,
            "metrics": len(svc.registry.metrics),
            "terms": len(svc.registry.terms),
            "auth": svc.config.token is not None,
        }
    )
    # a health check (compose, a load balancer) reads the status code: the store being down is
    # not healthy, whatever the body says
    if not store["ok"]:
        body.status_code = 503
    return body


@blueprint.get("/api/runs")
def runs() -> Response:
    svc = services()
    out = []
    for name in svc.store.runs():
        latest = svc.store.latest(name)
        out.append({"run": name, "last_step": latest.step, "last_wall_time": latest.wall_time})
    return jsonify({"runs": out})
