"""`GET /api/events?run=R`: step-keyed events for annotations."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from . import params
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_events", __name__)


@blueprint.get("/api/events")
def events() -> Response:
    svc = services()
    run = params.check_run(svc.store, request.args)
    found = svc.store.events(run, svc.config.max_events)
    return jsonify({"run": run, "events": [e.to_dict() for e in found]})
