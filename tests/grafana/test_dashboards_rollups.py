"""The dashboards read long runs from the exporter's step rollups, and draw what the raw points say.

Runs imported through the real exporter (`DirectRun`, which keeps the 64- and 4096-step blocks
in InfluxDB as a trainer's exporter does) into a real InfluxDB 1.6. For every chart of every
generated dashboard the hidden variables are computed by InfluxDB as Grafana computes them
(`grafana_interp.resolve_hidden`) and each target is run:
- exactly one of a chart's sources answers (raw points below 64 steps per point or when a
  selected run has no 64-step blocks, else the rollup level the bucket is a multiple of);
- what a rollup target answers is what the same chart's raw-point statement answers over the same
  buckets: the step, mean, max, moving average and slope of every bucket of whole blocks of every
  run (the promise: the rollups are the raw points summed, `exporter.influx.rollups`, and a
  bucket's mean the mean of its blocks' means, `queries.rollup_query`); a bucket holding a run's
  last or first block, logged in part, beside others has its step and max, and a mean between
  its blocks' lowest and highest mean (each block weighs 1 there, not its count), and the moving
  average and slope from such a bucket on are not compared;
- a series has at most about `POINTS_PER_SERIES` points;
- a run whose blocks have no means (rolled up by an exporter before rollups version 2) sends the
  charts to the raw points, which draw it;
- a name family's chart (reward components, `reward_component/<name>`) is read from the rollups
  too, and gives the same members, steps and values per run as from the raw points; through
  Grafana's own code (@grafana/data, `grafana_data_path.run_panels`) its series come out under
  the same names, colours and line widths from either source.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from grafana_data_path import run_panels
from grafana_interp import Selection, interpolate, resolve_hidden
from infinity_answer import infinity_frames, is_infinity
from influx_server import InfluxDatabase, InfluxServer
from influxql_frames import table_frames

import registry
from exporter.influx.direct import DirectRun
from exporter.schema import (
    MARKER_VERSION_FIELD,
    ROLLUP_LEVELS,
    ROLLUP_MARKER,
    rollup_key,
    rollup_measurement,
)
from exporter.translate.derive import NONFINITE_FIELD
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.queries import (
    POINTS_PER_SERIES,
    RUNS_AT_FULL_DETAIL,
    step_measurement,
)
from grafana.datasource import DatasourceConfig, create_app

DENSE = ("long-a", "long.b")
SPARSE = "ppo-sparse"
STEPS = {"long-a": 70_000, "long.b": 66_000, SPARSE: 200_000}
STRIDE = {"long-a": 1, "long.b": 1, SPARSE: 2048}
START = {"long-a": 0, "long.b": 1_000, SPARSE: 0}
METRICS = ("policy_kl", "ref_kl", "policy_entropy", "grad_norm", "raw_reward")
FAMILIES = ("reward_component", "reward_component_std")
"""Name families (`<id>/<member>`), logged with the metrics at every step: the reward page
charts `reward_component` beside `raw_reward` (two of its queries answer) and
`reward_component_std` beside a metric no run logs (its query alone answers)."""
MEMBERS = ("format", "length")
LOGGED = METRICS + tuple(f"{f}/{m}" for f in FAMILIES for m in MEMBERS)
_CHOSEN = {"smoothing": ("5", "5"), "step_from": ("0", "0")}


def _value(run: str, metric: str, step: int) -> float:
    """A value inside every metric's physical limits (a family's std: at least 0): an
    out-of-limits one is rejected, and the run then logs none of that metric."""
    return (
        1.0 + 0.5 * math.sin(step / (700.0 + 50 * len(metric))) + 0.01 * (step % 13) + len(run) / 10
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def db(influxd: InfluxServer, builtin: registry.Registry, store: Path) -> InfluxDatabase:
    name = f"rollups_{uuid.uuid4().hex[:8]}"
    influxd.post_query(f'CREATE DATABASE "{name}"')
    database = InfluxDatabase(influxd, name)
    settings = database.settings(store)
    for run_name, steps in STEPS.items():
        run = DirectRun(run_name, project=None, registry=builtin, settings=settings, framework=None)
        # long.b starts later, inside a block
        for step in range(START[run_name], steps, STRIDE[run_name]):
            run.log(step, {m: _value(run_name, m, step) for m in LOGGED})
        run.finish(120)
    return database


def _dashboards(builtin: registry.Registry) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, text in sorted(dashboard_files(builtin, ("en",)).items()):
        dashboard = json.loads(text)
        if any(p.get("type") == "trend" for p in dashboard["panels"]):
            yield path, dashboard


def _reads(query: str) -> set[str]:
    """The logged metrics and families a statement reads: a metric's field (`"<id>"`, or a
    rollup's `"<stat>:<id>"`), a family's members by a regex (`/^<id>\\/...`, or from the
    rollups `/^<stat>:<id>\\/...`)."""
    return {m for m in METRICS if f'"{m}' in query or f':{m}"' in query} | {
        f for f in FAMILIES if re.search(rf"/\^(\w+:)?{f}\\/", query)
    }


def _logged_charts(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel.get("type") == "trend" and any(
            _reads(t.get("query", "")) for t in panel["targets"]
        ):
            yield panel


def _family_charts(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        p
        for p in _logged_charts(dashboard)
        if any(_reads(t.get("query", "")) & set(FAMILIES) for t in p["targets"])
    ]


def _series(body: dict[str, Any]) -> dict[str, list[list[Any]]]:
    result = body["results"][0]
    assert "error" not in result, result["error"]
    return {s["tags"]["run"]: s for s in result.get("series", [])}


def _answering(db: InfluxDatabase, panel: dict[str, Any], sel: Selection) -> dict[str, Any]:
    """refId -> series by run, for the targets that answered anything."""
    out = {}
    for target in panel["targets"]:
        if "query" not in target:
            continue  # the runs' colours, from the rlvitals API
        got = _series(db.raw_query(interpolate(target["query"], sel)))
        if got:
            out[target["refId"]] = got
    return out


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _block_means(
    db: InfluxDatabase, reg: registry.Registry, run: str, field: str, lo: int, hi: int, level: int
) -> list[float]:
    """The means of the blocks of `level` steps from `lo` to `hi`, from the raw points of a
    metric or of a family's member (`<id>/<member>`, in its family's measurement)."""
    group = reg.metric(field.split("/")[0]).group
    body = db.raw_query(
        f'SELECT mean("{field}") FROM "{group}" WHERE "run" = \'{run}\' '
        f"AND time >= {lo}s AND time < {hi}s GROUP BY time({level}s) fill(none)"
    )
    return [v[1] for s in body["results"][0].get("series", []) for v in s["values"]]


_FAMILY_KINDS = {
    "mean": "raw",
    "exponential_moving_average": "smoothed",
    "max": "max",
    "derivative": "slope",
}
"""A name family's columns, named by InfluxQL `<function>_<field>`: the series each function
draws (docs/grafana.md)."""


def _series_kind(column: str) -> tuple[str, str]:
    """(field, kind) of a column: `<id> <kind>`, or a family's `<function>_<id>/<member>`."""
    if "/" in column:
        for function, kind in _FAMILY_KINDS.items():
            if column.startswith(function + "_"):
                return column[len(function) + 1 :], kind
    field, _, kind = column.partition(" ")
    return field, kind


