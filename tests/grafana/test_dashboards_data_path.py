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
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from bundle_data import log_runs
from grafana_data_path import run_panels
from grafana_interp import Selection, interpolate, resolve_hidden
from infinity_answer import infinity_frames, is_infinity
from influx_server import InfluxDatabase
from influxql_frames import table_frames

import registry
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.panels import RAW_COLOUR
from grafana.dashboards_gen.queries import EVENT_MARKS
from grafana.datasource import DatasourceConfig, create_app

RUNS = ("ppo-a", "ppo.b", "sac-c")
UNSELECTED = "other-d"
"""Logged too but never selected: nothing of it may reach a chart."""
STEPS = 120


@pytest.fixture(scope="module")
def datapath_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("datapath-store")


@pytest.fixture(scope="module")
def loaded(builtin: registry.Registry, influxd: Any, datapath_store: Path) -> InfluxDatabase:
    db = InfluxDatabase(influxd, "datapath")
    influxd.post_query('CREATE DATABASE "datapath"')
    store = datapath_store
    # sac-c logs every third step only: the runs' step sets differ, so an inner join (or a
    # join that drops a run's rows) loses points and the series checks below fail
    log_runs(
        builtin,
        lambda: db.settings(store, policy="warn"),
        (*RUNS, UNSELECTED),
        STEPS,
        stride={"sac-c": 3},
    )
    return db


@pytest.fixture(scope="module")
def runs_api(loaded: InfluxDatabase, datapath_store: Path, builtin: registry.Registry) -> Any:
    """The rlvitals datasource on the store the runs were logged to: what a chart's Infinity
    query of the runs' colours reads (the store gave each run its colour when it was created)."""
    return create_app(DatasourceConfig(store=datapath_store), builtin).test_client()


_CHOSEN = {"smoothing": ("5", "5"), "step_from": ("0", "0")}
_SHORT = Selection(
    runs=RUNS, single={**_CHOSEN, "bucket": ("1", "1"), "logged": ("3", "3"), "dense": ("", "")}
)
"""The hidden variables as InfluxDB computes them for short runs (no 64-step rollups): for a
query that needs no database."""


def _selection(
    dashboard: dict[str, Any], db: InfluxDatabase, runs: tuple[str, ...] = RUNS
) -> Selection:
    """The user's choices (`runs` selected), and the hidden variables (`logged`, `dense`,
    `bucket`) computed by InfluxDB from them as Grafana computes them."""
    return resolve_hidden(dashboard, runs, _CHOSEN, db.raw_query)


def built(builtin: registry.Registry) -> dict[str, dict[str, Any]]:
    """Every generated dashboard (both languages), by path."""
    return {p: json.loads(t) for p, t in sorted(dashboard_files(builtin, ("en", "zh")).items())}


