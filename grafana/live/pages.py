"""The live dashboard's two HTML pages: the run list and the run page (one or several runs).

Both are small server-rendered shells. The run list is complete HTML (a script only refreshes the
statuses); the run page carries what its script needs as JSON in a `<script type=
"application/json">` and draws everything from the JSON API. Every script and style comes from
rlvitals itself (`STATIC`, uPlot vendored under `static/vendor/`): the Content-Security-Policy
forbids anything else, so the dashboard works offline.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from .i18n import UI

__all__ = ["CSP", "PALETTE", "STATIC", "render_index", "render_run"]

STATIC = Path(__file__).parent / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'"
)

# One colour per compared run (Okabe–Ito, readable by the colour-blind), in this order.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442")

_PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/live/report.css">
<link rel="stylesheet" href="/live/static/vendor/uplot/uPlot.min.css">
<link rel="stylesheet" href="/live/static/live.css">
</head>
<body data-lang="{lang}" class="live">
{body}
{scripts}
</body>
</html>
"""


def _when(ts: float | None) -> str:
    if ts is None:
        return "–"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _lang_link(lang: str, query: Sequence[tuple[str, str]], path: str) -> str:
    from urllib.parse import urlencode

    other = "zh" if lang == "en" else "en"
    q = [(k, v) for k, v in query if k != "lang"] + [("lang", other)]
    href = f"{path}?{urlencode(q)}"
    return f'<a class="lang-switch" href="{escape(href, quote=True)}">{escape(UI[lang]["other_lang"])}</a>'


def _status(status: str, lang: str) -> str:
    s = escape(status, quote=True)
    return f'<span class="run-status rs-{s}" data-status="{s}">{escape(UI[lang].get(status, status))}</span>'


def render_index(
    rows: Sequence[Mapping[str, Any]], lang: str, query: Sequence[tuple[str, str]]
) -> str:
    """The run list: one row per run of `/api/runs`."""
    ui = UI[lang]
    head = "".join(
        f"<th>{escape(ui[k])}</th>"
        for k in ("run", "project", "framework", "status", "last_step", "started")
    )
    body_rows = []
    for r in rows:
        name = str(r["run"])
        from urllib.parse import urlencode

        href = "/run?" + urlencode([("run", name), ("lang", lang)])
        step = r.get("last_step")
        body_rows.append(
            f'<tr data-run="{escape(name, quote=True)}">'
            f'<td><input type="checkbox" class="pick" value="{escape(name, quote=True)}" '
            f'aria-label="{escape(name, quote=True)}"> '
            f'<a class="run-link" href="{escape(href, quote=True)}">{escape(name)}</a></td>'
            f"<td>{escape(str(r.get('project') or '–'))}</td>"
            f"<td>{escape(str(r.get('framework') or '–'))}</td>"
            f'<td class="status-cell">{_status(str(r["status"]), lang)}</td>'
            f'<td class="last-step">{"–" if step is None else f"{int(step):,}"}</td>'
            f"<td>{escape(_when(r.get('started')))}</td></tr>"
        )
    table = (
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table>'
        if body_rows
        else f'<p class="empty">{escape(ui["no_runs"])}</p>'
    )
    body = (
        f"<header><h1>{escape(ui['title'])}</h1>{_lang_link(lang, query, '/')}</header>"
        f"{table}"
        f'<p><button type="button" id="compare" disabled>{escape(ui["compare"])}</button> '
        f'<span class="hint">{escape(ui["compare_hint"])}</span></p>'
        f'<script type="application/json" id="boot">{_json({"lang": lang, "strings": ui})}</script>'
    )
    return _PAGE.format(
        lang=lang,
        title=escape(ui["title"]),
        body=body,
        scripts='<script src="/live/static/runs.js"></script>',
    )


def render_run(
    runs: Sequence[str],
    lang: str,
    query: Sequence[tuple[str, str]],
    *,
    refresh_s: int,
    points: int,
    max_points: int,
) -> str:
    """The run page for one run, or several overlaid (a colour each)."""
    ui = UI[lang]
    boot = {
        "lang": lang,
        "runs": list(runs),
        "colors": [PALETTE[i % len(PALETTE)] for i in range(len(runs))],
        "strings": ui,
        "refresh_ms": refresh_s * 1000,
        "points": points,
        "max_points": max_points,
    }
    title = f"{ui['run_title']}: {', '.join(runs)}"
    from urllib.parse import urlencode

    back = "/?" + urlencode([("lang", lang)])
    body = (
        f'<header><p><a href="{escape(back, quote=True)}">← {escape(ui["all_runs"])}</a></p>'
        f"<h1>{escape(title)}</h1>{_lang_link(lang, query, '/run')}"
        '<div id="run-chips"></div><p id="live-state"></p></header>'
        '<div id="toolbar"></div><div id="error" role="alert" hidden></div>'
        f'<h2>{escape(ui["config"])}</h2><div id="config"></div>'
        '<div id="panels"></div>'
        f'<h2>{escape(ui["events"])}</h2><div id="events"></div>'
        f'<script type="application/json" id="boot">{_json(boot)}</script>'
    )
    return _PAGE.format(
        lang=lang,
        title=escape(title),
        body=body,
        scripts=(
            '<script src="/live/static/vendor/uplot/uPlot.iife.min.js"></script>'
            '<script src="/live/static/run.js"></script>'
        ),
    )


def _json(obj: object) -> str:
    # Inside <script>: no "</" can close the element early.
    return json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
