"""Datasource queries of the dashboards: InfluxQL in step space, PromQL for live state, Infinity
requests to the rlvitals API.

Step space: a point's timestamp is its training step in seconds, so a step range is a time range
(`time >= ${step_from}s AND time <= ${step_range:text}s`) and a bucket of N steps is
`GROUP BY time(Ns)`. The `step_range` variable's text is the last step shown and its value the
bucket that gives about `POINTS_PER_SERIES` points over that range, so a 1,000,000-step run draws
about a thousand points per series whatever the panel width. `max("step")` of each bucket is the
x value the trend panels plot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.schema import EVENTS
from exporter.translate.derive import NONFINITE_FIELD
from registry import Metric, Registry

from .sources import INFINITY, INFLUX

__all__ = [
    "EVENT_MARKS",
    "POINTS_PER_SERIES",
    "Series",
    "all_cards_target",
    "bucket_query",
    "cards_target",
    "event_marks_query",
    "events_query",
    "influx_target",
    "metric_query",
    "run_matcher",
    "series_alias",
    "step_measurement",
    "terms_target",
]

POINTS_PER_SERIES = 1000

_RUN = '"run" =~ /^${run:regex}$/'
_STEPS = "time >= ${step_from}s"
_BUCKET = "${bucket}s"
_KINDS = ("raw", "smoothed", "max", "slope")


@dataclass(frozen=True)
class Series:
    """What a chart draws for one metric: its raw bucket mean, its EMA, bucket max, slope."""

    metric: Metric
    raw: bool = True
    smoothed: bool = True
    spikes: bool = False
    slope: bool = False

    def kinds(self) -> tuple[str, ...]:
        flags = (self.raw, self.smoothed, self.spikes, self.slope)
        return tuple(k for k, on in zip(_KINDS, flags, strict=True) if on)


def series_alias(metric_id: str, kind: str) -> str:
    """Column name of one drawn series: `<metric id> <raw|smoothed|max|slope>`."""
    return f"{metric_id} {kind}"


def _ident(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field(metric: Metric) -> str:
    """A plain field, or for a name family (`reward_component/<name>`) a regex over its members."""
    if metric.pattern is not None:
        return "/^" + re.escape(metric.id + "/").replace("/", "\\/") + "/"
    return _ident(metric.id)


def metric_query(series: Series) -> str:
    """One InfluxQL statement returning step, and the requested series, per run and bucket."""
    m = series.metric
    field = _field(m)
    family = m.pattern is not None
    parts = ['max("step") AS "step"']
    exprs = {
        "raw": f"mean({field})",
        "smoothed": f"exponential_moving_average(mean({field}), $smoothing)",
        "max": f"max({field})",
        "slope": f"derivative(mean({field}), 1000s)",
    }
    for kind in series.kinds():
        # a name family yields one column per member, named by InfluxQL (`mean_<field>`)
        parts.append(
            exprs[kind] if family else f"{exprs[kind]} AS {_ident(series_alias(m.id, kind))}"
        )
    return (
        f"SELECT {', '.join(parts)} FROM {_ident(m.group)} WHERE {_RUN} AND {_STEPS} "
        f'GROUP BY time({_BUCKET}), "run" fill(none)'
    )


def events_query() -> str:
    """The run's events in the step range, newest first (a table beside the curves)."""
    return (
        f'SELECT "step", "kind", "text" FROM {_ident(EVENTS)} WHERE {_RUN} AND {_STEPS} '
        'GROUP BY "run" ORDER BY time DESC LIMIT 500'
    )


EVENT_MARKS = "event_marks"
"""The column of a chart's event marks (`event_marks_query`)."""


def event_marks_query() -> str:
    """The runs' events as marks for a chart: 1 at each event's step, per run (the events
    table says what each one was). The `trend` panel draws no annotations (its
    `setDataSupport({ annotations: true })` is commented out in
    public/app/plugins/panel/trend/module.tsx), so events travel the chart's own chain as one
    more series, drawn as points on a hidden axis."""
    return (
        f'SELECT "step", "step" * 0 + 1 AS {_ident(EVENT_MARKS)} FROM {_ident(EVENTS)} '
        f'WHERE {_RUN} AND {_STEPS} GROUP BY "run"'
    )


def step_measurement(reg: Registry) -> str:
    """The measurement every logged step writes a point to: the exporter's per-step
    `nonfinite_count` (0 at a clean step), stored under its registry group."""
    return reg.metric(NONFINITE_FIELD).group


def bucket_query(measurement: str) -> str:
    """The `bucket` variable: steps per drawn point for the selected runs from `step_from` on,
    one value. It reads one measurement, the one every logged step writes (`step_measurement`):
    over `/.*/` InfluxQL answers one row per measurement (a subquery keeps them apart too,
    checked on InfluxDB 1.6), and `run_config`, logged at step 0, always offered `1`, a value a
    short run left selected kept for a long one.
    """
    return (
        f'SELECT ceil((max("step") - ${{step_from}} + 1) / {POINTS_PER_SERIES}) '
        f"FROM {_ident(measurement)} WHERE {_RUN} AND {_STEPS}"
    )


def run_matcher() -> str:
    """The `run` variable's query: every run that has written anything."""
    return 'SHOW TAG VALUES WITH KEY = "run"'


def influx_target(ref_id: str, query: str) -> dict[str, Any]:
    return {
        "refId": ref_id,
        "datasource": INFLUX.variable_ref(),
        "rawQuery": True,
        "query": query,
        "resultFormat": "table",
    }


def _infinity(
    ref_id: str,
    path: str,
    params: Sequence[tuple[str, str]],
    root: str,
    columns: Sequence[dict[str, str]],
) -> dict[str, Any]:
    return {
        "refId": ref_id,
        "datasource": INFINITY.variable_ref(),
        "type": "json",
        "source": "url",
        "parser": "backend",
        "format": "table",
        "url": path,
        "url_options": {
            "method": "GET",
            "data": "",
            "params": [{"key": k, "value": v} for k, v in params],
        },
        "root_selector": root,
        "columns": list(columns),
    }


def cards_target(metric_id: str, lang: str, columns: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Infinity request for the diagnosis card of one metric of the focused run."""
    params = (("run", "${focus}"), ("metric", metric_id), ("lang", lang))
    return _infinity("A", "/api/cards", params, "cards", columns)


def run_state_target(lang: str, columns: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Infinity request for the focused run's vital numbers (`/api/run_state`: as of its end
    once it ended)."""
    return _infinity("A", "/api/run_state", (("run", "${focus}"), ("lang", lang)), "runs", columns)


def all_cards_target(lang: str, columns: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Infinity request for every core metric's card of the focused run (one row each)."""
    params = (("run", "${focus}"), ("lang", lang))
    return _infinity("A", "/api/cards", params, "cards", columns)


def terms_target(lang: str, columns: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Infinity request for the whole glossary (terms and metrics)."""
    return _infinity("A", "/api/terms", (("lang", lang),), "terms", columns)
