"""The simpod JSON datasource protocol (`simpod-json-datasource`), as a compatibility layer.

Targets (the "metric" a panel picks): `series` (raw + smoothed + band of one metric, as time
series with time = step seconds, a table, or a numeric-x frame for trend panels), `cards`,
`terms`, `events` (annotation frames) and `runs` (with each run's colour). Payloads carry `run`,
`metric`, `points`, `smoothing`, `lang`, `format`; the same checks as the JSON API apply, so a bad
payload is a 400 naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flask import Blueprint, Response, jsonify, request

from registry.diagnosis.stats import EMA_MAX_WEIGHT

from . import params
from .api_series import MAX_STEP
from .cards import cards_for
from .dashboard_page import index_page, wants_html
from .errors import BadRequest
from .glossary import glossary
from .jsonio import json_body
from .run_meta import read_meta, run_colors
from .series import series_payload
from .services import Services, services

__all__ = ["TARGETS", "blueprint"]

blueprint = Blueprint("simpod", __name__)

TARGETS = ("series", "cards", "events", "terms", "runs")
_FORMATS = ("timeseries", "table", "frame")
# Each target is a history read (up to a second against InfluxDB for a long run): a request with
# 100 of them held a server thread for 4-8 s. A Grafana panel has a handful of targets.
_MAX_TARGETS = 16
_SERIES_COLUMNS = ("raw", "smooth", "band_low", "band_high")
_CARD_COLUMNS = (
    "metric",
    "status",
    "step",
    "value",
    "mean",
    "deviation_pct",
    "cv",
    "trend",
    "band",
    "reading",
    "actions",
    "related",
)
_TERM_COLUMNS = ("id", "kind", "title", "definition", "unit", "page")


def _select(name: str, label: str, *, reload: bool = False) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "select", "reloadMetric": reload}


def _input(name: str, label: str, placeholder: str) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "input", "placeholder": placeholder}


_METRICS: list[dict[str, Any]] = [
    {
        "label": "Series (raw, smoothed, healthy band)",
        "value": "series",
        "payloads": [
            _select("run", "Run", reload=True),
            _select("metric", "Metric"),
            _input("points", "Max points", "1000"),
            _input("smoothing", "Smoothing (EMA weight 0-0.999)", "0.6"),
            _select("format", "Format"),
        ],
    },
    {
        "label": "Diagnosis cards",
        "value": "cards",
        "payloads": [
            _select("run", "Run"),
            _select("metric", "Metric"),
            _select("lang", "Language"),
        ],
    },
    {"label": "Events (annotations)", "value": "events", "payloads": [_select("run", "Run")]},
    {"label": "Terms and metrics", "value": "terms", "payloads": [_select("lang", "Language")]},
    {"label": "Runs", "value": "runs", "payloads": []},
]


def _payload(raw: object) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"payload is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadRequest(f"payload must be a JSON object, not {type(raw).__name__}")
    return raw


def _target(body: Mapping[str, Any], key: str = "target") -> str:
    value = body.get(key)
    if not isinstance(value, str) or value not in TARGETS:
        shown = repr(value)[:60]
        raise BadRequest(f"{key} must be one of {', '.join(TARGETS)}, got {shown}")
    return value


def _options(svc: Services, name: str) -> list[dict[str, str]]:
    if name == "run":
        return [{"label": r, "value": r} for r in svc.store.runs()]
    if name == "metric":
        return [{"label": f"{m.title.en} ({m.id})", "value": m.id} for m in svc.registry.metrics]
    if name == "lang":
        return [{"label": "English", "value": "en"}, {"label": "中文", "value": "zh"}]
    if name == "format":
        return [{"label": f, "value": f} for f in _FORMATS]
    raise BadRequest(f"unknown payload name {name[:60]!r}; use run, metric, lang or format")


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        if value and all(isinstance(v, str) for v in value):
            return "; ".join(value)
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    return value


def _table(ref: str, columns: tuple[str, ...], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "type": "table",
        "refId": ref,
        "columns": [{"text": c} for c in columns],
        "rows": [[_cell(r.get(c)) for c in columns] for r in rows],
    }


def _series(svc: Services, ref: str, p: Mapping[str, Any], max_points: int | None) -> list[Any]:
    run = params.check_run(svc.store, p)
    field, metric = params.check_field(svc.registry, params.text(p, "metric") or "")
    default = min(svc.config.default_points, max_points or svc.config.default_points)
    points = params.integer(p, "points", max(2, default), 2, svc.config.max_points)
    smoothing = params.number(p, "smoothing", 0.0, 0.0, EMA_MAX_WEIGHT)
    start = params.integer(p, "from", None, 0, MAX_STEP)
    end = params.integer(p, "to", None, 0, MAX_STEP)
    if start is not None and end is not None and start > end:
        raise BadRequest(f"payload 'from' ({start}) is after 'to' ({end})")
    fmt = params.choice(p, "format", _FORMATS, "timeseries")
    assert points is not None
    data = series_payload(
        svc.registry, svc.store, run, field, metric,
        points=points, smoothing=smoothing, start=start, end=end,
        card_window=svc.config.card_window,
        memo=svc.stages,
    )  # fmt: skip
    rows: list[dict[str, Any]] = data["rows"]
    if fmt == "table":
        return [_table(ref, ("step", *_SERIES_COLUMNS), rows)]
    if fmt == "frame":
        fields = [{"name": "step", "type": "number", "values": [r["step"] for r in rows]}]
        fields += [
            {"name": c, "type": "number", "values": [r[c] for r in rows]} for c in _SERIES_COLUMNS
        ]
        return [{"refId": ref, "name": f"{run} {field}", "fields": fields}]
    out = []
    for c in _SERIES_COLUMNS:
        if c.startswith("band") and all(r[c] is None for r in rows):
            continue
        datapoints = [[r[c], r["step"] * 1000] for r in rows if r[c] is not None]
        out.append({"target": f"{field} {c}", "refId": ref, "datapoints": datapoints})
    return out


def _cards(svc: Services, ref: str, p: Mapping[str, Any], _: int | None) -> list[Any]:
    run = params.check_run(svc.store, p)
    lang = params.lang(p) or "en"
    metric = params.text(p, "metric", required=False)
    # as /api/cards: every core metric and every other metric the run logged
    ids = [params.check_metric(svc.registry, metric).id] if metric else None
    cards = cards_for(svc.registry, svc.store, run, ids, lang, svc.config.card_window)
    return [_table(ref, _CARD_COLUMNS, cards)]


def _events(svc: Services, ref: str, p: Mapping[str, Any], _: int | None) -> list[Any]:
    run = params.check_run(svc.store, p)
    events = svc.store.events(run, svc.config.max_events)
    fields = [
        {"name": "time", "type": "time", "values": [e.step * 1000 for e in events]},
        {"name": "step", "type": "number", "values": [e.step for e in events]},
        {"name": "title", "type": "string", "values": [e.kind for e in events]},
        {"name": "text", "type": "string", "values": [e.text for e in events]},
        {"name": "tags", "type": "string", "values": [e.kind for e in events]},
    ]
    return [{"refId": ref, "name": f"{run} events", "fields": fields}]


def _terms(svc: Services, ref: str, p: Mapping[str, Any], _: int | None) -> list[Any]:
    lang = params.lang(p) or "en"
    return [_table(ref, _TERM_COLUMNS, glossary(svc.registry, lang))]


def _runs(svc: Services, ref: str, p: Mapping[str, Any], _: int | None) -> list[Any]:
    names = svc.store.runs()
    colors = run_colors(names, read_meta(svc.config.outbox_path))
    rows = [{"run": r, "last_step": svc.store.latest(r).step, "color": colors[r]} for r in names]
    return [_table(ref, ("run", "last_step", "color"), rows)]


_HANDLERS: dict[str, Callable[[Services, str, Mapping[str, Any], int | None], list[Any]]] = {
    "series": _series,
    "cards": _cards,
    "events": _events,
    "terms": _terms,
    "runs": _runs,
}


@blueprint.get("/")
def root() -> Response:
    # A browser gets the live dashboard's run list; Grafana's health check, JSON.
    if wants_html(request):
        return index_page()
    return jsonify({"status": "ok", "protocol": "simpod-json-datasource", "targets": list(TARGETS)})


@blueprint.post("/metrics")
def metrics() -> Response:
    json_body()
    return jsonify(_METRICS)


@blueprint.post("/metric-payload-options")
def metric_payload_options() -> Response:
    body = json_body()
    name = params.text(body, "name")
    assert name is not None
    return jsonify(_options(services(), name))


@blueprint.post("/query")
def query() -> Response:
    svc = services()
    body = json_body(empty_ok=False)
    targets = body.get("targets")
    if not isinstance(targets, list):
        raise BadRequest("'targets' must be a list of query targets")
    if len(targets) > _MAX_TARGETS:
        raise BadRequest(
            f"{len(targets)} targets in one query; at most {_MAX_TARGETS} (split the panel)"
        )
    max_points = params.integer(body, "maxDataPoints", None, 1, 10**9)
    out: list[Any] = []
    for i, target in enumerate(targets):
        if not isinstance(target, dict):
            raise BadRequest(f"targets[{i}] must be an object")
        if target.get("hide") is True:
            continue
        ref = target.get("refId", chr(ord("A") + i % 26))
        if not isinstance(ref, str) or len(ref) > params.MAX_TEXT:
            raise BadRequest(f"targets[{i}].refId must be a short string")
        kind = _target(target)
        out.extend(_HANDLERS[kind](svc, ref, _payload(target.get("payload")), max_points))
    return jsonify(out)


@blueprint.post("/variable")
def variable() -> Response:
    svc = services()
    body = json_body(empty_ok=False)
    payload = body.get("payload")
    if isinstance(payload, str):
        payload = {"target": payload}
    payload = _payload(payload)
    kind = payload.get("target")
    if kind == "runs":
        values = list(svc.store.runs())
        pairs = [(v, v) for v in values]
    elif kind == "metrics":
        core = payload.get("core") in (True, "true")
        chosen = svc.registry.core_metrics() if core else svc.registry.metrics
        pairs = [(f"{m.title.en} ({m.id})", m.id) for m in chosen]
    elif kind == "terms":
        pairs = [(t.title.en, t.id) for t in svc.registry.terms]
    elif kind == "langs":
        pairs = [("English", "en"), ("中文", "zh")]
    else:
        raise BadRequest(
            f"payload.target must be runs, metrics, terms or langs, got {repr(kind)[:60]}"
        )
    return jsonify([{"__text": t, "__value": v} for t, v in pairs])


@blueprint.post("/tag-keys")
def tag_keys() -> Response:
    json_body()
    return jsonify([{"type": "string", "text": "run"}, {"type": "string", "text": "metric"}])


@blueprint.post("/tag-values")
def tag_values() -> Response:
    svc = services()
    key = params.text(json_body(empty_ok=False), "key")
    if key == "run":
        return jsonify([{"text": r} for r in svc.store.runs()])
    if key == "metric":
        return jsonify([{"text": m.id} for m in svc.registry.metrics])
    raise BadRequest(f"unknown tag key {key!r}; POST /tag-keys lists them")
