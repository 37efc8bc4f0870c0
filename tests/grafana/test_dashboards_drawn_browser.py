"""Issue 37, the rendering harness: every trend chart of the committed English dashboards DRAWN
by Grafana's published panel code, and the tests read what was drawn.

The frames are the data-path test's (`test_dashboards_data_path.panel_inputs`): three runs logged
through the real exporter into a real InfluxDB, each chart's queries run there and answered by the
rlvitals API for the runs' colours, turned into frames as Grafana's InfluxQL backend does. The
harness (tests/grafana/node/render/harness.jsx, bundled by esbuild) runs each chart's
transformations and field config through @grafana/data 13.2.0 and draws it with @grafana/ui
13.2.0's `TimeSeries` (uPlot, its config from @grafana/ui's `preparePlotConfigBuilder` and
`UPlotConfigBuilder`), its legend and its tooltip, in headless Chromium. The trend panel itself,
its field preparation and its tooltip body are Grafana app code, ported there file by file
(docs/grafana.md, "What the rendering harness draws").

Each check below returns what it found wrong, so `test_each_listed_mutation_fails_a_drawn_check`
can run them all on each mutation of test_dashboard_mutations.py that changes what is drawn.
Every chart is saved as a PNG under test-artifacts/grafana-drawn/.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_mutations as mutations
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
MIN_LINE_PIXELS = 100
"""Opaque pixels of a run's colour a chart must hold, the run's series drawn alone, for its lines
to count as drawn (measured: 339 to thousands on the demo data; a run with no line: 0)."""
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


REPO = Path(__file__).resolve().parents[2]


def _english(builtin: registry.Registry) -> dict[str, dict[str, Any]]:
    """The English dashboards as committed (what `rlvitals build` wrote, what Grafana loads): a
    hand edit of a file is drawn too. They must be what the registry builds now."""
    files = {
        str(f.relative_to(REPO)): json.loads(f.read_text(encoding="utf-8"))
        for f in sorted((REPO / "grafana" / "dashboards" / "en").glob("*.json"))
    }
    assert set(files) == {p for p in built(builtin) if "/en/" in p}, "run `rlvitals build`"
    return files


def draw(
    browser: Any,
    harness: Path,
    dashboards: dict[str, dict[str, Any]],
    db: InfluxDatabase,
    api: Any,
    shots: Path | None = None,
) -> Drawn:
    """Every trend chart of `dashboards` drawn on a fresh page (left open for hovering); with
    `shots`, a PNG of each chart saved there (`chart["shot"]`)."""
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
    for chart, (path, panel) in zip(charts, panels, strict=True):
        chart["panel"] = panel
        chart["dashboard"] = Path(path).stem
        chart["lang"] = Path(path).parent.name
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        sections = page.locator("section.rlvitals-chart")
        assert sections.count() == len(charts)
        for i, chart in enumerate(charts):
            slug = re.sub(r"[^a-z0-9]+", "-", chart["panel"]["title"].lower()).strip("-")[:60]
            chart["shot"] = str(shots / f"{chart['dashboard']}-{i:02d}-{slug}.png")
            sections.nth(i).screenshot(path=chart["shot"])
    # one viewport holds every chart: the page never scrolls (uPlot keeps where its overlay was
    # when the page scrolls under a hover, and the cursor then misses the chart)
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": WIDTH + 60, "height": height})
    page.evaluate("rlvitalsCharts.forEach((u) => u.syncRect())")
    return Drawn(page, charts, pi.store_colours)


@pytest.fixture(scope="module")
def drawn(
    browser: Any,
    harness_js: Path,
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
) -> Iterator[Drawn]:
    result = draw(browser, harness_js, _english(builtin), loaded, runs_api, SHOTS)
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
    return [s for s in chart.get("series", []) if s["labels"].get("run") is not None]


def _first_metric(panel: dict[str, Any]) -> str:
    """The metric the chart's first query reads: its own axis is the chart's left one."""
    match = re.search(r'AS "([^" ]+) (raw|smoothed)"', panel["targets"][0]["query"])
    assert match, panel["targets"][0]["query"][:200]
    return match.group(1)


# --- the checks: each returns what it found wrong ---------------------------------------------------


def colour_problems(d: Drawn) -> list[str]:
    """Each run's lines are stroked in the colour the store gave it (raw lines grey), and the
    canvas holds that colour when the run's lines are drawn alone."""
    problems = []
    for chart in d.charts:
        wanted: dict[str, str] = {}
        for s in _run_series(chart):
            kind = _kind(s)
            if kind == "member" or not s["nonNull"]:
                continue
            run = s["labels"]["run"]
            if run not in d.store_colours:
                problems.append(f"{chart['key']}: {s['name']} of {run}, a run not selected")
                continue
            colour = RAW_COLOUR if kind == "raw" else d.store_colours[run]
            if (s["stroke"] or "").lower() != colour.lower():
                problems.append(
                    f"{chart['key']}: {s['name']} of {s['labels']['run']} stroked "
                    f"{s['stroke']}, not {colour}"
                )
            if kind == "smoothed":
                wanted[run] = colour
        counts = d.page.evaluate(
            "([i, c]) => rlvitalsCountRunColours(i, c)", [chart["index"], wanted]
        )
        problems += [
            f"{chart['key']}: {run} drawn alone, {n} pixels of {wanted[run]} "
            f"(want >= {MIN_LINE_PIXELS})"
            for run, n in counts.items()
            if n < MIN_LINE_PIXELS
        ]
    return problems


