"""Issue 37, the rendering harness: every trend chart of the generated English dashboards DRAWN by
Grafana's published panel code, and the tests read what was drawn.

The frames are the data-path test's (`test_dashboards_data_path.panel_inputs`): three runs logged
through the real exporter into a real InfluxDB, each chart's queries run there and answered by the
rlvitals API for the runs' colours, turned into frames as Grafana's InfluxQL backend does. The
harness (tests/grafana/node/render/harness.jsx, bundled by esbuild) runs each chart's
transformations and field config through @grafana/data 13.2.0 and draws it with @grafana/ui
13.2.0's `TimeSeries` (uPlot, its config from @grafana/ui's `preparePlotConfigBuilder` and
`UPlotConfigBuilder`), its legend and its tooltip, in headless Chromium. The trend panel itself,
its field preparation and its tooltip body are Grafana app code, ported there file by file
(docs/grafana.md, "What the rendering harness draws").

Each check below returns what it found wrong, so `test_a_removed_run_colour_override_fails_the_
colour_check` can run it on a mutated dashboard and see it fail. Every chart is saved as a PNG
under test-artifacts/grafana-drawn/.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chromium import ARTIFACTS
from grafana_render import build_harness
from influx_server import InfluxDatabase
from test_dashboards_data_path import (  # noqa: F401 (fixtures)
    RUNS,
    built,
    datapath_store,
    loaded,
    panel_inputs,
    runs_api,
)

import registry
from grafana.dashboards_gen.panels import RAW_COLOUR
from grafana.dashboards_gen.queries import EVENT_MARKS

SHOTS = ARTIFACTS / "grafana-drawn"
WIDTH, HEIGHT = 900, 320
"""A chart's size in CSS pixels: about a half-width panel of 8 grid rows on a laptop."""
EVENT_STEP = 100
"""bundle_data.log_runs logs a checkpoint at step 100 for every run."""
MIN_LINE_PIXELS = 20
"""Opaque pixels of a run's colour a chart must hold for the run's lines to count as drawn."""
MIN_AREA_SHARE = 0.10
"""Share of a threshold band's pixels showing the band's colour between the lines drawn on it."""
ORIGIN = "http://harness.invalid"
"""The test page's address: served by the test itself (route), never resolved."""


@dataclass(frozen=True)
class Drawn:
    """The charts as the harness drew them on one page."""

    page: Any
    charts: list[dict[str, Any]]
    """per chart: the harness's description (`describe` in harness.jsx) plus `panel`"""
    store_colours: dict[str, str]
    """run -> the colour the store gave it (`/api/runs`)"""


@pytest.fixture(scope="module")
def harness_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory.mktemp("harness"))


def _english(builtin: registry.Registry) -> dict[str, dict[str, Any]]:
    return {p: d for p, d in built(builtin).items() if "/en/" in p}


