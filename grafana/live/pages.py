"""The live dashboard's two HTML pages: the run list and the run page (one or several runs).

Both are small server-rendered shells. The run list is complete HTML (its script polls
`/api/runs` to add, update and remove rows, and filters them); the run page carries what its
script needs as JSON in a `<script type="application/json">` and draws everything from the
JSON API. Every script and style comes from rlvitals itself (`STATIC`, uPlot vendored under
`static/vendor/`): the Content-Security-Policy forbids anything else, so the dashboard works
offline. Both pages load `theme.js` in their head, so a light or dark scheme chosen on the run
page applies before anything paints.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from .i18n import UI, UNITS

__all__ = ["CSP", "STATIC", "render_index", "render_run"]

STATIC = Path(__file__).parent / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'"
)

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
<script src="/live/static/theme.js"></script>
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


def _status(status: str, lang: str, reason: str | None = None) -> str:
    # runs.js builds the same badge (`badge()`); keep the two in step.
    s = escape(status, quote=True)
    title = f' title="{escape(reason, quote=True)}"' if reason else ""
    return (
        f'<span class="run-status rs-{s}" data-status="{s}"{title}>'
        f"{escape(UI[lang].get(status, status))}</span>"
    )


def _manage_cells(r: Mapping[str, Any], lang: str, can_edit: bool) -> str:
    """The row's tags cell and, when runs may be changed here, its rename / delete buttons;
    runs.js builds the same (`manageCells()`)."""
    ui = UI[lang]
    tags = "".join(f'<span class="tag">{escape(str(t))}</span>' for t in r.get("tags") or ())
    cells = f'<td class="tags">{tags}</td>'
    if can_edit:
        cells += (
            f'<td class="actions"><button type="button" class="act-rename">'
            f"{escape(ui['rename'])}</button> "
            f'<button type="button" class="act-delete">{escape(ui["delete"])}</button></td>'
        )
    return cells


def _run_row(r: Mapping[str, Any], lang: str, can_edit: bool = False) -> str:
    """One row of the run list; runs.js builds the same markup (`buildRow()`) for polled runs."""
    from urllib.parse import urlencode

    name = str(r["run"])
    project = str(r.get("project") or "")
    href = "/run?" + urlencode([("run", name), ("lang", lang)])
    step = r.get("last_step")
    # why the run is in its state, e.g. "RuntimeError: boom" (None when the store does not say)
    reason = str(r["status_reason"]) if r.get("status_reason") else None
    tags = " ".join(str(t) for t in r.get("tags") or ())
    return (
        f'<tr data-run="{escape(name, quote=True)}" data-project="{escape(project, quote=True)}" '
        f'data-tags="{escape(tags, quote=True)}">'
        f'<td><input type="checkbox" class="pick" value="{escape(name, quote=True)}" '
        f'aria-label="{escape(name, quote=True)}"> '
        f'<a class="run-link" href="{escape(href, quote=True)}">{escape(name)}</a></td>'
        f"<td>{escape(project or '–')}</td>"
        f"<td>{escape(str(r.get('framework') or '–'))}</td>"
        f'<td class="status-cell">{_status(str(r["status"]), lang, reason)}</td>'
        f'<td class="last-step">{"–" if step is None else f"{int(step):,}"}</td>'
        f"<td>{escape(_when(r.get('started')))}</td>{_manage_cells(r, lang, can_edit)}</tr>"
    )


def _no_runs(ui: Mapping[str, str], source: Mapping[str, Any] | None) -> str:
    if source is None:
        return ui["no_runs"]
    return ui["no_runs_in"].format(store=source["store"])


def _reading_line(ui: Mapping[str, str], source: Mapping[str, Any] | None) -> str:
    """ "store: /abs/path · following: runs/ (N logs)" and the follower's failure, if any; runs.js
    updates the counts (`.logs-count`, in folder order) and the failure (`#follow-error`)."""
    if source is None:
        return ""
    parts = [
        escape(ui["reading_store"]).replace("{store}", f"<code>{escape(source['store'])}</code>")
    ]
    folders = source.get("following") or []
    if folders:
        shown = []
        for folder in folders:
            n = "…" if folder.get("logs") is None else str(folder["logs"])
            shown.append(
                escape(ui["reading_logs"])
                .replace("{path}", f"<code>{escape(str(folder['path']))}</code>")
                .replace("{n}", f'<span class="logs-count">{escape(n)}</span>')
            )
        parts.append(escape(ui["reading_following"]).replace("{folders}", ", ".join(shown)))
    follower = source.get("follower") or {}
    failed = follower.get("state") == "restarting"
    error = (
        ui["follow_failed"].format(error=follower.get("error"), n=follower.get("restarts"))
        if failed
        else ""
    )
    return (
        f'<p class="reading" id="reading">{" · ".join(parts)} '
        f'<span id="follow-error" class="filter-error" role="alert"{"" if failed else " hidden"}>'
        f"{escape(error)}</span></p>"
    )


def render_index(
    rows: Sequence[Mapping[str, Any]],
    lang: str,
    query: Sequence[tuple[str, str]],
    *,
    refresh_s: int = 5,
    can_edit: bool = False,
    source: Mapping[str, Any] | None = None,
) -> str:
    """The run list: one row per run of `/api/runs`, a filter box, and the compare button;
    with `can_edit`, rename and delete buttons on each row (`api_manage`).

    `source` is what the server reads (`grafana.datasource.reading`): the store, named in a line
    above the table and in the empty-store message, and the LOGDIRs `serve` follows with their
    log counts and the follower's last failure, which runs.js keeps current from `/api/health`.

    The table with its filter box and the empty-store message are both rendered, whichever
    does not apply hidden: runs.js polls every `refresh_s` seconds and swaps them when the
    first run appears (or the last one is deleted), so it never builds the table's head itself.
    `?filter=` only fills the box; runs.js applies it (one regex dialect, the browser's).
    """
    ui = UI[lang]
    head = "".join(
        f"<th>{escape(ui[k])}</th>"
        for k in ("run", "project", "framework", "status", "last_step", "started", "tags")
    ) + (f"<th>{escape(ui['actions'])}</th>" if can_edit else "")
    empty = not rows
    hidden = " hidden" if empty else ""
    wanted = next((v for k, v in reversed(query) if k == "filter"), "")
    filter_bar = (
        f'<p class="run-filter"{hidden}><label>{escape(ui["filter"])} '
        f'<input type="search" id="filter" value="{escape(wanted, quote=True)}" '
        f'placeholder="{escape(ui["filter_hint"], quote=True)}" '
        f'aria-describedby="filter-error filter-count" autocomplete="off"></label> '
        '<span id="filter-error" class="filter-error" role="alert" hidden></span> '
        '<span id="filter-count" class="hint"></span></p>'
    )
    table = (
        f'<table class="runs"{hidden}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(_run_row(r, lang, can_edit) for r in rows)}</tbody></table>"
        f'<p class="empty"{"" if empty else " hidden"}>{escape(_no_runs(ui, source))}</p>'
    )
    boot = {
        "lang": lang,
        "strings": ui,
        "refresh_ms": refresh_s * 1000,
        "can_edit": can_edit,
        "following": bool(source and source.get("following")),
    }
    body = (
        f"<header><h1>{escape(ui['title'])}</h1>{_lang_link(lang, query, '/')}</header>"
        f"{_reading_line(ui, source)}"
        f'{filter_bar}<p id="manage-error" class="filter-error" role="alert" hidden></p>{table}'
        f'<p><button type="button" id="compare" disabled>{escape(ui["compare"])}</button> '
        f'<span class="hint">{escape(ui["compare_hint"])}</span></p>'
        f'<script type="application/json" id="boot">{_json(boot)}</script>'
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
    can_edit: bool = False,
    max_compared: int = 8,
    colors: Mapping[str, str] | None = None,
) -> str:
    """The run page for one run, or several overlaid, each in its colour (`colors`: the run's
    own, `grafana.datasource.run_meta.page_colors`). One run's page shows its tags and notes
    under the header (run_meta.js), editable with `can_edit`."""
    ui = UI[lang]
    boot = {
        "can_edit": can_edit,
        "lang": lang,
        "runs": list(runs),
        "colors": [(colors or {}).get(r, "#5b6473") for r in runs],
        "strings": ui,
        "units": UNITS[lang],
        "refresh_ms": refresh_s * 1000,
        "points": points,
        "max_points": max_points,
        "max_compared": max_compared,
    }
    title = f"{ui['run_title']}: {', '.join(runs)}"
    from urllib.parse import urlencode

    back = "/?" + urlencode([("lang", lang)])
    # tags and notes belong to one run: an overlay of several shows none
    meta = '<section id="run-meta"></section>' if len(runs) == 1 else ""
    body = (
        f'<header><p><a href="{escape(back, quote=True)}">← {escape(ui["all_runs"])}</a></p>'
        f"<h1>{escape(title)}</h1>{_lang_link(lang, query, '/run')}"
        '<div id="run-chips"></div><p id="run-picker" class="run-picker"></p>'
        '<p id="live-state"></p><p id="run-backlog" hidden></p></header>'
        f"{meta}"
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
            '<script src="/live/static/run_meta.js"></script>'
            '<script src="/live/static/run_picker.js"></script>'
            '<script src="/live/static/run_backlog.js"></script>'
        ),
    )


def _json(obj: object) -> str:
    # Inside <script>: no "</" can close the element early.
    return json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