def drawn_problems(d: Drawn) -> list[str]:
    """Every chart drawn (no panel warning such as "Only one frame is supported"), with lines
    for every selected run and none for another, each line joined across the steps its run did
    not log (uPlot's `spanGaps`: a run logging every third step is otherwise isolated dots)."""
    problems = []
    for chart in d.charts:
        if "error" in chart or "warning" in chart:
            problems.append(f"{chart['key']}: {chart.get('error') or chart.get('warning')}")
            continue
        runs = {s["labels"]["run"] for s in _run_series(chart) if s["nonNull"] and s["show"]}
        if runs != set(RUNS):
            problems.append(f"{chart['key']}: lines drawn for {sorted(runs)}")
        problems += [
            f"{chart['key']}: {s['name']} of {s['labels']['run']} not joined across gaps"
            for s in _run_series(chart)
            if _kind(s) != EVENT_MARKS and s["spanGaps"] is not True
        ]
    return problems


@functools.cache
def _builtin() -> registry.Registry:
    return registry.load()


def _title(metric: str, chart: dict[str, Any]) -> str:
    """A metric's title as the registry gives it in the chart's dashboard's language."""
    return _builtin().metric(metric).title.get(chart["lang"])


def _metrics_of(chart: dict[str, Any]) -> list[str]:
    """The metrics a chart draws a smoothed line of, from its series' columns (`<id> smoothed`)."""
    return sorted({s["name"].rpartition(" ")[0] for s in chart["series"] if _kind(s) == "smoothed"})


def legend_problems(d: Drawn) -> list[str]:
    """The legend Grafana's VizLegend draws: one row per run and metric, reading the run and
    the metric's title (issue 37: legends name the metric and the run), in the run's colour (a
    chart of a name family's members has a row per member and run: not checked here)."""
    problems = []
    for chart in d.charts:
        if "legend" not in chart or any(_kind(s) == "member" for s in chart["series"]):
            continue
        rows = chart["legend"]
        wanted = {f"{run} · {_title(m, chart)}": run for run in RUNS for m in _metrics_of(chart)}
        if sorted(r["label"] for r in rows) != sorted(wanted):
            problems.append(f"{chart['key']}: legend rows {[r['label'] for r in rows]}")
            continue
        for r in rows:
            want = d.page.evaluate("c => rlvitalsStored(c)", d.store_colours[wanted[r["label"]]])
            if r["color"] != "rgb({}, {}, {})".format(*want[:3]):
                problems.append(f"{chart['key']}: legend row {r['label']} in {r['color']}")
    return problems


