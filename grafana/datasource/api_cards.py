"""`GET /api/cards?run=R[&metric=M][&lang=en|zh]`: diagnosis cards (by default every core metric
and every other registry metric the run logged)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from . import params
from .cards import cards_for
from .run_summary import name_counts
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_cards", __name__)


@blueprint.get("/api/cards")
def cards() -> Response:
    svc = services()
    args = request.args
    lang = params.lang(args) or "en"
    run = params.check_run(svc.store, args)
    metric = params.text(args, "metric", required=False)
    # every core metric and every other metric the run logged (`carded_metrics`)
    ids = None if metric is None else [params.check_metric(svc.registry, metric).id]
    result = cards_for(svc.registry, svc.store, run, ids, lang, svc.config.card_window)
    # how many of the run's names the registry recognised: a run whose tags are all unknown
    # has cards that can only say no data, and this says why (with --map suggestions)
    names = name_counts(
        svc.registry, svc.store.logged_fields(run), svc.store.run_info(run).framework
    )
    return jsonify({"run": run, "lang": lang, "names": names, "cards": result})
