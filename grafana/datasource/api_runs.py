"""`GET /api/health` and `GET /api/runs` (each run's project, framework, lifecycle status
(live / stalled / finished), last step and wall time, start)."""

from __future__ import annotations

import time

from flask import Blueprint, Response, jsonify

from rlvitals import __version__

from .history import HistoryError
from .run_summary import run_summary
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
    now = time.time()
    out = [run_summary(svc.store, svc.lifecycle, name, now) for name in svc.store.runs()]
    return jsonify({"runs": out})
