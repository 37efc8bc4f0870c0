"""Datasource queries of the dashboards: InfluxQL in step space, PromQL for live state, Infinity
requests to the rlvitals API.

Step space: a point's timestamp is its training step in seconds, so a step range is a time range
(`time >= ${step_from}s`) and a bucket of N steps is `GROUP BY time(Ns)`. The hidden `bucket`
variable (`bucket_query`) is the steps per drawn point that give about `POINTS_PER_SERIES` points
per run and series (fewer each past `RUNS_AT_FULL_DETAIL` runs) from `step_from` to the selected
runs' last step, rounded up to a multiple of
the rollup level it is read at (64 or 4096 steps: `exporter.schema.ROLLUP_LEVELS`).

What a chart reads (`metric_targets`): one target per source, each gated by the variables so that
exactly one of them reads anything (a gate is a comparison of two literals once Grafana has
substituted the variables, which InfluxDB 1.x folds before it reads a point: a closed target
answers an empty result in about a millisecond):
- below 64 steps per point, or when some selected run has no 64-step rollups (`logged`: runs
  with data, `dense`: runs the exporter keeps them for, see `dense_query`), the raw points,
  bucketed by InfluxDB: at most 64 raw points per drawn point for a run logging every step, and
  bucket / stride for one logging every `stride` steps;
- from 64 steps per point, the exporter's step rollups (`exporter.influx.rollups`: mean,
  highest value and last step of every block of 64 or 4096 steps) of the coarsest level the
  bucket is a multiple of: a bucket's mean is the mean of its blocks' means (`rollup_query` says
  when that differs from the bucket's mean), its step their last step, so a drawn point reads at
  most a bucket's blocks (a few dozen rows) whatever the run's length. (The datasource's own
  `/api/series` sums the blocks' counts and sums instead, `grafana.datasource.history.influx_rollups`.)
A chart of a metric no selected run logs reads nothing in the rollups (no such field), so it
costs what a closed gate costs. The x value the trend panels plot is the bucket's last step
(`max("step")` of the raw points, `max("last:<id>")` of the blocks; for a name family, whose
members are read by a regex, the run's last logged step: `rollup_query`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.schema import (
    EVENTS,
    MIN_BLOCK_POINTS,
    ROLLUP_LEVELS,
    ROLLUP_MEAN,
    STEP_FIELD,
    rollup_key,
    rollup_measurement,
)
from exporter.translate.derive import NONFINITE_FIELD
from registry import Metric, Registry

from .sources import INFINITY, INFLUX

__all__ = [
    "EVENT_MARKS",
    "FAMILY_COLUMNS",
    "FAMILY_ROLLUP_STATS",
    "POINTS_PER_SERIES",
    "RAW",
    "RUNS_AT_FULL_DETAIL",
    "RUN_COLOURS_REF",
    "STEPS_REF",
    "Series",
    "all_cards_target",
    "bucket_query",
    "cards_target",
    "dense_query",
    "event_marks_query",
    "events_query",
    "influx_target",
    "logged_query",
    "metric_query",
    "metric_targets",
    "rollup_query",
    "run_colours_target",
    "run_matcher",
    "series_alias",
    "step_measurement",
    "steps_target",
    "terms_target",
]

POINTS_PER_SERIES = 1000
RUNS_AT_FULL_DETAIL = 5
"""Up to this many selected runs each get about `POINTS_PER_SERIES` points a series; more runs
share about five times that: with n runs, ceil(n / 5) times fewer each (10 runs: 500 each, 20
runs: 250). What a chart's statement costs InfluxDB follows the points it answers (each aggregate
about 0.09 s for 20 runs x 780 points, docs/grafana.md), so a page of 20 runs stays near a page
of 5. A chart is about 900 pixels wide: 20 runs of 250 points each are 3.6 pixels a point, and
narrowing the step range brings the detail back (the bucket follows the range). Measured, 20
runs x 200,000 steps: at 10 (447 points a run) the reward page's p95 was 2.1-2.8 s on a quiet
machine, at 5 (241 points) 1.6 s."""

_SMOOTHING = "$smoothing, 0, 'exponential'"
"""The moving average's window and warm-up: from a run's first bucket on (a hold period of 0),
its first points weighted as the window fills (InfluxQL's `exponential` warm-up). The default
holds back the first window - 1 buckets, which smoothed a run of a few buckets (a short run
beside long ones) away entirely."""
_RUN = '"run" =~ /^${run:regex}$/'
_STEPS = "time >= ${step_from}s"
_BUCKET = "${bucket}s"
_ALL_DENSE = "'${dense}' = '${logged}'"
"""Every selected run with data has 64-step rollups (the two counts, compared as text: a count
over no run at all is no value, an empty string)."""
RAW = "raw"
"""The source name of a chart's raw-point target (the others are named by their rollup level)."""
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


def _family_fields(metric: Metric, prefix: str = "") -> str:
    """A regex over a name family's member fields, `<prefix><id>/<member>`: one path segment a
    member (the registry's aliases capture a member as `[^/]+`), so that in the rollups, which hold
    every measurement's fields of a run, a member's `SPREAD` fields (`<id>/<member>/count`,
    `/nonfinite`, ...) are not read as members."""
    head = re.escape(prefix + metric.id + "/").replace("/", "\\/")
    return f"/^{head}[^\\/]+$/"


def _field(metric: Metric) -> str:
    """A plain field, or for a name family (`reward_component/<name>`) a regex over its members."""
    if metric.pattern is not None:
        return _family_fields(metric)
    return _ident(metric.id)


_EXPRS = {
    "raw": "mean({})",
    "smoothed": f"exponential_moving_average(mean({{}}), {_SMOOTHING})",
    "max": "max({})",
    "slope": "derivative(mean({}), 1000s)",
}
"""Each kind of series as InfluxQL, of a field (the raw points') or of a block statistic
(`_ROLLUP_STAT`, the rollups')."""
_ROLLUP_STAT = {"raw": ROLLUP_MEAN, "smoothed": ROLLUP_MEAN, "max": "max", "slope": ROLLUP_MEAN}
"""The block statistic each kind of series is taken of in the rollups."""
FAMILY_COLUMNS = {kind: expr.partition("(")[0] for kind, expr in _EXPRS.items()}
"""A name family's series, by kind: the InfluxQL function whose name starts each member's column
(InfluxQL names a column of a regex-selected field `<outer function>_<field>`:
`exponential_moving_average_<id>/<member>` from the raw points)."""
FAMILY_ROLLUP_STATS = tuple(sorted(rollup_key(stat, "") for stat in set(_ROLLUP_STAT.values())))
"""What a name family's rollup column has after its function's name where the raw points' has
the member's field (`mean_mean:<id>/<member>` against `mean_<id>/<member>`: `rollup_query`), so
a chart renames it (`panels.CHART_TRANSFORMATIONS`)."""


def metric_query(series: Series, gate: str = "") -> str:
    """One InfluxQL statement returning step, and the requested series, per run and bucket, from
    the raw points (`gate`: an extra condition, `AND ...`)."""
    m = series.metric
    field = _field(m)
    family = m.pattern is not None
    parts = [f'max("{STEP_FIELD}") AS "{STEP_FIELD}"']
    for kind in series.kinds():
        expr = _EXPRS[kind].format(field)
        # a name family yields one column per member, named by InfluxQL (`mean_<field>`)
        parts.append(expr if family else f"{expr} AS {_ident(series_alias(m.id, kind))}")
    # only the points that hold the metric: a run logging other fields of the measurement would
    # get rows from `max("step")` with the metric null (a legend row with no line, empty axes
    # where the chart should say no run logs it); a comparison is false where a field is absent
    holds = "" if family else f" AND ({field} >= 0 OR {field} < 0)"
    return (
        f"SELECT {', '.join(parts)} FROM {_ident(m.group)} WHERE {_RUN} AND {_STEPS}{holds}{gate} "
        f'GROUP BY time({_BUCKET}), "run" fill(none)'
    )


def rollup_query(series: Series, level: int, gate: str = "") -> str:
    """The same columns as `metric_query`, from the exporter's blocks of `level` steps, in one
    flat statement: a bucket's mean is the mean of its blocks' means (`mean:<id>`, each block's
    sum over its count), its moving average and slope InfluxQL's, taken of that aggregate; its
    step is its blocks' last step, its max their highest value.

    The mean of block means equals the bucket's mean (sum of sums over sum of counts) when every
    block holds as many values (a run logging every step, or every k steps with k dividing 64;
    the bucket is a whole number of blocks). Otherwise each block weighs 1 rather than its count
    (the gate asks only `MIN_BLOCK_POINTS` values per block on average, `dense_query`): both
    means lie between the bucket's lowest and highest block mean, so they differ by less than
    that spread, and not at all where the values are flat. Where it shows: a run's first or last
    block partly logged weighs as a whole one, and a run's ranks or GPUs each weigh 1 per block
    whatever they logged. The former statement summed counts and sums in a subquery and applied the
    transformations outside it: 0.9-1.0 s against 0.35 s for this one, 20 runs x 200k steps
    (docs/grafana.md).

    A name family (`reward_component/<name>`) reads its members' blocks by a regex, as its raw
    statement reads their points (`mean(/^mean:<id>\\/[^\\/]+$/)`, one column per member, which
    InfluxQL names `mean_mean:<id>/<member>`: the chart renames it to the raw column's name,
    `FAMILY_ROLLUP_STATS`). Its step is the blocks' last step of `nonfinite_count`, the field the exporter
    writes at every logged step (`step_measurement`): the bucket's last logged step of the run.
    A member's own `last:` would give one step column per member, and a row has one step; the
    raw statement's `max("step")` is likewise no member's own but the last step of any point of
    the family's measurement in the bucket. The two are the same step when the run logs its
    family's measurement at its last logged step of each bucket (a run logging its reward parts
    with every step it logs); otherwise the rollups' x lies later in the same bucket, by less
    than the steps between two logs of that measurement. Like the raw statement, it answers a
    row with a step and no member for a run that logs none (the raw one: for a run that logs
    other metrics of the family's measurement)."""
    m = series.metric
    family = m.pattern is not None
    if family:
        # `<stat>:<id>/<member>` of every member (a stat's key with no field: `<stat>:`)
        fields = {s: _family_fields(m, rollup_key(s, "")) for s in set(_ROLLUP_STAT.values())}
        last = _ident(rollup_key("last", NONFINITE_FIELD))
    else:
        fields = {s: _ident(rollup_key(s, m.id)) for s in set(_ROLLUP_STAT.values())}
        last = _ident(rollup_key("last", m.id))
    parts = [f'max({last}) AS "{STEP_FIELD}"']
    for kind in series.kinds():
        expr = _EXPRS[kind].format(fields[_ROLLUP_STAT[kind]])
        # a name family's columns are named by InfluxQL, as from the raw points
        parts.append(expr if family else f"{expr} AS {_ident(series_alias(m.id, kind))}")
    return (
        f"SELECT {', '.join(parts)} FROM {_ident(rollup_measurement(level))} "
        f"WHERE {_RUN} AND {_STEPS}{gate} "
        f'GROUP BY time({_BUCKET}), "run" fill(none)'
    )


def _level_gate(i: int) -> str:
    """Open only when the bucket is read at `ROLLUP_LEVELS[i]` and every run is rolled up."""
    level = ROLLUP_LEVELS[i]
    upper = f" AND ${{bucket}} < {ROLLUP_LEVELS[i + 1]}" if i + 1 < len(ROLLUP_LEVELS) else ""
    return f" AND ${{bucket}} >= {level}{upper} AND {_ALL_DENSE}"


def metric_targets(series: Series) -> list[tuple[str, str]]:
    """(source, statement) of every target a chart asks for one metric: the raw points and
    each rollup level, gated so that one of them reads (see the module's docstring); a name
    family (reward components, `reward_component/<name>`) too, its members' columns named
    alike from either source once the chart renames the rollups' (`FAMILY_ROLLUP_STATS`)."""
    raw_gate = f" AND (${{bucket}} < {ROLLUP_LEVELS[0]} OR '${{dense}}' != '${{logged}}')"
    return [(RAW, metric_query(series, raw_gate))] + [
        (str(level), rollup_query(series, level, _level_gate(i)))
        for i, level in enumerate(ROLLUP_LEVELS)
    ]


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


def _last_steps(measurement: str, alias: str, since: bool) -> str:
    """Each selected run's last step in `measurement` (`last()`, which InfluxDB answers from the
    newest point of each series rather than by reading them all)."""
    where = f"{_RUN} AND {_STEPS}" if since else _RUN
    return (
        f'SELECT last("{STEP_FIELD}") AS "{alias}" FROM {_ident(measurement)} '
        f'WHERE {where} GROUP BY "run"'
    )


_LN_LEVEL = f"{math.log(ROLLUP_LEVELS[0])!r}"


def bucket_query(measurement: str) -> str:
    """The `bucket` variable: steps per drawn point for the selected runs from `step_from` on,
    one value. It reads one measurement, the one every logged step writes (`step_measurement`):
    over `/.*/` InfluxQL answers one row per measurement (a subquery keeps them apart too,
    checked on InfluxDB 1.6), and `run_config`, logged at step 0, always offered `1`, a value a
    short run left selected kept for a long one.

    b = ceil(steps * ceil(runs / RUNS_AT_FULL_DETAIL) / POINTS_PER_SERIES); the level it is read at is 64^k, k = floor(log64 b)
    (1 below 64; the rollups' levels are powers of 64); the bucket is b rounded up to a multiple
    of that level, so whole blocks fall in each bucket. InfluxQL's `pow` and `log` take only a
    literal second argument, hence `exp(k * ln 64)`, rounded.
    """
    assert all(b == ROLLUP_LEVELS[0] ** (i + 1) for i, b in enumerate(ROLLUP_LEVELS)), (
        "bucket_query assumes the rollup levels are 64, 64^2, ..."
    )
    share = f'ceil(count("l") / {RUNS_AT_FULL_DETAIL})'
    b = f'ceil((max("l") - ${{step_from}} + 1) * {share} / {POINTS_PER_SERIES})'
    level = f"round(exp(floor(log({b}, {ROLLUP_LEVELS[0]}) + 0.000001) * {_LN_LEVEL}))"
    return f"SELECT ceil({b} / {level}) * {level} FROM ({_last_steps(measurement, 'l', True)})"


def logged_query(measurement: str) -> str:
    """The `logged` variable: how many of the selected runs have logged a step."""
    return f'SELECT count("l") FROM ({_last_steps(measurement, "l", False)})'


def dense_query() -> str:
    """The `dense` variable: how many of the selected runs the exporter keeps 64-step rollups of
    (no value when none): those whose step field (`step_measurement`'s `nonfinite_count`, written
    at every logged step) holds at least `MIN_BLOCK_POINTS` values per 64 steps in their
    4096-step blocks. The exporter keeps a level only for a field that dense
    (`exporter.influx.rollups`), so a run logging every 2,048 steps (SB3's default rollout) is
    read from its raw points, a few hundred; and a run whose blocks are missing or behind (written
    before rollups, through InfluxDB 2.x, or still being rolled up) counts as sparse too. So does
    a run with a block that lacks its mean (`mean:<field>`, what `rollup_query` reads: rolled up
    by an exporter older than rollups version 2, or being rolled up again by a new one): `"m"`,
    blocks with a mean less blocks, is 0 only when every block has one (no value when none has,
    a field InfluxDB does not know)."""
    field = NONFINITE_FIELD
    n, last, mean = (_ident(rollup_key(k, field)) for k in ("n", "last", ROLLUP_MEAN))
    coarse = ROLLUP_LEVELS[-1]
    # `::float`: a run whose density divides exactly (every step logged) would otherwise be an
    # integer, and InfluxDB 1.6's outer `WHERE "d" >= ...` then counts only one of the two types
    density = f"sum({n}::float) / (max({last}) - min({last}) + {coarse})"
    inner = (
        f'SELECT {density} AS "d", count({mean}) - count({n}) AS "m" '
        f'FROM {_ident(rollup_measurement(coarse))} WHERE {_RUN} GROUP BY "run"'
    )
    threshold = MIN_BLOCK_POINTS / ROLLUP_LEVELS[0]
    return f'SELECT count("d") FROM ({inner}) WHERE "d" >= {threshold!r} AND "m" = 0'


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


RUN_COLOURS_REF = "runs"
"""The refId of a chart's run-colour query; every other query's refId starts with a capital."""


def run_colours_target() -> dict[str, Any]:
    """Infinity request for the selected runs' colours (`/api/runs?shown=[...]`: each run's
    stored colour, picked again only where two shown runs share one), one row per run: `run`,
    `color`, which a chart joins to its series (`panels.CHART_TRANSFORMATIONS`)."""
    columns = [
        {"selector": "run", "text": "run", "type": "string"},
        {"selector": "color", "text": "color", "type": "string"},
    ]
    return _infinity(RUN_COLOURS_REF, "/api/runs", (("shown", "${run:json}"),), "runs", columns)


STEPS_REF = "steps"
"""The refId of a chart's empty step column (`steps_target`); lower case, like the run colours'."""


def steps_target() -> dict[str, Any]:
    """An Infinity query answered without any request (`source: inline`): one row whose `step`
    is null, in a number column (an inline table of no rows would have no field at all:
    `sliceToFrame` in grafana/infinity-libs lib/go/gframer/gframer.go). The chart's first
    transformation drops that row, leaving the `step` field with no values that the trend panel
    needs to say the chart's `noValue` when no query answered (`panels.CHART_TRANSFORMATIONS`)."""
    return {
        "refId": STEPS_REF,
        "datasource": INFINITY.variable_ref(),
        "type": "json",
        "source": "inline",
        "parser": "backend",
        "format": "table",
        "data": '[{"step": null}]',
        "root_selector": "",
        "columns": [{"selector": "step", "text": "step", "type": "number"}],
    }


def terms_target(lang: str, columns: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Infinity request for the whole glossary (terms and metrics)."""
    return _infinity("A", "/api/terms", (("lang", lang),), "terms", columns)