def draw(
    browser: Any,
    harness: Path,
    dashboards: dict[str, dict[str, Any]],
    db: InfluxDatabase,
    api: Any,
) -> Drawn:
    """Every trend chart of `dashboards` drawn on a fresh page (left open for hovering)."""
    pi = panel_inputs(dashboards, db, api)
    inputs = [
        {**inp, "title": panel["title"], "width": WIDTH, "height": HEIGHT}
        for (_path, panel, _d), inp in zip(pi.panels, pi.inputs, strict=True)
        if panel["type"] == "trend"
    ]
    panels = [(path, panel) for path, panel, _d in pi.panels if panel["type"] == "trend"]
    page = browser.new_page(viewport={"width": WIDTH + 60, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    script = harness.read_bytes()
    html = (
        '<!doctype html><html><head><meta charset="utf-8">'
        '<script src="/harness.js"></script></head><body></body></html>'
    )

    def serve(route: Any) -> None:
        if route.request.url.endswith("/harness.js"):
            route.fulfill(body=script, content_type="text/javascript")
        elif route.request.url.rstrip("/") == ORIGIN:
            route.fulfill(body=html, content_type="text/html")
        else:
            errors.append(f"request outside the harness: {route.request.url}")
            route.abort()

    page.route("**/*", serve)
    page.goto(ORIGIN + "/")
    charts = page.evaluate("([p, t]) => rlvitalsDraw(p, t)", [inputs, "dark"])
    assert errors == [], errors
    # one viewport holds every chart: the page never scrolls (uPlot keeps where its overlay was
    # when the page scrolls under a hover, and the cursor then misses the chart)
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": WIDTH + 60, "height": height})
    page.evaluate("rlvitalsCharts.forEach((u) => u.syncRect())")
    for chart, (path, panel) in zip(charts, panels, strict=True):
        chart["panel"] = panel
        chart["dashboard"] = Path(path).stem
    return Drawn(page, charts, pi.store_colours)


@pytest.fixture(scope="module")
def drawn(
    browser: Any,
    harness_js: Path,
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
) -> Iterator[Drawn]:
    result = draw(browser, harness_js, _english(builtin), loaded, runs_api)
    yield result
    result.page.close()


# --- what a series is -----------------------------------------------------------------------------


def _kind(series: dict[str, Any]) -> str:
    """`raw`, `smoothed`, `slope`, `max`, `event_marks`, or `member` (a name family's line)."""
    name = series["name"]
    if "/" in name:
        return "member"
    if name == EVENT_MARKS:
        return EVENT_MARKS
    return name.rpartition(" ")[2]


def _run_series(chart: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in chart["series"] if s["labels"].get("run") is not None]


def _first_metric(panel: dict[str, Any]) -> str:
    """The metric the chart's first query reads: its own axis is the chart's left one."""
    match = re.search(r'AS "([^" ]+) (raw|smoothed)"', panel["targets"][0]["query"])
    assert match, panel["targets"][0]["query"][:200]
    return match.group(1)


# --- the checks: each returns what it found wrong ---------------------------------------------------


def colour_problems(d: Drawn) -> list[str]:
    """Each run's lines are stroked in the colour the store gave it (raw lines grey), and the
    canvas holds that colour where the run's lines were drawn."""
    problems = []
    for i, chart in enumerate(d.charts):
        wanted: set[str] = set()
        for s in _run_series(chart):
            kind = _kind(s)
            if kind == "member" or not s["nonNull"]:
                continue
            colour = RAW_COLOUR if kind == "raw" else d.store_colours[s["labels"]["run"]]
            if (s["stroke"] or "").lower() != colour.lower():
                problems.append(
                    f"{chart['key']}: {s['name']} of {s['labels']['run']} stroked "
                    f"{s['stroke']}, not {colour}"
                )
            if kind == "smoothed":
                wanted.add(colour)
        counts = d.page.evaluate("([i, c]) => rlvitalsCountColours(i, c)", [i, sorted(wanted)])
        problems += [
            f"{chart['key']}: {n} pixels of {c} drawn (want >= {MIN_LINE_PIXELS})"
            for c, n in counts.items()
            if n < MIN_LINE_PIXELS
        ]
    return problems


def test_every_trend_chart_is_drawn_by_grafanas_time_series(
    drawn: Drawn, builtin: registry.Registry
) -> None:
    """Every trend panel of every English dashboard gets a uPlot chart (no panel warning such as
    "Only one frame is supported"), with lines for every run; a PNG of each is kept."""
    trend = [p for d in _english(builtin).values() for p in d["panels"] if p["type"] == "trend"]
    assert len(drawn.charts) == len(trend) > 40
    SHOTS.mkdir(parents=True, exist_ok=True)
    sections = drawn.page.locator("section.rlvitals-chart")
    assert sections.count() == len(drawn.charts)
    for i, chart in enumerate(drawn.charts):
        assert "error" not in chart and "warning" not in chart, chart
        runs = {s["labels"]["run"] for s in _run_series(chart) if s["nonNull"] and s["show"]}
        assert runs == set(RUNS), (chart["key"], runs)
        slug = re.sub(r"[^a-z0-9]+", "-", chart["panel"]["title"].lower()).strip("-")[:60]
        path = SHOTS / f"{chart['dashboard']}-{i:02d}-{slug}.png"
        sections.nth(i).screenshot(path=str(path))
        assert path.stat().st_size > 10_000, path


def test_each_runs_lines_are_drawn_in_the_colour_the_store_gave_it(drawn: Drawn) -> None:
    assert set(drawn.store_colours) == set(RUNS)
    assert len(set(drawn.store_colours.values())) == len(RUNS)
    problems = colour_problems(drawn)
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:5])


