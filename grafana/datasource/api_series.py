"""`GET /api/series?run=R&metric=M[&points=N][&smoothing=S][&from=STEP&to=STEP][&rank=K]`.

A metric several ranks of a job logged is read from rank 0, each row with the lowest and
highest value of any rank (`rank_low`, `rank_high`); `rank=K` reads rank K's alone."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from registry.diagnosis.stats import EMA_MAX_WEIGHT

from . import params
from .errors import BadRequest
from .series import series_payload
from .services import services

__all__ = ["MAX_STEP", "blueprint"]

blueprint = Blueprint("api_series", __name__)

MAX_STEP = 2**53


@blueprint.get("/api/series")
def series() -> Response:
    svc = services()
    args = request.args
    points = params.integer(args, "points", svc.config.default_points, 2, svc.config.max_points)
    smoothing = params.number(args, "smoothing", 0.0, 0.0, EMA_MAX_WEIGHT)
    start = params.integer(args, "from", None, 0, MAX_STEP)
    end = params.integer(args, "to", None, 0, MAX_STEP)
    rank = params.integer(args, "rank", None, 0, 2**31)
    if start is not None and end is not None and start > end:
        raise BadRequest(f"parameter 'from' ({start}) is after 'to' ({end})")
    run = params.check_run(svc.store, args)
    field, metric = params.check_field(svc.registry, params.text(args, "metric") or "")
    assert points is not None
    payload = series_payload(
        svc.registry,
        svc.store,
        run,
        field,
        metric,
        points=points,
        smoothing=smoothing,
        start=start,
        end=end,
        rank=rank,
        card_window=svc.config.card_window,
        memo=svc.stages,
    )
    return jsonify(payload)
