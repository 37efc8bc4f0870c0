"""Every InfluxQL query of every generated dashboard, with variables and macros substituted the
way Grafana does, run against a real InfluxDB loaded by the real exporter."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundle_data import healthy_value, logged_metrics
from grafana_interp import Selection, interpolate, variable_value
from influx_server import InfluxDatabase

import exporter
import registry
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.queries import (
    POINTS_PER_SERIES,
    Series,
    bucket_query,
    metric_query,
    step_measurement,
)
from grafana.dashboards_gen.sources import INFLUX

RUNS = ("ppo-a", "ppo.b")  # a dot: the run regex must be escaped like Grafana does
STEPS = 300
FAMILY = ("format", "length")


@pytest.fixture(scope="module")
def loaded(
    builtin: registry.Registry, influxd: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InfluxDatabase]:
    db = InfluxDatabase(influxd, "dashboards")
    influxd.post_query('CREATE DATABASE "dashboards"')
    store = tmp_path_factory.mktemp("dash-store")
    families = [m for m in builtin.metrics if m.pattern is not None]
    for i, name in enumerate(RUNS):
        run = exporter.init(name, registry=builtin, settings=db.settings(store, policy="warn"))
        rng = np.random.default_rng(i)
        for step in range(STEPS):
            values = {m.id: healthy_value(m, step, rng) for m in logged_metrics(builtin)}
            for family in families:
                values.update({f"{family.id}/{n}": 0.5 + 0.1 * j for j, n in enumerate(FAMILY)})
            run.log(step, values)
        run.event(100, "checkpoint", "saved ckpt-100")
        run.finish(60)
    long_run = exporter.init("long", registry=builtin, settings=db.settings(store, policy="warn"))
    for step in range(0, 1_000_000, 50):
        long_run.log(step, {"policy_kl": 0.01 + 1e-9 * step})
    long_run.finish(120)
    yield db


def _selection(runs: tuple[str, ...] = RUNS, bucket: str = "1") -> Selection:
    return Selection(
        runs=runs,
        single={
            "smoothing": ("10", "10"),
            "step_from": ("0", "0"),
            "bucket": (bucket, bucket),
            # as InfluxDB computes them for these runs: all logged, none with 64-step rollups
            "logged": (str(len(runs)), str(len(runs))),
            "dense": ("", ""),
        },
        time_from_ms=0,
        time_to_ms=1_000_000 * 1000,
    )


def _influx_queries(builtin: registry.Registry) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, text in dashboard_files(builtin, ("en", "zh")).items():
        dash = json.loads(text)
        for v in dash["templating"]["list"]:
            if v["type"] == "query" and v["datasource"]["uid"] == INFLUX.variable_ref()["uid"]:
                yield path, f"variable {v['name']}", {"query": v["query"]}
        for panel in dash["panels"]:
            for t in panel.get("targets", []):
                if t["datasource"]["uid"] == INFLUX.variable_ref()["uid"]:
                    yield path, panel.get("title", ""), t


def _metric_columns(row: dict[str, Any]) -> list[str]:
    return [k for k in row if k not in ("time", "step", "run", "_measurement")]


def test_every_dashboard_query_returns_step_aligned_series(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    checked = 0
    for path, title, target in _influx_queries(builtin):
        query = interpolate(target["query"], _selection())
        rows = loaded.query(query)
        # short runs: the raw points answer (targets A, B, ...); the rollup targets (A64,
        # A4096) are closed, and the `dense` variable has no value (no run dense at 64 steps)
        rollup = target.get("refId", "A")[1:].isdigit() or title == "variable dense"
        assert bool(rows) != rollup, f"{path} / {title}: {len(rows)} rows for {query}"
        checked += 1
        if 'max("step") AS "step"' not in target["query"]:
            continue
        for run in RUNS:
            mine = [r for r in rows if r["run"] == run]
            assert mine, f"{path} / {title}: nothing for run {run}"
            steps = [r["step"] for r in mine]
            # one-step buckets: the step the panel plots is the point's own step
            assert steps == sorted(steps) and all(r["step"] == r["time"] for r in mine)
            assert len(steps) == STEPS
            values = [v for r in mine for k in _metric_columns(r) if (v := r[k]) is not None]
            assert values and all(math.isfinite(v) for v in values), f"{path} / {title}"
    assert checked > 50


def test_each_chart_query_returns_the_metric_it_names(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    for m in logged_metrics(builtin):
        rows = loaded.query(interpolate(metric_query(Series(m)), _selection(("ppo-a",))))
        assert rows and f"{m.id} raw" in rows[0] and f"{m.id} smoothed" in rows[-1], m.id
        assert rows[0][f"{m.id} raw"] is not None


def test_a_name_family_draws_every_member(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    family = next(m for m in builtin.metrics if m.pattern is not None and m.group == "reward")
    rows = loaded.query(interpolate(metric_query(Series(family)), _selection(("ppo-a",))))
    assert {f"mean_{family.id}/{n}" for n in FAMILY} <= set(rows[-1])


def test_a_million_step_run_draws_about_a_thousand_points(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    kl = builtin.metric("policy_kl")
    # the bucket as the dashboard's `bucket` variable computes it for this run
    query = bucket_query(step_measurement(builtin))
    body = loaded.raw_query(interpolate(query, _selection(("long",), "1")))
    assert len(body["results"][0]["series"][0]["values"]) == 1  # one value: nothing stale
    bucket = variable_value(body)
    # about a thousand points, on whole 64-step blocks (the rollups' finest level)
    assert bucket == str(math.ceil(1_000_000 / POINTS_PER_SERIES / 64) * 64)
    query = interpolate(metric_query(Series(kl)), _selection(("long",), bucket))
    rows = loaded.query(query)
    assert POINTS_PER_SERIES * 0.95 <= len(rows) <= POINTS_PER_SERIES + 1
    steps = [r["step"] for r in rows]
    assert steps == sorted(steps) and steps[-1] == 999_950


def test_the_bucket_is_one_value_that_fits_every_selected_run(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    """A 300-step run is drawn at every step (defect: a fixed 1,000,000-step default drew 2
    points of a 2000-step run); with a 1M-step run selected too, the one value is the long
    run's (defect: `run_config`, logged at step 0, always offered 1, which stayed selected)."""
    query = bucket_query(step_measurement(builtin))
    assert variable_value(loaded.raw_query(interpolate(query, _selection()))) == "1"
    both = loaded.raw_query(interpolate(query, _selection(("ppo-a", "long"), "1")))
    assert variable_value(both) == str(math.ceil(1_000_000 / POINTS_PER_SERIES / 64) * 64)


def test_the_events_table_finds_step_keyed_events(loaded: InfluxDatabase) -> None:
    from grafana.dashboards_gen.queries import events_query

    rows = loaded.query(interpolate(events_query(), _selection()))
    assert {r["text"] for r in rows} >= {"saved ckpt-100"} and {r["kind"] for r in rows} >= {
        "checkpoint"
    }


def test_dashboards_exist_on_disk_as_built(builtin: registry.Registry) -> None:
    root = Path(__file__).parents[2]
    for path, text in dashboard_files(builtin, ("en", "zh")).items():
        assert (root / path).read_text(encoding="utf-8") == text, (
            f"{path} is stale: run rlvitals build"
        )