def _chart_panels(
    dashboards: dict[str, dict[str, Any]],
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for path, dashboard in sorted(dashboards.items()):
        for panel in dashboard["panels"]:
            if panel.get("type") in ("trend", "xychart", "timeseries"):
                yield path, panel, dashboard


def _kind(column: str) -> tuple[str, str]:
    """(series, kind) of a column: `<id> raw|smoothed|...`, or a name family's InfluxQL-named
    `mean_<id>/<member>` (raw) and `exponential_moving_average_<id>/<member>` (smoothed)."""
    for prefix, kind in (("mean_", "raw"), ("exponential_moving_average_", "smoothed")):
        if column.startswith(prefix):
            return column[len(prefix) :], kind
    series, _, kind = column.rpartition(" ")
    return series, kind


Processed = list[tuple[str, dict[str, Any], dict[tuple[str, str], int], dict[str, Any]]]


@pytest.fixture(scope="module")
def processed(loaded: InfluxDatabase, runs_api: Any, builtin: registry.Registry) -> Processed:
    """(dashboard, panel, points per (series, run) the queries returned, Grafana's result)."""
    return process(built(builtin), loaded, runs_api)


class PanelInputs(NamedTuple):
    panels: list[tuple[str, dict[str, Any], dict[str, Any]]]
    """(dashboard path, panel, dashboard) of every chart"""
    promised: list[dict[tuple[str, str], int]]
    """per chart: points per (series, run) its queries returned"""
    inputs: list[dict[str, Any]]
    """per chart: its frames, transformations and field config, as data_path.cjs reads them"""
    store_colours: dict[str, str]
    """the colour `/api/runs` gives each selected run"""


def panel_inputs(
    dashboards: dict[str, dict[str, Any]],
    loaded: InfluxDatabase,
    api: Any,
    runs: tuple[str, ...] = RUNS,
) -> PanelInputs:
    """Every chart of `dashboards` with the frames its queries get from InfluxDB and the rlvitals
    API (the runs' colours), as Grafana's backend builds them, `runs` selected (also what the
    rendering harness, test_dashboards_drawn_browser.py, draws)."""
    answer = api.get("/api/runs", query_string={"shown": json.dumps(list(runs))}).get_json()
    store_colours = {r["run"]: r["color"] for r in answer["runs"]}
    inputs = []
    promised_all = []
    panels = list(_chart_panels(dashboards))
    selections: dict[str, Selection] = {}
    for path, panel, dashboard in panels:
        if path not in selections:
            selections[path] = _selection(dashboard, loaded, runs)
        frames: list[dict[str, Any]] = []
        promised: dict[tuple[str, str], int] = {}
        for target in panel["targets"]:
            if is_infinity(target):
                frames += infinity_frames(api, target, selections[path])
                continue
            query = interpolate(target["query"], selections[path])
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
                "options": panel.get("options", {}),
            }
        )
    return PanelInputs(panels, promised_all, inputs, store_colours)


def process(dashboards: dict[str, dict[str, Any]], loaded: InfluxDatabase, api: Any) -> Processed:
    """Every chart of `dashboards` through InfluxDB, the rlvitals API (the runs' colours) and
    Grafana's data path (also what test_dashboard_mutations.py runs on mutated copies). Each
    result also holds, as `storeColours`, the colour `/api/runs` gives each selected run."""
    panels, promised_all, inputs, store_colours = panel_inputs(dashboards, loaded, api)
    results = run_panels(inputs)
    for result in results:
        result["storeColours"] = store_colours
    return [
        (path, panel, promised, result)
        for (path, panel, _), promised, result in zip(panels, promised_all, results, strict=True)
    ]


def test_every_chart_gets_one_frame_with_an_ascending_numeric_step(
    processed: Processed,
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
    processed: Processed,
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


def _run_fields(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        f
        for fr in result.get("frames", [])
        for f in fr["fields"]
        # the x field keeps a run label from the join; it is the axis, not a series
        if f["type"] == "number" and f["labels"].get("run") is not None and f["name"] != "step"
    ]


def _family(field: dict[str, Any]) -> bool:
    """A name family's member (`mean_reward_component/format`): coloured per (run, member)."""
    return "/" in field["name"]


def test_every_run_has_one_colour_in_every_series_of_every_panel(
    processed: Processed,
) -> None:
    """docs/compose.md's promise: a run's colour is the same in every series, chart and dashboard;
    raw lines are grey, a colour no run can have; the runs differ."""
    colours: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}  # an example of each (run, colour)
    for _path, _panel, _promised, result in processed:
        for f in _run_fields(result):
            kind = _kind(f["name"])[1]
            if _family(f):
                continue
            if kind == "raw":
                assert f["color"] == RAW_COLOUR, f"{result['key']}: {f['name']} {f['color']}"
                continue
            colours.setdefault(f["labels"]["run"], set()).add(f["color"])
            where.setdefault((f["labels"]["run"], f["color"]), f"{result['key']}: {f['name']}")
    assert set(colours) == set(RUNS), where
    for run, seen in colours.items():
        assert len(seen) == 1, f"{run} is drawn in " + "; ".join(
            f"{c} ({where[(run, c)]})" for c in sorted(seen)
        )
    per_run = [next(iter(seen)) for seen in colours.values()]
    assert len(set(per_run)) == len(RUNS), f"two runs share a colour: {colours}"
    assert RAW_COLOUR not in per_run