def test_each_legend_row_names_a_run_in_its_colour(drawn: Drawn) -> None:
    """The legend Grafana's VizLegend draws: one row per run, named after it, in its colour
    (a chart of a name family's members has a row per member and run: not checked here)."""
    checked = 0
    for chart in drawn.charts:
        if any(_kind(s) == "member" for s in chart["series"]):
            continue
        rows = chart["legend"]
        assert sorted(r["label"] for r in rows) == sorted(RUNS), (chart["key"], rows)
        for r in rows:
            want = drawn.page.evaluate("c => rlvitalsStored(c)", drawn.store_colours[r["label"]])
            assert r["color"] == "rgb({}, {}, {})".format(*want[:3]), (chart["key"], r)
        checked += 1
    assert checked > 30


def _tooltips(d: Drawn) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each chart hovered at the events' step, with the tooltip Grafana's TooltipPlugin2 shows."""
    for i, chart in enumerate(d.charts):
        point = d.page.evaluate("([i, x]) => rlvitalsHoverPoint(i, x)", [i, EVENT_STEP])
        d.page.mouse.move(point["x"], point["y"] - 5)  # two moves: uPlot sees the cursor move
        d.page.mouse.move(point["x"], point["y"])
        d.page.wait_for_function("i => rlvitalsTooltipRows(i) !== null", arg=i, timeout=30_000)
        yield chart, d.page.evaluate("i => rlvitalsTooltipRows(i)", i)


def test_each_tooltip_names_the_step_and_the_run_of_every_row(drawn: Drawn) -> None:
    """Hovered at step 100: the header names the step, every row names one of the runs, and
    every run has a row (raw lines and event marks are hidden from the tooltip)."""
    for chart, tip in _tooltips(drawn):
        assert tip["header"][0] == "step", (chart["key"], tip["header"])
        labels = [r["label"] for r in tip["rows"]]
        if any(_kind(s) == "member" for s in chart["series"]):
            assert all(any(run in label for run in RUNS) for label in labels), labels
            continue
        assert set(labels) == set(RUNS), (chart["key"], labels)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="issue 37, item 2: every row of a chart of two metrics (or with slope lines) reads "
    "only the run's name; rows are told apart by a dash pattern",
)
def test_each_tooltip_row_names_its_metric_and_run(drawn: Drawn) -> None:
    """No two rows of a tooltip read the same: each names its metric (or line) and its run."""
    for chart, tip in _tooltips(drawn):
        labels = [r["label"] for r in tip["rows"]]
        assert len(labels) == len(set(labels)), (chart["key"], labels)


def threshold_problems(d: Drawn) -> list[str]:
    """At most one threshold area per chart, on the scale of the chart's first metric (its
    smoothed line's scale, with an axis drawn), never the event marks' hidden scale; and the
    canvas shows each band's colour in the rows that band covers on that scale."""
    problems = []
    for i, chart in enumerate(d.charts):
        areas = chart["thresholds"]
        if not areas:
            continue
        if len(areas) > 1:
            problems.append(f"{chart['key']}: {len(areas)} threshold areas")
        area = areas[0]
        metric = _first_metric(chart["panel"])
        own = {s["scale"] for s in chart["series"] if s["name"] == f"{metric} smoothed"}
        marks = {s["scale"] for s in chart["series"] if s["name"] == EVENT_MARKS}
        if own != {area["scaleKey"]} or area["scaleKey"] in marks:
            problems.append(f"{chart['key']}: area on {area['scaleKey']}, {metric} on {own}")
            continue
        if not any(a["show"] and a["scale"] == area["scaleKey"] for a in chart["axes"]):
            problems.append(f"{chart['key']}: no axis drawn for the area's scale")
        bands = d.page.evaluate(
            "([i, k, s]) => rlvitalsAreaBands(i, k, s)", [i, area["scaleKey"], area["steps"]]
        )
        shown = [b for b in bands if b["rows"] >= 4]
        if not shown:
            problems.append(f"{chart['key']}: no band of the area is in view: {bands}")
        problems += [
            f"{chart['key']}: band {b['color']} covers {b['rows']} rows, "
            f"{b['share']:.0%} of its pixels in its colour"
            for b in shown
            if b["share"] < MIN_AREA_SHARE
        ]
    return problems


