"""What the live dashboard reads about one run, registered names or not.

- `GET /api/run?run=R`: the run-list row (status from `exporter.lifecycle`), its colour, its config
  (as stored, and as the config table shows it: `settings`, `run_settings`) and how many of its
  logged names the registry recognises (`names`).
- `GET /api/fields?run=R[&lang=en|zh]`: every field the run logged, grouped and ordered
  (`run_fields`), with the registry's title, unit, framework spellings and tooltip.
- `GET /api/field_series?run=R&field=F[&points=N][&from=STEP&to=STEP][&format=json|csv]
  [&download=1]`: one field's steps, values (bucket means past `points`, from the store's
  rollups), the wall time of each point and the registry's healthy band there (`band_low`,
  `band_high`; None without one) with the stage boundaries it follows (`stages`, those the run's
  cards judge it in); `download=1` sends it as a file.
- `GET /api/card_html?run=R[&lang=en|zh]`: the report's diagnosis card of each registry metric
  the run logged, as HTML.
"""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import numpy as np
from flask import Blueprint, Response, jsonify, request

from . import params
from .api_series import MAX_STEP
from .cards import cards_for, stages_of_run
from .errors import BadRequest, NotFound
from .history import Points, metric_of_field
from .jsonio import finite
from .run_fields import ordered_fields
from .run_meta import read_meta, run_colors
from .run_settings import run_settings
from .run_summary import name_counts, run_summary
from .series import band_edges, early_value
from .services import Services, services

__all__ = ["CLOCK_SAMPLES", "blueprint"]

blueprint = Blueprint("api_fields", __name__)

CLOCK_SAMPLES = 256
"""(step, wall time) pairs read per series to place it on a time axis: between them wall time is
interpolated, which is exact for a steady step rate and close enough to read a chart by."""

_FORMATS = ("json", "csv")


def _run(svc: Services) -> str:
    return params.check_run(svc.store, request.args)


def _field(svc: Services, run: str) -> tuple[str, dict[str, str]]:
    name = params.text(request.args, "field")
    assert name is not None
    logged = dict(svc.store.logged_fields(run))
    if name not in logged:
        raise NotFound(
            f"run {run!r} logged no field {name!r}; GET /api/fields?run=... lists its fields"
        )
    return name, logged


@blueprint.get("/api/run")
def run_info() -> Response:
    svc = services()
    run = _run(svc)
    out = run_summary(svc.store, svc.lifecycle, run, time.time())
    out["color"] = run_colors(svc.store.runs(), read_meta(svc.config.outbox_path))[run]
    out["config"] = dict(svc.store.run_config(run))
    out["settings"] = run_settings(svc.registry, svc.store, run)
    out["names"] = name_counts(svc.registry, svc.store.logged_fields(run), out["framework"])
    return jsonify(out)


@blueprint.get("/api/fields")
def fields() -> Response:
    svc = services()
    lang = params.lang(request.args) or "en"
    run = _run(svc)
    from grafana.report import tooltip_html

    # Transforms of the run's own framework when it is known (else every framework's).
    framework = svc.store.run_info(run).framework
    out: list[dict[str, Any]] = []
    for entry in ordered_fields(svc.registry, svc.store.logged_fields(run), framework):
        m = entry.metric
        row: dict[str, Any] = {
            "field": entry.field,
            "group": entry.group,
            "measurement": entry.measurement,
            "metric": None if m is None else m.id,
            "title": entry.field if m is None else m.title.get(lang),
            "unit": None if m is None else m.unit,
            "aliases": [] if m is None else sorted({a.key for a in m.aliases}),
            "transforms": []
            if m is None
            else [
                {"framework": a.framework, "key": a.key, "kind": a.transform.kind}
                # the factor of x * factor and of factor / x: the page inverts both
                | (
                    {"factor": a.transform.factor}
                    if a.transform.kind in ("scale", "reciprocal")
                    else {}
                )
                for a in m.aliases
                if a.transform.kind != "identity" and framework in (None, a.framework)
            ],
            "tooltip": None if m is None else tooltip_html(m, lang),
        }
        if entry.bookkeeping is not None:
            # what the framework's counter or clock is, and where that was read
            row["bookkeeping"] = {
                "framework": entry.bookkeeping.framework,
                "meaning": entry.bookkeeping.meaning.get(lang),
                "source": entry.bookkeeping.source,
            }
        if m is not None and entry.field != m.id:
            row["title"] = f"{m.title.get(lang)} · {entry.field.partition('/')[2]}"
        out.append(row)
    return jsonify({"run": run, "lang": lang, "fields": out})