def test_every_run_is_drawn_in_the_colour_the_store_gave_it(processed: Processed) -> None:
    """Issue 37: a run's colour is the one it was given when created (exporter.store.run_colors,
    served by `/api/runs`), in every series but the grey raw ones (its smoothed line, max points,
    slope, event marks), in every chart of every dashboard."""
    checked = 0
    for _path, _panel, _promised, result in processed:
        stored = result["storeColours"]
        assert set(stored) == set(RUNS), stored
        for f in _run_fields(result):
            if _family(f) or _kind(f["name"])[1] == "raw":
                continue
            run = f["labels"]["run"]
            assert f["color"] == stored.get(run), (
                f"{result['key']}: {f['name']} of {run} is {f['color']}, "
                f"its colour {stored.get(run)}"
            )
            checked += 1
    assert checked


def test_raw_lines_are_thinner_than_their_runs_smoothed_lines(
    processed: Processed,
) -> None:
    for _path, _panel, _promised, result in processed:
        fields = {(f["name"], f["labels"]["run"]): f for f in _run_fields(result)}
        for (name, run), f in fields.items():
            series, kind = _kind(name)
            if kind != "raw":
                continue
            partner = f"exponential_moving_average_{series}" if _family(f) else f"{series} smoothed"
            smoothed = fields.get((partner, run))
            assert smoothed is not None, f"{result['key']}: {name} has no smoothed partner"
            assert f["lineWidth"] < smoothed["lineWidth"], f"{result['key']}: {name} {run}"


def test_the_step_axis_is_labelled_step(
    processed: Processed,
) -> None:
    for _path, _panel, _promised, result in processed:
        x = [f for fr in result["frames"] for f in fr["fields"] if f["name"] == "step"]
        assert [f["displayName"] for f in x] == ["step"], f"{result['key']}: {x[:1]}"


def _drawn_metrics(panel: dict[str, Any]) -> set[str]:
    """The metrics a chart's queries draw a smoothed line of (`AS "<id> smoothed"`)."""
    return {
        m
        for t in panel["targets"]
        for m in re.findall(r'AS "([^" /]+) smoothed"', t.get("query", ""))
    }


def _title(builtin: registry.Registry, path: str, metric: str) -> str:
    return builtin.metric(metric).title.get("zh" if "/zh/" in path else "en")


def test_every_legend_row_names_its_run_and_metric(
    processed: Processed, builtin: registry.Registry
) -> None:
    """Issue 37: legends name the metric and the run: a row per run and metric drawn."""
    for path, panel, _promised, result in processed:
        fields = _run_fields(result)
        if any(_family(f) for f in fields):
            continue
        shown = sorted(f["displayName"] for f in fields if not (f["hidden"] or {}).get("legend"))
        wanted = sorted(
            f"{run} · {_title(builtin, path, m)}" for run in RUNS for m in _drawn_metrics(panel)
        )
        assert shown == wanted, f"{result['key']}: legend rows {shown}"


def test_no_two_tooltip_rows_read_alike_and_each_names_its_run_and_metric(
    processed: Processed, builtin: registry.Registry
) -> None:
    """Issue 37: a tooltip of four lines per run read four times the run's name; each row now
    names its run, its metric and, for the bucket max and the slope, which line it is."""
    checked = 0
    for path, _panel, _promised, result in processed:
        fields = _run_fields(result)
        if any(_family(f) for f in fields):
            continue
        rows = [f for f in fields if not (f["hidden"] or {}).get("tooltip")]
        names = [f["displayName"] for f in rows]
        assert len(names) == len(set(names)), f"{result['key']}: tooltip rows {names}"
        for f in rows:
            run, metric = f["labels"]["run"], _kind(f["name"])[0]
            assert f["displayName"].startswith(f"{run} · {_title(builtin, path, metric)}"), (
                result["key"],
                f["displayName"],
            )
            checked += 1
    assert checked > 300