def test_threshold_areas_are_painted_on_their_metrics_own_axis(drawn: Drawn) -> None:
    assert sum(bool(c["thresholds"]) for c in drawn.charts) > 5
    problems = threshold_problems(drawn)
    assert not problems, problems


def test_event_marks_are_dots_at_the_top_of_a_hidden_axis_at_the_events_step(
    drawn: Drawn,
) -> None:
    """Each run's checkpoint at step 100: a dot at 1 on a scale pinned to [0, 1] that has no
    axis drawn, in a run's colour at that spot of the canvas."""
    checked = 0
    for i, chart in enumerate(drawn.charts):
        marks = [s for s in _run_series(chart) if s["name"] == EVENT_MARKS]
        if not marks:
            continue
        assert sorted(s["labels"]["run"] for s in marks) == sorted(RUNS), chart["key"]
        (scale,) = {s["scale"] for s in marks}
        assert all(s["pointsOnly"] and s["nonNull"] == 1 for s in marks), marks
        assert (chart["scales"][scale]["min"], chart["scales"][scale]["max"]) == (0, 1)
        assert not any(a["show"] and a["scale"] == scale for a in chart["axes"]), chart["axes"]
        px = drawn.page.evaluate(
            "([i, x, s]) => rlvitalsPixelAt(i, x, 1, s)", [i, EVENT_STEP, scale]
        )
        colours = [
            drawn.page.evaluate("c => rlvitalsStored(c)", c) for c in drawn.store_colours.values()
        ]
        assert any(all(abs(a - b) <= 6 for a, b in zip(px, c, strict=True)) for c in colours), (
            chart["key"],
            px,
        )
        checked += 1
    assert checked >= 8  # the overview's charts at least


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="the step field takes the chart's fieldConfig.defaults: the step axis is labelled "
    "with the metric's axis label, its ticks carry the metric's unit ('20 nats'), and the "
    "tooltip reads step 100 of a chart in seconds as '1.67 mins'",
)
def test_the_step_axis_and_the_tooltip_read_plain_steps(drawn: Drawn) -> None:
    for chart in drawn.charts:
        (x_axis,) = [a for a in chart["axes"] if a["scale"] == "x"]
        assert x_axis["label"] in (None, "", "step"), (chart["key"], x_axis["label"])
    for chart, tip in _tooltips(drawn):
        assert tip["header"] == ["step", str(EVENT_STEP)], (chart["key"], tip["header"])


def test_a_removed_run_colour_override_fails_the_colour_check(
    browser: Any,
    harness_js: Path,
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
    drawn: Drawn,
) -> None:
    """The mutation: the overview's first chart without the override that colours the first
    run; Grafana then colours that run by its name's hash, which the check must see."""
    overview = copy.deepcopy(_english(builtin)["grafana/dashboards/en/overview.json"])
    first = next(p for p in overview["panels"] if p["type"] == "trend")
    colour = drawn.store_colours[RUNS[0]]
    overrides = first["fieldConfig"]["overrides"]
    kept = [o for o in overrides if f'color=\\"{colour}\\"' not in json.dumps(o["matcher"])]
    assert len(kept) == len(overrides) - 1, "no override colours the first run"
    first["fieldConfig"]["overrides"] = kept
    first["title"] += " (mutated)"
    mutated = draw(
        browser,
        harness_js,
        {"grafana/dashboards/en/overview.json": overview},
        loaded,
        runs_api,
    )
    try:
        problems = colour_problems(mutated)
    finally:
        mutated.page.close()
    assert any(RUNS[0] in p and "(mutated)" in p for p in problems), problems
