"""The dashboards read long runs from the exporter's step rollups, and draw what the raw points say.

Runs imported through the real exporter (`DirectRun`, which keeps the 64- and 4096-step blocks
in InfluxDB as a trainer's exporter does) into a real InfluxDB 1.6. For every chart of every
generated dashboard the hidden variables are computed by InfluxDB as Grafana computes them
(`grafana_interp.resolve_hidden`) and each target is run:
- exactly one of a chart's sources answers (raw points below 64 steps per point or when a
  selected run has no 64-step blocks, else the rollup level the bucket is a multiple of);
- what a rollup target answers is what the same chart's raw-point statement answers over the same
  buckets: the step, mean, max, moving average and slope of every bucket of every run (the
  promise: the rollups are the raw points summed, `exporter.influx.rollups`);
- a series has at most about `POINTS_PER_SERIES` points.
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
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.queries import POINTS_PER_SERIES

DENSE = ("long-a", "long.b")
SPARSE = "ppo-sparse"
STEPS = {"long-a": 70_000, "long.b": 66_000, SPARSE: 200_000}
STRIDE = {"long-a": 1, "long.b": 1, SPARSE: 2048}
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
        start = 0 if run_name != "long.b" else 1_000  # a run that starts later
        for step in range(start, steps, STRIDE[run_name]):
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


def _assert_same(rolled: dict[str, Any], raw: dict[str, Any], where: str) -> None:
    assert set(rolled) == set(raw), (where, sorted(rolled), sorted(raw))
    for run, series in rolled.items():
        other = raw[run]
        assert series["columns"] == other["columns"], (where, series["columns"], other["columns"])
        assert len(series["values"]) == len(other["values"]), (where, run)
        for got, want in zip(series["values"], other["values"], strict=True):
            assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (
                f"{where} {run}: rollups {got} != raw points {want}"
            )


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
                _assert_same(series, raw[ref.removesuffix("64")], f"{path} / {panel['title']}")
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
            _assert_same(series, raw[ref.removesuffix("4096")], f"{path} / {panel['title']}")


def test_a_run_too_sparse_for_rollups_sends_the_chart_to_the_raw_points(
    db: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A run logging every 2,048 steps (SB3's rollout) has no 64-step blocks kept: with it
    selected, the charts read every run's raw points (a few hundred for it) and draw all runs."""
    runs = (*DENSE, SPARSE)
    for path, dashboard in _dashboards(builtin):
        sel = resolve_hidden(dashboard, runs, _CHOSEN, db.raw_query)
        assert sel.single["logged"][1] == "3" and sel.single["dense"][1] == "2", sel.single
        for panel in _logged_charts(dashboard):
            answered = _answering(db, panel, sel)
            assert answered and all(len(ref) == 1 for ref in answered), sorted(answered)
            for series in answered.values():
                assert set(series) == set(runs), (path, panel["title"], sorted(series))
