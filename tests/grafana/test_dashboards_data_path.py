"""Grafana's data path for every step-axis chart of every generated dashboard, run on real data.

For each panel: every InfluxQL target, with its variables substituted as Grafana does, runs
against a real InfluxDB 1.6 loaded by the real exporter (`epoch=ms`, as Grafana's backend asks);
the response becomes frames as Grafana's InfluxQL backend builds them (`influxql_frames.py`, from
grafana/grafana pkg/tsdb/influxdb/influxql/buffered/response_parser.go); the panel's
transformations run in Node through Grafana's own @grafana/data 13.2.0 (`transformDataFrame`,
`applyFieldOverrides`), with `partitionByValues`, which is Grafana app code, written from
public/app/features/transformers/partitionByValues/partitionByValues.ts and partition.ts.

Then what the panel needs, from its source: the `trend` panel draws only when it gets exactly one
frame ("Only one frame is supported, consider adding a join transformation") whose x field is
numeric and ascending (`isLikelyAscendingVector`) [public/app/plugins/panel/trend/TrendPanel.tsx,
utils.ts]. On top: every series a query returns for a run reaches that frame with all its points,
each run of one series has its own colour, and raw is thinner and lighter than smoothed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from bundle_data import log_runs
from grafana_data_path import run_panels
from grafana_interp import Selection, interpolate
from influx_server import InfluxDatabase
from influxql_frames import table_frames

import registry
from grafana.dashboards_gen import dashboard_files

RUNS = ("ppo-a", "ppo.b", "sac-c")
STEPS = 120


@pytest.fixture(scope="module")
def loaded(
    builtin: registry.Registry, influxd: Any, tmp_path_factory: pytest.TempPathFactory
) -> InfluxDatabase:
    db = InfluxDatabase(influxd, "datapath")
    influxd.post_query('CREATE DATABASE "datapath"')
    store = tmp_path_factory.mktemp("datapath-store")
    log_runs(builtin, lambda: db.settings(store, policy="warn"), RUNS, STEPS)
    return db


def _selection() -> Selection:
    return Selection(
        runs=RUNS,
        single={
            "smoothing": ("5", "5"),
            "step_from": ("0", "0"),
            "bucket": ("1", "1"),
        },
    )


def _chart_panels(builtin: registry.Registry) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, text in sorted(dashboard_files(builtin, ("en", "zh")).items()):
        for panel in json.loads(text)["panels"]:
            if panel.get("type") in ("trend", "xychart", "timeseries"):
                yield path, panel


def _kind(column: str) -> tuple[str, str]:
    """(series, kind) of a column: `<id> raw|smoothed|...`, or a name family's InfluxQL-named
    `mean_<id>/<member>` (raw) and `exponential_moving_average_<id>/<member>` (smoothed)."""
    for prefix, kind in (("mean_", "raw"), ("exponential_moving_average_", "smoothed")):
        if column.startswith(prefix):
            return column[len(prefix) :], kind
    series, _, kind = column.rpartition(" ")
    return series, kind


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")[:6]
    r, g, b = (int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.fixture(scope="module")
def processed(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> list[tuple[str, dict[str, Any], dict[tuple[str, str], int], dict[str, Any]]]:
    """(dashboard, panel, points per (series, run) the queries returned, Grafana's result)."""
    inputs = []
    promised_all = []
    panels = list(_chart_panels(builtin))
    for path, panel in panels:
        frames: list[dict[str, Any]] = []
        promised: dict[tuple[str, str], int] = {}
        for target in panel["targets"]:
            query = interpolate(target["query"], _selection())
            body = loaded.raw_query(query)
            for series in body["results"][0].get("series", []):
                run = series.get("tags", {}).get("run")
                for i, col in enumerate(series["columns"]):
                    if col in ("time", "step"):
                        continue
                    n = sum(1 for v in series["values"] if v[i] is not None)
                    if n:
                        promised[(col, run)] = n
            frames += table_frames(body, target["refId"], query)
        promised_all.append(promised)
        inputs.append(
            {
                "key": f"{path} / {panel['title']}",
                "frames": frames,
                "transformations": panel.get("transformations", []),
                "fieldConfig": panel.get("fieldConfig", {"defaults": {}, "overrides": []}),
            }
        )
    results = run_panels(inputs)
    return [
        (path, panel, promised, result)
        for (path, panel), promised, result in zip(panels, promised_all, results, strict=True)
    ]


def test_every_chart_gets_one_frame_with_an_ascending_numeric_step(
    processed: list[tuple[str, dict[str, Any], dict[tuple[str, str], int], dict[str, Any]]],
) -> None:
    assert len(processed) > 100
    for _path, panel, _promised, result in processed:
        key = result["key"]
        assert "error" not in result, f"{key}: {result.get('error')}"
        frames = result["frames"]
        assert len(frames) == 1, f"{key}: {len(frames)} frames; the trend panel draws only one"
        x_name = panel["options"]["xField"]
        x = [f for f in frames[0]["fields"] if f["name"] == x_name]
        assert len(x) == 1 and x[0]["type"] == "number" and x[0]["ascending"], key


def test_every_series_a_query_returns_reaches_the_chart_for_every_run(
    processed: list[tuple[str, dict[str, Any], dict[tuple[str, str], int], dict[str, Any]]],
) -> None:
    lost: list[str] = []
    for _path, _panel, promised, result in processed:
        fields = {
            (f["name"], f["labels"].get("run")): f["nonNull"]
            for fr in result.get("frames", [])
            for f in fr["fields"]
        }
        assert {run for _, run in promised} == set(RUNS), result["key"]
        for (col, run), n in promised.items():
            if fields.get((col, run)) != n:
                lost.append(f"{result['key']}: {col} of {run} ({fields.get((col, run))}/{n})")
    assert not lost, f"{len(lost)} series lost, e.g. " + "; ".join(lost[:5])


def test_each_run_has_its_own_colour_and_raw_is_thin_and_light(
    processed: list[tuple[str, dict[str, Any], dict[tuple[str, str], int], dict[str, Any]]],
) -> None:
    for _path, _panel, _promised, result in processed:
        key = result["key"]
        by_series: dict[str, dict[str, dict[str, Any]]] = {}
        for fr in result["frames"]:
            for f in fr["fields"]:
                run = f["labels"].get("run")
                if run is not None and f["type"] == "number":
                    by_series.setdefault(f["name"], {})[run] = f
        kinds = {_kind(name): runs for name, runs in by_series.items()}
        for (series, kind), runs in kinds.items():
            colours = {f["color"] for f in runs.values()}
            if kind != "raw":
                assert len(colours) == len(runs), f"{key}: runs of {series} share {colours}"
                continue
            # raw: one light tint behind the runs' coloured smoothed lines, and thinner
            assert len(colours) == 1 and _luminance(colours.pop()) > 0.5, f"{key}: {series}"
            smoothed = kinds.get((series, "smoothed"), {})
            assert smoothed, f"{key}: {series} has no smoothed partner"
            for run, raw in runs.items():
                assert raw["lineWidth"] < smoothed[run]["lineWidth"], f"{key}: {series} {run}"
