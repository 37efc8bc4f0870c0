"""The live dashboard's pages and files (`grafana/live`).

- `GET /[?lang=en|zh][&filter=TEXT][&refresh=SECONDS]` for a browser (its `Accept` prefers
  `text/html`): the run list, polling `/api/runs` to stay current. Grafana's JSON
  datasource health check (`GET /`, `Accept: application/json, ...`) and any client not asking
  for HTML still get the simpod JSON answer (`simpod.root`).
- `GET /run?run=R[&run=R2...][&lang=en|zh][&refresh=SECONDS]`: the run page, several runs
  overlaid with a colour each.
- `GET /live/static/<file>`: the page's script and styles and the vendored uPlot;
  `GET /live/report.css`: the report's stylesheet, so cards and tooltips look as on the report.
"""

from __future__ import annotations

import time
from pathlib import Path

from flask import Blueprint, Request, Response, request, send_from_directory
from werkzeug.security import safe_join

from . import params
from .errors import BadRequest, NotFound
from .reading import reading
from .run_meta import page_colors, read_meta, run_colors, with_meta
from .run_summary import run_summary
from .services import services

__all__ = ["MAX_COMPARED", "blueprint", "index_page", "wants_html"]

blueprint = Blueprint("dashboard_page", __name__)

MAX_COMPARED = 8
_HTML = "text/html"


def wants_html(req: Request) -> bool:
    """Whether the client prefers HTML to JSON (a browser does; Grafana and curl do not)."""
    best = req.accept_mimetypes.best_match(["application/json", _HTML])
    return best == _HTML and req.accept_mimetypes[_HTML] > req.accept_mimetypes["application/json"]


def _can_edit() -> bool:
    """Whether the pages offer to change runs: what `api_manage` would accept."""
    config = services().config
    return bool(config.allow_edit) and not config.uses_influx


def _page(html: str) -> Response:
    from grafana.live import CSP

    response = Response(html, mimetype="text/html")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def index_page() -> Response:
    from grafana.live import render_index

    svc = services()
    lang = params.lang(request.args) or "en"
    # how often the list polls /api/runs (as on the run page; 5 s unless asked)
    refresh = params.integer(request.args, "refresh", 5, 1, 3600)
    assert refresh is not None
    now = time.time()
    meta = read_meta(svc.config.outbox_path)
    names = svc.store.runs()
    colors = run_colors(names, meta)
    rows = [
        with_meta(run_summary(svc.store, svc.lifecycle, r, now), meta, colors[r]) for r in names
    ]
    query = list(request.args.items(multi=True))
    return _page(
        render_index(
            rows, lang, query, refresh_s=refresh, can_edit=_can_edit(), source=reading(svc)
        )
    )


@blueprint.get("/run")
def run_page() -> Response:
    from grafana.live import render_run

    svc = services()
    args = request.args
    lang = params.lang(args) or "en"
    refresh = params.integer(args, "refresh", 5, 1, 3600)
    names = [n for n in args.getlist("run") if n]
    if not names:
        raise BadRequest("missing parameter 'run': /run?run=NAME (repeat run= to overlay runs)")
    if len(names) > MAX_COMPARED:
        raise BadRequest(f"at most {MAX_COMPARED} runs can be overlaid, got {len(names)}")
    stored = svc.store.runs()
    known = set(stored)
    for name in names:
        params.text({"run": name}, "run")
        if name not in known:
            raise NotFound(f"unknown run {name[:200]!r}; GET /api/runs lists the runs")
    assert refresh is not None
    shown = list(dict.fromkeys(names))
    html = render_run(
        shown,
        lang,
        list(args.items(multi=True)),
        refresh_s=refresh,
        points=min(svc.config.default_points, svc.config.max_points),
        max_points=svc.config.max_points,
        can_edit=_can_edit(),
        max_compared=MAX_COMPARED,
        colors=page_colors(shown, stored, read_meta(svc.config.outbox_path)),
    )
    return _page(html)


@blueprint.get("/live/static/<path:name>")
def static_file(name: str) -> Response:
    from grafana.live import STATIC

    path = safe_join(str(STATIC), name)
    if path is None or not Path(path).is_file():
        raise NotFound(f"no such dashboard file: {name[:200]}")
    response = send_from_directory(STATIC, name, max_age=300)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@blueprint.get("/live/report.css")
def report_css() -> Response:
    from grafana.report.template import STYLE

    return Response(STYLE, mimetype="text/css")