def _tooltips(d: Drawn) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each chart hovered at the events' step, with the tooltip Grafana's TooltipPlugin2 shows."""
    for chart in d.charts:
        if "series" not in chart:
            continue
        point = d.page.evaluate(
            "([i, x]) => rlvitalsHoverPoint(i, x)", [chart["index"], EVENT_STEP]
        )
        d.page.mouse.move(point["x"], point["y"] - 5)  # two moves: uPlot sees the cursor move
        d.page.mouse.move(point["x"], point["y"])
        d.page.wait_for_function(
            "i => rlvitalsTooltipRows(i) !== null", arg=chart["index"], timeout=30_000
        )
        yield chart, d.page.evaluate("i => rlvitalsTooltipRows(i)", chart["index"])


def tooltip_problems(d: Drawn) -> list[str]:
    """Hovered at step 100: the header names the step; every row names one of the runs and
    (outside a name family, whose rows name their member) one of the chart's metrics; no two
    rows read alike; every run has a row (raw lines and event marks are hidden from it)."""
    problems = []
    for chart, tip in _tooltips(d):
        if tip["header"][:1] != ["step"]:
            problems.append(f"{chart['key']}: tooltip header {tip['header']}")
        labels = [r["label"] for r in tip["rows"]]
        if len(labels) != len(set(labels)):
            problems.append(f"{chart['key']}: tooltip rows read alike: {labels}")
        if any(_kind(s) == "member" for s in chart["series"]):
            if not all(any(run in label for run in RUNS) for label in labels):
                problems.append(f"{chart['key']}: tooltip rows {labels}")
            continue
        prefixes = {f"{run} · {_title(m, chart)}": run for run in RUNS for m in _metrics_of(chart)}
        named = {
            label: next((run for p, run in prefixes.items() if label.startswith(p)), None)
            for label in labels
        }
        if None in named.values() or set(named.values()) != set(RUNS):
            problems.append(f"{chart['key']}: tooltip rows {labels}")
    return problems


def threshold_problems(d: Drawn) -> list[str]:
    """At most one threshold area per chart, on the scale of the chart's first metric (its
    smoothed line's scale, with an axis drawn), never the event marks' hidden scale; the scale
    spans the healthy band's edges (a run flat at 0 got the range 0-100, the chart painted in
    the outside colour); and the canvas shows each band's colour in the rows that band covers
    on that scale."""
    problems = []
    for chart in d.charts:
        areas = chart.get("thresholds")
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
        scale = chart["scales"][area["scaleKey"]]
        edges = [s["value"] for s in area["steps"] if s["value"] is not None]
        if not all(scale["min"] <= e <= scale["max"] for e in edges):
            problems.append(
                f"{chart['key']}: band edges {edges} outside the axis [{scale['min']}, "
                f"{scale['max']}]"
            )
        bands = d.page.evaluate(
            "([i, k, s]) => rlvitalsAreaBands(i, k, s)",
            [chart["index"], area["scaleKey"], area["steps"]],
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


def marks_problems(d: Drawn) -> list[str]:
    """Each run's checkpoint at step 100: a dot at 1 on a scale pinned to [0, 1] that has no
    axis drawn, a run's colour on the canvas at that spot; marks of the selected runs only."""
    problems = []
    colours = [d.page.evaluate("c => rlvitalsStored(c)", c) for c in d.store_colours.values()]
    for chart in d.charts:
        marks = [s for s in _run_series(chart) if s["name"] == EVENT_MARKS and s["nonNull"]]
        if not marks:
            continue
        key = chart["key"]
        if sorted(s["labels"]["run"] for s in marks) != sorted(RUNS):
            problems.append(f"{key}: marks of {sorted(s['labels']['run'] for s in marks)}")
        scales = {s["scale"] for s in marks}
        if len(scales) != 1:
            problems.append(f"{key}: marks on {len(scales)} scales")
            continue
        (scale,) = scales
        if not all(s["pointsOnly"] and s["nonNull"] == 1 for s in marks):
            problems.append(f"{key}: marks not single dots: {marks}")
        if (chart["scales"][scale]["min"], chart["scales"][scale]["max"]) != (0, 1):
            problems.append(f"{key}: marks' scale spans {chart['scales'][scale]}")
        if any(a["show"] and a["scale"] == scale for a in chart["axes"]):
            problems.append(f"{key}: an axis is drawn for the marks' scale")
        px = d.page.evaluate(
            "([i, x, s]) => rlvitalsPixelAt(i, x, 1, s)", [chart["index"], EVENT_STEP, scale]
        )
        if not any(all(abs(a - b) <= 6 for a, b in zip(px, c, strict=True)) for c in colours):
            problems.append(f"{key}: at step {EVENT_STEP}, top of the chart, the canvas holds {px}")
    return problems


CHECKS = (
    drawn_problems,
    colour_problems,
    legend_problems,
    tooltip_problems,
    threshold_problems,
    marks_problems,
)
"""What is drawn, each check returning what it found wrong: the tests below and the mutations."""


def _fail_on(problems: list[str]) -> None:
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:5])


def test_every_trend_chart_is_drawn_by_grafanas_time_series(
    drawn: Drawn, builtin: registry.Registry
) -> None:
    """Every trend panel of every English dashboard gets a uPlot chart with joined lines for
    every run; a PNG of each is kept."""
    trend = [p for d in _english(builtin).values() for p in d["panels"] if p["type"] == "trend"]
    assert len(drawn.charts) == len(trend) > 40
    _fail_on(drawn_problems(drawn))
    for chart in drawn.charts:
        assert Path(chart["shot"]).stat().st_size > 10_000, chart["shot"]