def _drawn_as(column: str) -> str:
    """The promise for a name family's rollup column: InfluxQL names it after the block
    statistic it reads (`mean_mean:reward_component/format`), and the chart draws it as the raw
    points' column of the same member (`mean_reward_component/format`)."""
    return re.sub(r"^(\w+?)_(mean|max):(?=[^/]+/)", r"\1_", column)


def _assert_same(
    rolled: dict[str, Any],
    raw: dict[str, Any],
    where: str,
    db: InfluxDatabase,
    reg: registry.Registry,
    level: int,
) -> None:
    assert set(rolled) == set(raw), (where, sorted(rolled), sorted(raw))
    for run, series in rolled.items():
        other = raw[run]
        columns = [_drawn_as(c) for c in series["columns"]]
        assert columns == other["columns"], (where, series["columns"], other["columns"])
        assert len(series["values"]) == len(other["values"]), (where, run)
        rows = list(zip(series["values"], other["values"], strict=True))
        bucket = (rows[1][0][0] - rows[0][0][0]) // 1000
        # the runs end mid-block: their last bucket may hold a block logged in part beside whole
        # ones (at 64 steps it does); so does long.b's first bucket where it is a bucket of several blocks (InfluxDB
        # reads the buckets before the first one too for a moving average or slope)
        first_block = START[run] // level * level
        mixed_start = (
            START[run] % level > 0 and first_block + level < -(-START[run] // bucket) * bucket
        )
        for i, (got, want) in enumerate(rows):
            if i < len(rows) - 1 and not mixed_start:
                assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (
                    f"{where} {run}: rollups {got} != raw points {want}"
                )
                continue
            for column, g, w in zip(columns, got, want, strict=True):
                field, kind = _series_kind(column)
                if column in ("time", "step") or kind == "max":
                    assert _close(g, w), (where, run, column, g, w)
                elif kind == "raw":
                    lo = got[0] // 1000
                    means = _block_means(db, reg, run, field, lo, lo + bucket, level)
                    assert min(means) - 1e-9 <= g <= max(means) + 1e-9, (where, run, g, means)


def test_long_dense_runs_are_read_from_64_step_rollups_and_equal_the_raw_points(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    checked = families = 0
    for path, dashboard in _dashboards(builtin):
        sel = resolve_hidden(dashboard, DENSE, _CHOSEN, db.raw_query)
        # the promise: about POINTS_PER_SERIES points from step 0 to the last step, on whole blocks
        b = math.ceil(max(STEPS[r] for r in DENSE) / POINTS_PER_SERIES)
        assert sel.single["bucket"][1] == str(math.ceil(b / 64) * 64), (path, sel.single)
        assert sel.single["logged"][1] == sel.single["dense"][1] == "2", (path, sel.single)
        # the same buckets from the raw points: every gate's condition made true for raw
        opened = replace(sel, single={**sel.single, "dense": ("", "")})
        for panel in _logged_charts(dashboard):
            answered = _answering(db, panel, sel)
            assert answered and all(ref.endswith("64") for ref in answered), (
                f"{path} / {panel['title']}: answered by {sorted(answered)}"
            )
            raw = _answering(db, panel, opened)
            for ref, series in answered.items():
                _assert_same(
                    series,
                    raw[ref.removesuffix("64")],
                    f"{path} / {panel['title']}",
                    db,
                    builtin,
                    64,
                )
                for s in series.values():
                    assert len(s["values"]) <= POINTS_PER_SERIES, len(s["values"])
                checked += 1
        assert not _family_source_problems(db, dashboard, sel, "64")
        families += len(_family_charts(dashboard))
    assert checked >= 8
    assert families >= 2  # the reward page's: its components and their spread


def _family_source_problems(
    db: InfluxDatabase, dashboard: dict[str, Any], sel: Selection, level: str
) -> list[str]:
    """What is wrong with the name family charts of `dashboard` under `sel`, where the runs
    are read from the blocks of `level` steps: each must be answered by its rollup targets
    alone (refIds ending in `level`) with a value of every member of its families, for every
    selected run (the runs log them all)."""
    problems = []
    for panel in _family_charts(dashboard):
        answered = _answering(db, panel, sel)
        if not answered or not all(ref.endswith(level) for ref in answered):
            problems.append(f"{panel['title']}: answered by {sorted(answered)}, not level {level}")
            continue
        families = set().union(*(_reads(t.get("query", "")) for t in panel["targets"]))
        wanted = {f"{f}/{m}" for f in families & set(FAMILIES) for m in MEMBERS}
        for run in sel.runs:
            members = {
                _series_kind(_drawn_as(column))[0]
                for series in answered.values()
                if run in series
                for i, column in enumerate(series[run]["columns"])
                if "/" in column and any(row[i] is not None for row in series[run]["values"])
            }
            if members != wanted:
                problems.append(f"{panel['title']}: {run} has {sorted(members)}, not {wanted}")
    return problems


def test_4096_step_blocks_equal_the_raw_points_over_the_same_buckets(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A bucket of 8,192 steps (a run of millions of steps) is read from the 4096-step blocks:
    the first dashboard's charts and every name family's (the reward page's)."""
    pages = list(_dashboards(builtin))
    pages = [pages[0]] + [(p, d) for p, d in pages[1:] if _family_charts(d)]
    assert len(pages) == 2, [p for p, _ in pages]
    for path, dashboard in pages:
        sel = resolve_hidden(dashboard, DENSE, _CHOSEN, db.raw_query)
        coarse = replace(sel, single={**sel.single, "bucket": ("8192", "8192")})
        opened = replace(coarse, single={**coarse.single, "dense": ("", "")})
        for panel in _logged_charts(dashboard):
            answered = _answering(db, panel, coarse)
            assert answered and all(ref.endswith("4096") for ref in answered), sorted(answered)
            raw = _answering(db, panel, opened)
            for ref, series in answered.items():
                where = f"{path} / {panel['title']}"
                _assert_same(series, raw[ref.removesuffix("4096")], where, db, builtin, 4096)
        assert not _family_source_problems(db, dashboard, coarse, "4096")


def _assert_every_chart_reads_raw_points_of(
    db: InfluxDatabase, builtin: registry.Registry, runs: tuple[str, ...]
) -> None:
    """With `runs` selected (two dense, one not), every chart reads the raw points (targets
    without a level suffix) and draws every run."""
    for path, dashboard in _dashboards(builtin):
        sel = resolve_hidden(dashboard, runs, _CHOSEN, db.raw_query)
        assert sel.single["logged"][1] == "3" and sel.single["dense"][1] == "2", sel.single
        for panel in _logged_charts(dashboard):
            answered = _answering(db, panel, sel)
            assert answered and all(len(ref) == 1 for ref in answered), sorted(answered)
            for series in answered.values():
                assert set(series) == set(runs), (path, panel["title"], sorted(series))


def test_a_run_too_sparse_for_rollups_sends_the_chart_to_the_raw_points(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A run logging every 2,048 steps (SB3's rollout) has no 64-step blocks kept: with it
    selected, the charts read every run's raw points (a few hundred for it) and draw all runs."""
    runs = (*DENSE, SPARSE)
    _assert_every_chart_reads_raw_points_of(db, builtin, runs)


OLD = "old-v1"


def _write_version_1_run(db: InfluxDatabase, reg: registry.Registry, steps: int) -> None:
    """A run logged at every step and rolled up as the exporter did before block means: raw
    points, blocks with count, sum, extremes and last step, no `mean:<field>`, marker version 1."""
    fields = {NONFINITE_FIELD: lambda step: 0.0} | {
        m: lambda step, m=m: _value(OLD, m, step) for m in LOGGED
    }
    lines = []
    for step in range(steps):
        by_group: dict[str, list[str]] = {}
        for name, value in fields.items():
            metric = reg.metric(name.split("/")[0])  # a family's member: its family's
            group = step_measurement(reg) if name == NONFINITE_FIELD else metric.group
            by_group.setdefault(group, []).append(f"{name}={value(step)!r}")
        lines += [
            f"{g},run={OLD} {','.join(parts)},step={step}i {step}" for g, parts in by_group.items()
        ]
    for level in ROLLUP_LEVELS:
        for lo in range(0, steps, level):
            block = range(lo, min(lo + level, steps))
            parts = []
            for name, value in fields.items():
                values = [value(s) for s in block]
                stats = (len(values), sum(values), min(values), max(values), block[-1])
                parts += [
                    f"{rollup_key(k, name)}={v!r}" + ("i" if k in ("n", "last") else "")
                    for k, v in zip(("n", "sum", "min", "max", "last"), stats, strict=True)
                ]
            lines.append(f"{rollup_measurement(level)},run={OLD} {','.join(parts)} {lo}")
    lines.append(f"{ROLLUP_MARKER},run={OLD} {MARKER_VERSION_FIELD}=1i 0")
    for i in range(0, len(lines), 5000):
        db.write("\n".join(lines[i : i + 5000]))


def test_a_run_rolled_up_before_block_means_sends_the_chart_to_the_raw_points(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A run rolled up by an older exporter (its blocks have no `mean:<field>`, which the charts'
    rollup statements read) is not counted dense: with it selected the charts read every run's
    raw points and draw it, rather than drawing it empty from the rollups."""
    _write_version_1_run(db, builtin, 12_000)
    runs = (*DENSE, OLD)
    _assert_every_chart_reads_raw_points_of(db, builtin, runs)


@pytest.mark.parametrize("count", [RUNS_AT_FULL_DETAIL, RUNS_AT_FULL_DETAIL + 1, 20])
def test_past_a_few_runs_each_run_gets_fewer_points_so_a_page_reads_about_as_many(
    count: int, influxd: InfluxServer, builtin: registry.Registry
) -> None:
    """Issue 37: a page of 20 long runs should load like a page of one. What a chart costs
    InfluxDB follows the points it answers, so past `RUNS_AT_FULL_DETAIL` selected runs each
    gets ceil(n / RUNS_AT_FULL_DETAIL) times fewer (5: 5 runs of 100,000 steps get 1,000 points
    each, 6 runs 500, 20 runs 250; the bucket a multiple of 64, the finest rollup level)."""
    name = f"many_{uuid.uuid4().hex[:8]}"
    influxd.post_query(f'CREATE DATABASE "{name}"')
    db = InfluxDatabase(influxd, name)
    runs = [f"sweep-{i:02d}" for i in range(count)]
    measurement = step_measurement(builtin)
    db.write(
        "\n".join(
            f"{measurement},run={run} {NONFINITE_FIELD}=0i,step={step}i {step}"
            for run in runs
            for step in (0, 99_999)
        )
    )
    dashboard = json.loads(dashboard_files(builtin, ("en",))["grafana/dashboards/en/overview.json"])
    sel = resolve_hidden(dashboard, tuple(runs), _CHOSEN, db.raw_query)
    share = math.ceil(count / RUNS_AT_FULL_DETAIL)
    b = math.ceil(100_000 * share / POINTS_PER_SERIES)
    assert sel.single["bucket"][1] == str(math.ceil(b / 64) * 64), sel.single
    assert 100_000 / int(sel.single["bucket"][1]) <= POINTS_PER_SERIES / share


def _reward_page(builtin: registry.Registry) -> dict[str, Any]:
    (dashboard,) = [d for _, d in _dashboards(builtin) if _family_charts(d)]
    return dashboard


def _raw_only(dashboard: dict[str, Any]) -> None:
    """The mutation this change undid: a name family's chart reads its raw points alone, at
    every bucket (its rollup targets gone, its raw target's gate with them)."""
    for panel in _family_charts(dashboard):
        family = [t for t in panel["targets"] if set(FAMILIES) & _reads(t.get("query", ""))]
        for t in family:
            if t["refId"][1:]:
                panel["targets"].remove(t)
            else:
                t["query"] = re.sub(r" AND \(\$\{bucket\} < \d+ OR [^)]*\)", "", t["query"])


def test_a_name_family_read_raw_only_at_a_long_range_is_seen(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """The check above fails when a family's chart goes back to reading its raw points at 64
    steps per point and more (the reward page's two family charts then took about 1 s each for
    20 runs of 200,000 steps, docs/grafana.md)."""
    dashboard = _reward_page(builtin)
    sel = resolve_hidden(dashboard, DENSE, _CHOSEN, db.raw_query)
    assert not _family_source_problems(db, dashboard, sel, "64")
    mutated = json.loads(json.dumps(dashboard))
    _raw_only(mutated)
    assert mutated != dashboard
    problems = _family_source_problems(db, mutated, sel, "64")
    assert len(problems) == len(_family_charts(dashboard)), problems


def _drawn(
    db: InfluxDatabase, api: Any, dashboard: dict[str, Any], sel: Selection
) -> list[dict[str, Any]]:
    """Each family chart of `dashboard` through Grafana's data path (@grafana/data 13.2.0 in
    Node: its transformations, then its field config), its targets answered by InfluxDB under
    `sel` and the runs' colours by the rlvitals API, as test_dashboards_data_path.py does."""
    inputs = []
    for panel in _family_charts(dashboard):
        frames: list[dict[str, Any]] = []
        for target in panel["targets"]:
            if is_infinity(target):
                frames += infinity_frames(api, target, sel)
                continue
            query = interpolate(target["query"], sel)
            frames += table_frames(db.raw_query(query), target["refId"], query)
        inputs.append(
            {
                "key": panel["title"],
                "frames": frames,
                "transformations": panel["transformations"],
                "fieldConfig": panel["fieldConfig"],
                "options": panel["options"],
            }
        )
    return run_panels(inputs)


_DRAWN = ("color", "lineWidth", "lineStyle", "hidden", "nonNull", "drawStyle")
"""What a series looks like once drawn (data_path.cjs), beside its display name and run."""


def _series_drawn(results: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], Any]]:
    """chart -> (display name, run) -> how that series is drawn, for a family's members."""
    out: dict[str, dict[tuple[str, str], Any]] = {}
    for result in results:
        assert "error" not in result, result
        out[result["key"]] = {
            (f["displayName"], f["labels"]["run"]): tuple(f.get(k) for k in _DRAWN)
            for frame in result["frames"]
            for f in frame["fields"]
            if "/" in f["name"]
        }
    return out


def _family_drawn_problems(
    db: InfluxDatabase, api: Any, dashboard: dict[str, Any], sel: Selection
) -> list[str]:
    """Where a family's chart read from the rollups (`sel`) is drawn otherwise than from the raw
    points over the same buckets: every member of every run under the same name (the legend's
    and tooltip's row, which also picks its colour), in the same colour and line, with as many
    points; the name the raw points' column gives, `mean_<id>/<member>`."""
    opened = replace(sel, single={**sel.single, "dense": ("", "")})
    rolled, raw = (
        _series_drawn(_drawn(db, api, dashboard, sel)),
        _series_drawn(_drawn(db, api, dashboard, opened)),
    )
    problems = []
    for panel in _family_charts(dashboard):
        chart = panel["title"]
        series = rolled[chart]
        if series != raw[chart]:
            only = sorted(set(series) ^ set(raw[chart]))
            apart = sorted(k for k in set(series) & set(raw[chart]) if series[k] != raw[chart][k])
            problems.append(
                f"{chart}: names in one source only {only[:4]}, drawn apart {apart[:4]}"
            )
        families = set().union(*(_reads(t.get("query", "")) for t in panel["targets"]))
        # each member's raw and smoothed line (docs/grafana.md)
        wanted = {
            f"{fn}_{f}/{m}"
            for fn in ("mean", "exponential_moving_average")
            for f in families & set(FAMILIES)
            for m in MEMBERS
        }
        for run in sel.runs:
            names = {name.partition(" ")[0] for name, r in series if r == run}
            if names != wanted:
                problems.append(f"{chart}: {run} drawn as {sorted(names)}, not {sorted(wanted)}")
    return problems


def test_a_name_familys_chart_draws_the_same_series_from_the_rollups_as_from_the_raw_points(
    db: InfluxDatabase, store: Path, builtin: registry.Registry
) -> None:
    """Through Grafana's own code: a family chart answered by the rollups (its columns named
    `mean_mean:<id>/<member>` by InfluxQL) draws each run's members under the raw points' names
    (`mean_<id>/<member>`, the legend's rows and the family overrides' patterns), in the same
    colours and lines, with as many points, at both rollup levels. Without the chart's
    `renameByRegex` it does not."""
    api = create_app(DatasourceConfig(store=store), builtin).test_client()
    dashboard = _reward_page(builtin)
    sel = resolve_hidden(dashboard, DENSE, _CHOSEN, db.raw_query)
    coarse = replace(sel, single={**sel.single, "bucket": ("8192", "8192")})
    for chosen in (sel, coarse):
        assert not _family_drawn_problems(db, api, dashboard, chosen)
    unrenamed = json.loads(json.dumps(dashboard))
    for panel in _family_charts(unrenamed):
        panel["transformations"] = [
            t for t in panel["transformations"] if t["id"] != "renameByRegex"
        ]
    assert unrenamed != dashboard
    problems = _family_drawn_problems(db, api, unrenamed, sel)
    assert len(problems) >= len(_family_charts(dashboard)), problems