def test_the_overviews_charts_mark_each_runs_events_at_their_steps(
    processed: Processed,
) -> None:
    """bundle_data logs a checkpoint at step 100 for every run."""
    overview = [r for path, _p, _pr, r in processed if path.endswith("overview.json")]
    assert overview
    for result in overview:
        marks = [f for f in _run_fields(result) if f["name"] == EVENT_MARKS]
        assert sorted(f["labels"]["run"] for f in marks) == sorted(RUNS), result["key"]
        assert all(f["nonNull"] == 1 and f["drawStyle"] == "points" for f in marks), marks
        step = next(f for fr in result["frames"] for f in fr["fields"] if f["name"] == "step")
        assert step.get("values") is None or 100 in step["values"]


def test_no_chart_paints_a_threshold_area_on_the_event_marks_scale(
    processed: Processed,
) -> None:
    """Grafana draws one threshold area per scale, from the first field on it that asks for one
    (preparePlotConfigBuilder and UPlotConfigBuilder.addThresholds, computed in data_path.cjs on
    the fields as @grafana/data's applyFieldOverrides resolves them): the event marks' hidden
    [0, 1] axis must get none (issue 36: a KL band of [0, 0.05] painted 95 % of a chart red), and a
    chart has at most one area, on the scale of its first metric: its healthy band."""
    checked = 0
    for _path, panel, _promised, result in processed:
        for frame in result["frames"]:
            areas = frame["thresholdAreas"]
            marks = {f["scaleKey"] for f in frame["fields"] if f["name"] == EVENT_MARKS}
            painted = [a for a in areas if a["scaleKey"] in marks]
            assert not painted, f"{result['key']}: event marks' scale painted: {painted}"
            assert len(areas) <= 1, f"{result['key']}: {len(areas)} threshold areas: {areas}"
            if areas:
                first = panel["targets"][0]["query"]
                shown = [f for f in frame["fields"] if f["scaleKey"] == areas[0]["scaleKey"]]
                assert any(f["name"].split(" ")[0] in first for f in shown), (result["key"], areas)
            checked += bool(marks)
    assert checked, "no chart marks events: nothing was checked"


def test_the_events_table_shows_steps_as_steps_and_no_1970_time(
    loaded: InfluxDatabase, builtin: registry.Registry
) -> None:
    """The events table through its own transformations (Grafana's `merge` and `organize`): the
    InfluxQL point's time is its step, so a `Time` column would read 1970-01-01 00:01:40 for
    step 100 (issue 36); the step column says it."""
    inputs = []
    for path, text in sorted(dashboard_files(builtin, ("en", "zh")).items()):
        for panel in json.loads(text)["panels"]:
            if panel.get("type") != "table" or "events" not in panel["targets"][0].get("query", ""):
                continue
            query = interpolate(panel["targets"][0]["query"], _SHORT)
            inputs.append(
                {
                    "key": f"{path} / {panel['title']}",
                    "frames": table_frames(loaded.raw_query(query), "A", query),
                    "transformations": panel.get("transformations", []),
                    "fieldConfig": panel.get("fieldConfig", {"defaults": {}, "overrides": []}),
                    "withValues": True,
                }
            )
    assert len(inputs) == 2  # the overview, in each language
    for result in run_panels(inputs):
        assert "error" not in result, result
        fields = [f for frame in result["frames"] for f in frame["fields"]]
        assert not [f for f in fields if f["type"] == "time"], (result["key"], fields)
        steps = [f for f in fields if f["type"] == "number"]
        assert len(steps) == 1 and 100 in steps[0]["values"], (result["key"], steps)
        assert steps[0]["displayName"] == "step", steps[0]["displayName"]


