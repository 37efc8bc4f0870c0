"""`GET /api/terms[?lang=]` and `GET /api/terms/<id>`: the glossary (terms and metrics)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from . import params
from .errors import NotFound
from .glossary import entry, glossary
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_terms", __name__)


@blueprint.get("/api/terms")
def terms() -> Response:
    svc = services()
    lang = params.lang(request.args, default=None)
    return jsonify({"lang": lang, "terms": glossary(svc.registry, lang)})


@blueprint.get("/api/terms/<path:entry_id>")
def term(entry_id: str) -> Response:
    svc = services()
    lang = params.lang(request.args, default=None)
    found = entry(svc.registry, entry_id, lang)
    if found is None:
        raise NotFound(f"no term or metric with id {entry_id[:100]!r}; GET /api/terms lists them")
    return jsonify(found)