def test_each_runs_lines_are_drawn_in_the_colour_the_store_gave_it(drawn: Drawn) -> None:
    assert set(drawn.store_colours) == set(RUNS)
    assert len(set(drawn.store_colours.values())) == len(RUNS)
    _fail_on(colour_problems(drawn))


def test_each_legend_row_names_its_run_and_metric_in_the_runs_colour(drawn: Drawn) -> None:
    assert sum(not any(_kind(s) == "member" for s in c["series"]) for c in drawn.charts) > 30
    _fail_on(legend_problems(drawn))


def test_each_tooltip_row_names_its_run_and_metric_and_none_read_alike(drawn: Drawn) -> None:
    _fail_on(tooltip_problems(drawn))


def test_threshold_areas_are_painted_on_their_metrics_own_axis(drawn: Drawn) -> None:
    assert sum(bool(c["thresholds"]) for c in drawn.charts) > 5
    _fail_on(threshold_problems(drawn))


def test_event_marks_are_dots_at_the_top_of_a_hidden_axis_at_the_events_step(
    drawn: Drawn,
) -> None:
    assert sum(any(s["name"] == EVENT_MARKS for s in c["series"]) for c in drawn.charts) >= 8
    _fail_on(marks_problems(drawn))


def test_the_step_axis_and_the_tooltip_read_plain_steps(drawn: Drawn) -> None:
    for chart in drawn.charts:
        (x_axis,) = [a for a in chart["axes"] if a["scale"] == "x"]
        assert x_axis["label"] in (None, "", "step"), (chart["key"], x_axis["label"])
    for chart, tip in _tooltips(drawn):
        assert tip["header"] == ["step", str(EVENT_STEP)], (chart["key"], tip["header"])


def band_out_of_view(dashboards: dict[str, Any]) -> None:
    """The charts' soft axis range (the healthy band's edges) dropped: the axis follows the
    data alone, and a flat run's axis becomes 0-100."""
    for panel in mutations._charts(dashboards):
        custom = panel["fieldConfig"]["defaults"].get("custom", {})
        custom.pop("axisSoftMin", None)
        custom.pop("axisSoftMax", None)


DRAWN_MUTATIONS = (
    mutations.marks_at_the_bottom,
    mutations.marks_on_a_visible_axis,
    mutations.marks_for_unselected_runs,
    mutations.span_nulls_off,
    mutations.marks_inherit_the_healthy_band,
    mutations.colours_back_to_palette_classic_by_name,
    mutations.colour_override_removed,
    band_out_of_view,
)
"""The mutations of test_dashboard_mutations.py that change what a chart draws (the others drop
queries or charts, which the data-path checks count), and one only a drawn chart shows (the
axis' range), run on the overview."""


@pytest.fixture(scope="module")
def mutated(
    browser: Any,
    harness_js: Path,
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
) -> Iterator[dict[str, Drawn]]:
    """mutation name -> the overview so mutated, drawn: all on one page, for time."""
    overview = _english(builtin)["grafana/dashboards/en/overview.json"]
    dashboards = {}
    for mutation in DRAWN_MUTATIONS:
        copies = {"grafana/dashboards/en/overview.json": copy.deepcopy(overview)}
        mutation(copies)
        assert copies["grafana/dashboards/en/overview.json"] != overview, (
            f"{mutation.__name__} changed nothing on the overview: the mutation is stale"
        )
        path = f"grafana/dashboards/en/overview-{mutation.__name__}.json"
        dashboards[path] = copies["grafana/dashboards/en/overview.json"]
    everything = draw(browser, harness_js, dashboards, loaded, runs_api)
    yield {
        m.__name__: Drawn(
            everything.page,
            [c for c in everything.charts if c["dashboard"] == f"overview-{m.__name__}"],
            everything.store_colours,
        )
        for m in DRAWN_MUTATIONS
    }
    everything.page.close()


@pytest.mark.parametrize("mutation", DRAWN_MUTATIONS, ids=[m.__name__ for m in DRAWN_MUTATIONS])
def test_each_listed_mutation_fails_a_drawn_check(mutation: Any, mutated: dict[str, Drawn]) -> None:
    drawn = mutated[mutation.__name__]
    assert len(drawn.charts) >= 7
    failed = [check.__name__ for check in CHECKS if check(drawn)]
    assert failed, f"{mutation.__name__}: every drawn check still passes"
