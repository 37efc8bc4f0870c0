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
  charts to the raw points, which draw it.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from grafana_interp import Selection, interpolate, resolve_hidden
from influx_server import InfluxDatabase, InfluxServer

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

DENSE = ("long-a", "long.b")
SPARSE = "ppo-sparse"
STEPS = {"long-a": 70_000, "long.b": 66_000, SPARSE: 200_000}
STRIDE = {"long-a": 1, "long.b": 1, SPARSE: 2048}
START = {"long-a": 0, "long.b": 1_000, SPARSE: 0}
METRICS = ("policy_kl", "ref_kl", "policy_entropy", "grad_norm")
_CHOSEN = {"smoothing": ("5", "5"), "step_from": ("0", "0")}


def _value(run: str, metric: str, step: int) -> float:
    """A value inside every metric's physical limits (entropy: at most 10 nats): an
    out-of-limits one is rejected, and the run then logs none of that metric."""
    return (
        1.0 + 0.5 * math.sin(step / (700.0 + 50 * len(metric))) + 0.01 * (step % 13) + len(run) / 10
    )


@pytest.fixture(scope="module")
def db(
    influxd: InfluxServer, builtin: registry.Registry, tmp_path_factory: pytest.TempPathFactory
) -> InfluxDatabase:
    name = f"rollups_{uuid.uuid4().hex[:8]}"
    influxd.post_query(f'CREATE DATABASE "{name}"')
    database = InfluxDatabase(influxd, name)
    settings = database.settings(tmp_path_factory.mktemp("store"))
    for run_name, steps in STEPS.items():
        run = DirectRun(run_name, project=None, registry=builtin, settings=settings, framework=None)
        # long.b starts later, inside a block
        for step in range(START[run_name], steps, STRIDE[run_name]):
            run.log(step, {m: _value(run_name, m, step) for m in METRICS})
        run.finish(120)
    return database


def _dashboards(builtin: registry.Registry) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, text in sorted(dashboard_files(builtin, ("en",)).items()):
        dashboard = json.loads(text)
        if any(p.get("type") == "trend" for p in dashboard["panels"]):
            yield path, dashboard


def _logged_charts(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel.get("type") == "trend" and any(
            f'"{m}' in t.get("query", "") for t in panel["targets"] for m in METRICS
        ):
            yield panel


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
    db: InfluxDatabase, reg: registry.Registry, run: str, metric: str, lo: int, hi: int, level: int
) -> list[float]:
    """The means of the blocks of `level` steps from `lo` to `hi`, from the raw points."""
    body = db.raw_query(
        f'SELECT mean("{metric}") FROM "{reg.metric(metric).group}" WHERE "run" = \'{run}\' '
        f"AND time >= {lo}s AND time < {hi}s GROUP BY time({level}s) fill(none)"
    )
    return [v[1] for s in body["results"][0].get("series", []) for v in s["values"]]


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
        columns = series["columns"]
        assert columns == other["columns"], (where, columns, other["columns"])
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
                metric, _, kind = column.partition(" ")
                if column in ("time", "step") or kind == "max":
                    assert _close(g, w), (where, run, column, g, w)
                elif kind == "raw":
                    lo = got[0] // 1000
                    means = _block_means(db, reg, run, metric, lo, lo + bucket, level)
                    assert min(means) - 1e-9 <= g <= max(means) + 1e-9, (where, run, g, means)


def test_long_dense_runs_are_read_from_64_step_rollups_and_equal_the_raw_points(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    checked = 0
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
    assert checked >= 8


def test_4096_step_blocks_equal_the_raw_points_over_the_same_buckets(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A bucket of 8,192 steps (a run of millions of steps) is read from the 4096-step blocks."""
    path, dashboard = next(_dashboards(builtin))
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
        m: lambda step, m=m: _value(OLD, m, step) for m in METRICS
    }
    lines = []
    for step in range(steps):
        by_group: dict[str, list[str]] = {}
        for name, value in fields.items():
            group = step_measurement(reg) if name == NONFINITE_FIELD else reg.metric(name).group
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
def test_past_ten_runs_each_run_gets_fewer_points_so_a_page_reads_about_as_many(
    count: int, influxd: InfluxServer, builtin: registry.Registry
) -> None:
    """Issue 37: a page of 20 long runs should load like a page of one. What a chart costs
    InfluxDB follows the points it answers, so past `RUNS_AT_FULL_DETAIL` selected runs each
    gets ceil(n / 10) times fewer: 10 runs of 100,000 steps get 1,000 points each, 11 and 20
    runs 500 (the bucket a multiple of 64, the finest rollup level)."""
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