def _wall_times(svc: Services, run: str, field: str, p: Points) -> list[float | None]:
    clock = svc.store.clock(run, field, CLOCK_SAMPLES)
    if not len(clock) or not len(p):
        return [None] * len(p)
    walls = np.interp(p.steps.astype(np.float64), clock.steps.astype(np.float64), clock.values)
    return [round(float(w), 6) for w in walls.tolist()]


@blueprint.get("/api/field_series")
def field_series() -> Response:
    svc = services()
    args = request.args
    points = params.integer(args, "points", svc.config.default_points, 2, svc.config.max_points)
    start = params.integer(args, "from", None, 0, MAX_STEP)
    end = params.integer(args, "to", None, 0, MAX_STEP)
    fmt = params.choice(args, "format", _FORMATS, "json")
    download = params.choice(args, "download", ("0", "1"), "0") == "1"
    if start is not None and end is not None and start > end:
        raise BadRequest(f"parameter 'from' ({start}) is after 'to' ({end})")
    run = _run(svc)
    field, _ = _field(svc, run)
    assert points is not None
    p = svc.store.series(run, field, start, end, points)
    steps, values = p.steps.tolist(), p.values.tolist()
    walls = _wall_times(svc, run, field, p)
    band_low, band_high, stages = _band(svc, run, field, p)
    filename = _filename(run, field, fmt)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["step", "wall_time", "value"])
        for s, w, v in zip(steps, walls, values, strict=True):
            fv = finite(v)
            writer.writerow([s, "" if w is None else f"{w:.6f}", "" if fv is None else repr(fv)])
        response = Response(buf.getvalue(), mimetype="text/csv")
    else:
        response = jsonify(
            {
                "run": run,
                "field": field,
                "points": len(steps),
                "bucket_steps": p.bucket,
                "source_points": p.total,
                "steps": steps,
                "values": [finite(v) for v in values],
                "wall_times": walls,
                "band_low": band_low,
                "band_high": band_high,
                "stages": stages,
            }
        )
    if download:
        response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _band(
    svc: Services, run: str, field: str, p: Points
) -> tuple[list[float | None] | None, list[float | None] | None, dict[str, Any] | None]:
    """The registry's healthy band at each point, scaled to the run (as the report shades it),
    and the stages it follows; None for a field without a declared band."""
    metric = metric_of_field(svc.registry, field)
    if metric is None or metric.bands is None or not len(p):
        return None, None, None
    config = svc.store.run_config(run)
    # the stages the run's cards judge it in: the chart and the card under it agree
    stages = stages_of_run(svc.registry, svc.store, run, svc.config.card_window, svc.stages)
    early = None
    if metric.bands.basis == "early_value":
        early = early_value(svc.store, run, field, stages)
    low, high = band_edges(metric, p.steps, stages, config, early)
    if all(v is None for v in low) and all(v is None for v in high):
        return None, None, None
    said = {"early_end": stages.early_end, "mid_end": stages.mid_end, "reason": stages.reason}
    return low, high, said


def _filename(run: str, field: str, fmt: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{run}__{field}")
    return f"{safe[:150]}.{fmt}"


@blueprint.get("/api/card_html")
def card_html() -> Response:
    svc = services()
    lang = params.lang(request.args) or "en"
    run = _run(svc)
    from grafana.report import card_html as render_card

    ids = [
        e.metric.id
        for e in ordered_fields(svc.registry, svc.store.logged_fields(run))
        if e.metric is not None and e.field == e.metric.id
    ]
    cards = cards_for(svc.registry, svc.store, run, ids, lang, svc.config.card_window)
    return jsonify(
        {"run": run, "lang": lang, "cards": {c["metric"]: render_card(c, lang) for c in cards}}
    )
