"""`GET /report?run=R[&lang=en|zh|both]`: the `rlvitals report` page, served live from the store.

The page is the same self-contained HTML the command writes (see `grafana/report`). Its
Content-Security-Policy forbids every external resource, so a page served here behaves exactly
like the shared file.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from . import params
from .errors import BadRequest
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("report_page", __name__)

_LANGS = ("en", "zh", "both")


@blueprint.get("/report")
def report() -> Response:
    from grafana.report import render_report

    svc = services()
    run = params.check_run(svc.store, request.args)
    lang = request.args.get("lang", "both")
    if lang not in _LANGS:
        raise BadRequest(f"parameter 'lang' must be one of {', '.join(_LANGS)}, got {lang[:20]!r}")
    html = render_report(
        svc.store,
        svc.registry,
        run,
        lang=lang,
        points=min(svc.config.default_points, svc.config.max_points),
        card_window=svc.config.card_window,
    )
    return Response(html, mimetype="text/html")