def _drawn(results: list[dict[str, Any]]) -> dict[str, set[str]]:
    """metric id -> the kinds of its series that reached some chart, for every run."""
    out: dict[str, dict[str, set[str]]] = {}
    for result in results:
        for f in _run_fields(result):
            if f["name"] == EVENT_MARKS:
                continue
            series, kind = _kind(f["name"])
            out.setdefault(series.split("/")[0], {}).setdefault(kind, set()).add(f["labels"]["run"])
    return {
        metric: {k for k, runs in kinds.items() if runs == set(RUNS)}
        for metric, kinds in out.items()
    }


def test_the_overview_draws_exactly_the_registrys_overview_metrics_once(
    processed: Processed,
    builtin: registry.Registry,
) -> None:
    """Expected from the registry's promise (`display.overview`), not from the panels' own
    queries: a dropped query or metric fails this, and so does a panel drawn twice."""
    for lang in ("en", "zh"):
        results = [r for path, _p, _pr, r in processed if path.endswith(f"{lang}/overview.json")]
        assert len(results) <= 8  # the seeds: about eight core charts
        promised = {m.id for m in builtin.metrics if m.display.overview and m.kind != "counter"}
        drawn = _drawn(results)
        assert set(drawn) == promised
        for metric in promised:
            assert {"raw", "smoothed"} <= drawn[metric], f"{lang}: {metric} {drawn[metric]}"
        titles = [r["key"] for r in results]
        assert len(titles) == len(set(titles)), "a panel appears twice"


def test_each_detail_page_draws_every_metric_of_its_groups_for_every_run(
    processed: Processed,
    builtin: registry.Registry,
) -> None:
    from grafana.dashboards_gen.details import DETAIL_GROUPS

    for page, groups in DETAIL_GROUPS.items():
        results = [r for path, _p, _pr, r in processed if path.endswith(f"en/{page}.json")]
        promised = {m.id for g in groups for m in builtin.by_group(g) if m.kind != "counter"}
        drawn = _drawn(results)
        missing = sorted(m for m in promised if "smoothed" not in drawn.get(m, set()))
        assert not missing, f"{page}: not drawn for every run: {missing}"


def test_the_compare_page_draws_every_core_metric_for_every_run(
    processed: Processed, builtin: registry.Registry
) -> None:
    """The compare page's promise: the registry's core metrics, smoothed, for every selected
    run (a chart reduced to its first query loses the others)."""
    for lang in ("en", "zh"):
        results = [r for path, _p, _pr, r in processed if path.endswith(f"{lang}/compare.json")]
        promised = {m.id for m in builtin.core_metrics() if m.kind != "counter"}
        drawn = _drawn(results)
        missing = sorted(m for m in promised if "smoothed" not in drawn.get(m, set()))
        assert not missing, f"{lang} compare: not drawn for every run: {missing}"


def test_event_marks_sit_at_the_top_of_a_hidden_axis(processed: Processed) -> None:
    """A mark is drawn at 1 on a hidden axis pinned to [0, 1]: at the top of the chart, never
    on the metric's axis (where 1 would be a value) nor at the bottom."""
    checked = 0
    for _path, _panel, _promised, result in processed:
        for f in _run_fields(result):
            if f["name"] != EVENT_MARKS:
                continue
            assert f["axisPlacement"] == "hidden", (result["key"], f["axisPlacement"])
            assert (f["min"], f["max"]) == (0, 1), (result["key"], f["min"], f["max"])
            assert f["valueMax"] == 1, (result["key"], f["valueMax"])
            checked += 1
    assert checked


def test_every_line_joins_across_the_steps_its_run_did_not_log(processed: Processed) -> None:
    """After the outer join on step a run logging every third step has a gap at every other
    run's steps: drawn with `spanNulls` off, its line would be isolated dots."""
    for _path, _panel, _promised, result in processed:
        for f in _run_fields(result):
            if f["name"] != EVENT_MARKS:
                assert f["spanNulls"] is True, (result["key"], f["name"], f["spanNulls"])
