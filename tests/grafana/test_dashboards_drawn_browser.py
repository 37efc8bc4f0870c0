"""Issue 37, the rendering harness: every trend chart of the committed dashboards DRAWN by
Grafana's published panel code, and the tests read what was drawn.

Each test runs on every combination of `CASES` (dashboard language, Grafana theme, data), each
drawn once per module, all its charts on one page: the English and the Chinese dashboards on the
demo data in the dark theme, the English ones in the light theme, and the English ones on three
runs real trainers produced (`IMPORTED`, kept in tests/fixtures/runs/) imported by the
`rlvitals import` command into the same real InfluxDB.

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
Every chart is saved as a PNG under test-artifacts/grafana-drawn/<case>/.

On the imported runs a chart shows the runs that log one of its metrics (read from InfluxDB per
run, not from the chart's queries): a chart none of them logs is allowed to be empty, and is
counted. The imported logs record no events, so no chart may mark any.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import test_dashboard_mutations as mutations
from chromium import ARTIFACTS
from grafana_render import build_harness
from influx_server import InfluxDatabase, InfluxServer
from test_dashboards_data_path import (  # noqa: F401 (fixtures)
    RUNS,
    built,
    datapath_store,
    loaded,
    panel_inputs,
    runs_api,
)

import registry
from exporter import Outbox
from grafana.dashboards_gen.panels import RAW_COLOUR
from grafana.dashboards_gen.queries import EVENT_MARKS, step_measurement
from grafana.datasource import DatasourceConfig, create_app
from rlvitals.demo import SCENARIOS

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
REPO = Path(__file__).resolve().parents[2]
IMPORTED = {
    "sb3_ppo_cartpole_healthy": "Stable-Baselines3 PPO on CartPole-v1, 40,960 steps",
    "cleanrl_ppo_healthy": "CleanRL-style PPO on CartPole-v1, 40,960 steps",
    "grpo_mu1_healthy": "TRL GRPOTrainer on a tiny model, 200 steps",
}
"""Three runs of three trainer families, trained on this machine (commands and versions in
tests/fixtures/runs/manifest.json), TensorBoard event files as the trainers wrote them."""
IMPORTED_DIR = REPO / "tests" / "fixtures" / "runs"
DEMO_RUNS = tuple(f"demo-{s.name}" for s in SCENARIOS)
"""`rlvitals demo`'s eight runs, by their names (docs/demo.md)."""
DEMO_STEPS = 400


@dataclass(frozen=True)
class Case:
    """One combination drawn: the dashboards of a language, in a theme, on a data set."""

    lang: str
    theme: str
    data: str
    """`demo` (bundle_data's runs, logged by the exporter), `rlvitals-demo` (the eight runs of
    `rlvitals demo`, as a user's first command makes them) or `imported` (`IMPORTED`)"""

    @property
    def id(self) -> str:
        return f"{self.lang}-{self.theme}-{self.data}"


CASES = (
    Case("en", "dark", "demo"),
    Case("zh", "dark", "demo"),
    Case("en", "light", "demo"),
    Case("en", "dark", "imported"),
    Case("zh", "dark", "imported"),
    Case("en", "dark", "rlvitals-demo"),
)


@dataclass(frozen=True)
class Drawn:
    """The charts as the harness drew them on one page."""

    page: Any
    charts: list[dict[str, Any]]
    """per chart: the harness's description (`describe` in harness.jsx) plus `panel`, and `runs`,
    the runs whose lines it must draw"""
    store_colours: dict[str, str]
    """run -> the colour the store gave it (`/api/runs`)"""
    events: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: {run: (EVENT_STEP,) for run in RUNS}
    )
    """run -> the steps of its events (bundle_data's: `EVENT_STEP`; no imported run has one)"""
    case: Case = field(default=CASES[0])

    @property
    def selected(self) -> tuple[str, ...]:
        """The runs chosen in the dashboards' run picker."""
        return {"demo": RUNS, "imported": tuple(IMPORTED), "rlvitals-demo": DEMO_RUNS}[
            self.case.data
        ]


@pytest.fixture(scope="module")
def harness_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory.mktemp("harness"))


def _committed(builtin: registry.Registry, lang: str = "en") -> dict[str, dict[str, Any]]:
    """The dashboards of `lang` as committed (what `rlvitals build` wrote, what Grafana loads): a
    hand edit of a file is drawn too. They must be what the registry builds now."""
    files = {
        str(f.relative_to(REPO)): json.loads(f.read_text(encoding="utf-8"))
        for f in sorted((REPO / "grafana" / "dashboards" / lang).glob("*.json"))
    }
    assert set(files) == {p for p in built(builtin) if f"/{lang}/" in p}, "run `rlvitals build`"
    return files


def _english(builtin: registry.Registry) -> dict[str, dict[str, Any]]:
    return _committed(builtin, "en")


def draw(
    browser: Any,
    harness: Path,
    dashboards: dict[str, dict[str, Any]],
    db: InfluxDatabase,
    api: Any,
    shots: Path | None = None,
    theme: str = "dark",
    runs: tuple[str, ...] = RUNS,
) -> Drawn:
    """Every trend chart of `dashboards` drawn on a fresh page (left open for hovering), `runs`
    selected, in Grafana's `theme`; with `shots`, a PNG of each chart saved there
    (`chart["shot"]`)."""
    pi = panel_inputs(dashboards, db, api, runs)
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
    charts = page.evaluate("([p, t]) => rlvitalsDraw(p, t)", [inputs, theme])
    assert errors == [], errors
    for chart, (path, panel) in zip(charts, panels, strict=True):
        chart["panel"] = panel
        chart["dashboard"] = Path(path).stem
        chart["lang"] = Path(path).parent.name
        chart["runs"] = set(runs)
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


@dataclass(frozen=True)
class Imported:
    """`IMPORTED` as `rlvitals import` stored them in the test's InfluxDB and store."""

    db: InfluxDatabase
    api: Any
    """the rlvitals datasource on the import's store (the runs' colours)"""
    logged: dict[str, set[str]]
    """run -> the registry metrics it has points of in InfluxDB (a name family by its id)"""
    events: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """run -> the steps of its events, as the store recorded them"""


def _logged_metrics(db: InfluxDatabase, builtin: registry.Registry) -> dict[str, set[str]]:
    """What InfluxDB holds per run: a field counts under the metric whose id it is, or whose
    name family it is a member of, when it is in that metric's group's measurement."""
    out: dict[str, set[str]] = {}
    for group in sorted({m.group for m in builtin.metrics}):
        ids = {m.id: m for m in builtin.metrics if m.group == group}
        body = db.raw_query(f'SELECT count(*) FROM "{group}" GROUP BY "run"')
        for series in body["results"][0].get("series", []):
            run = series["tags"]["run"]
            for column, n in zip(series["columns"], series["values"][0], strict=True):
                name = column.removeprefix("count_")
                head = name.split("/")[0]
                if n and (name in ids or (head in ids and ids[head].pattern is not None)):
                    out.setdefault(run, set()).add(head)
    return out


@pytest.fixture(scope="module")
def imported(
    influxd: InfluxServer, tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry
) -> Imported:
    """`IMPORTED` read by `rlvitals import` (the CLI, in its own process, configured by the
    environment as docs/exporter.md says) into a fresh InfluxDB database and store."""
    store = tmp_path_factory.mktemp("imported-store")
    db = InfluxDatabase(influxd, "imported")
    influxd.post_query('CREATE DATABASE "imported"')
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env |= {
        "RLVITALS_INFLUX_URL": db.url,
        "RLVITALS_INFLUX_DATABASE": db.name,
        "RLVITALS_STORE": str(store),
    }
    done = subprocess.run(
        [sys.executable, "-m", "rlvitals", "import", *(str(IMPORTED_DIR / r) for r in IMPORTED)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    logged = _logged_metrics(db, builtin)
    assert set(logged) == set(IMPORTED), (logged, done.stderr[-3000:])
    api = create_app(DatasourceConfig(store=store), builtin).test_client()
    return Imported(db, api, logged)


@pytest.fixture(scope="module")
def demo_runs(
    influxd: InfluxServer, tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry
) -> Imported:
    """`rlvitals demo` (the CLI in its own process, `DEMO_STEPS` steps a run) into a fresh
    InfluxDB database and store; waited for until InfluxDB holds each run's last step (the
    forwarder drains after the demo exits)."""
    store = tmp_path_factory.mktemp("demo-store")
    db = InfluxDatabase(influxd, "rlvitals_demo")
    influxd.post_query('CREATE DATABASE "rlvitals_demo"')
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env |= {"RLVITALS_INFLUX_URL": db.url, "RLVITALS_INFLUX_DATABASE": db.name}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvitals",
            "demo",
            *("--no-report", "--store", str(store)),
            *("--steps", str(DEMO_STEPS)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # 1: a failure the demo could not flag inside so short a run (docs/demo.md), not an error
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = f'SELECT last("step") FROM "{step_measurement(builtin)}" GROUP BY "run"'
    deadline = time.monotonic() + 120
    while True:
        series = db.raw_query(last)["results"][0].get("series", [])
        ends = {s["tags"]["run"]: s["values"][0][1] for s in series}
        if ends == {run: DEMO_STEPS - 1 for run in DEMO_RUNS}:
            break
        assert time.monotonic() < deadline, f"InfluxDB holds the demo's runs up to {ends}"
        time.sleep(0.5)
    api = create_app(DatasourceConfig(store=store), builtin).test_client()
    with Outbox(store / "outbox.sqlite") as ob:
        events = {run: tuple(sorted({e.step for e in ob.events(run)})) for run in DEMO_RUNS}
    return Imported(db, api, _logged_metrics(db, builtin), events)


def _metrics_of(panel: dict[str, Any]) -> set[str]:
    """The registry metrics a chart's queries read: their `<id> raw|smoothed` columns and the
    name families they read by a regular expression (`mean(/^<id>.../)`)."""
    out: set[str] = set()
    for target in panel["targets"]:
        query = target.get("query", "")
        out |= set(re.findall(r'AS "([^" ]+) (?:raw|smoothed)"', query))
        out |= set(re.findall(r"mean\(/\^(\w+)\\/", query))
    return out


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def drawn(
    request: pytest.FixtureRequest,
    browser: Any,
    harness_js: Path,
    builtin: registry.Registry,
) -> Iterator[Drawn]:
    """Each case drawn once for the module (pytest orders the tests case by case)."""
    case: Case = request.param
    dashboards = _committed(builtin, case.lang)
    shots = SHOTS / case.id
    if case.data == "demo":
        db = request.getfixturevalue("loaded")
        api = request.getfixturevalue("runs_api")
        result = draw(browser, harness_js, dashboards, db, api, shots, case.theme)
        result = Drawn(
            result.page, result.charts, result.store_colours, {r: (EVENT_STEP,) for r in RUNS}, case
        )
    else:
        imp: Imported = request.getfixturevalue(
            "imported" if case.data == "imported" else "demo_runs"
        )
        runs = tuple(IMPORTED) if case.data == "imported" else DEMO_RUNS
        result = draw(browser, harness_js, dashboards, imp.db, imp.api, shots, case.theme, runs)
        for chart in result.charts:
            metrics = _metrics_of(chart["panel"])
            assert metrics, chart["key"]
            chart["runs"] = {run for run in runs if imp.logged.get(run, set()) & metrics}
        result = Drawn(result.page, result.charts, result.store_colours, imp.events, case)
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


def _least_pixels(span_px: float) -> float:
    """The pixels of its colour a line spanning `span_px` of the plot must leave on the canvas
    (each column of it holds at least one; half, for antialiasing), at most `MIN_LINE_PIXELS`."""
    return min(MIN_LINE_PIXELS, max(1.0, span_px / 2))


def colour_problems(d: Drawn) -> list[str]:
    """Each run's lines are stroked in the colour the store gave it (raw lines grey), and the
    canvas holds that colour when the run's lines are drawn alone."""
    problems = []
    for chart in d.charts:
        wanted: dict[str, str] = {}
        span: dict[str, float] = {}
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
            if kind == "smoothed" and s["nonNull"] >= 2:  # one point draws no line
                wanted[run] = colour
                span[run] = max(span.get(run, 0.0), s["spanPx"])
        if "index" not in chart:
            continue  # not drawn: drawn_problems says whether it may be empty
        counts = d.page.evaluate(
            "([i, c]) => rlvitalsCountRunColours(i, c)", [chart["index"], wanted]
        )
        # a line as long as the plot is wide draws hundreds of pixels of its colour; a run far
        # shorter than the others beside it (200 steps next to 40,960) spans a few
        problems += [
            f"{chart['key']}: {run} drawn alone, {n} pixels of {wanted[run]} "
            f"(want >= {_least_pixels(span[run]):.0f})"
            for run, n in counts.items()
            if n < _least_pixels(span[run])
        ]
    return problems


def drawn_problems(d: Drawn) -> list[str]:
    """Every chart drawn (no panel warning such as "Only one frame is supported"; a chart whose
    metrics no selected run logs may say "No data"), with lines for every selected run that logs
    one of its metrics and none for another, each line joined across the steps its run did not
    log (uPlot's `spanGaps`: a run logging every third step is otherwise isolated dots)."""
    problems = []
    for chart in d.charts:
        if "error" in chart or ("warning" in chart and chart["runs"]):
            problems.append(f"{chart['key']}: {chart.get('error') or chart.get('warning')}")
            continue
        if "warning" in chart:
            continue
        drawn = [s for s in _run_series(chart) if s["nonNull"] and s["show"]]
        runs = {s["labels"]["run"] for s in drawn if _kind(s) != EVENT_MARKS}
        if not runs <= chart["runs"]:
            problems.append(f"{chart['key']}: lines drawn for {sorted(runs)}, not {chart['runs']}")
        if drawn and not chart["runs"]:  # the runs' events alone, where the chart should say why
            problems.append(f"{chart['key']}: {sorted(s['name'] for s in drawn)} drawn, no line")
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


def _drawn_metrics(chart: dict[str, Any]) -> list[str]:
    """The metrics a chart draws a smoothed line of, from its series' columns (`<id> smoothed`)."""
    return sorted({s["name"].rpartition(" ")[0] for s in chart["series"] if _kind(s) == "smoothed"})


def _row_names(chart: dict[str, Any], runs: Iterable[str]) -> dict[str, tuple[str, str]]:
    """What a legend row or the start of a tooltip row reads for each (run, metric) of a chart:
    `<run> · <metric title>` (issue 37: legends and tooltips name the metric and the run)."""
    return {f"{run} · {_title(m, chart)}": (run, m) for run in runs for m in _drawn_metrics(chart)}


def line_problems(d: Drawn) -> list[str]:
    """Every run that logs one of a chart's metrics has a line of it in its colour: a smoothed
    line (or a name family's member line) of at least two points. A run whose chart holds one
    bucket of it (TRL logs `samples_per_second` once, at the end) cannot draw a line: it must
    have a legend row instead, whose calcs read its value."""
    problems = []
    for chart in d.charts:
        series = _run_series(chart)
        lines = {
            s["labels"]["run"]
            for s in series
            if _kind(s) in ("smoothed", "member") and s["nonNull"] >= 2 and s["show"]
        }
        buckets: dict[str, int] = {}
        for s in series:
            if _kind(s) != EVENT_MARKS:
                run = s["labels"]["run"]
                buckets[run] = max(buckets.get(run, 0), s["nonNull"])
        rows = {r["label"].partition(" · ")[0] for r in chart.get("legend", [])}
        for run in sorted(chart["runs"] - lines):
            if buckets.get(run, 0) == 1 and run in rows:
                continue
            problems.append(
                f"{chart['key']}: {run} logs {sorted(_metrics_of(chart['panel']))} but has no line"
                f" ({buckets.get(run)} buckets, legend rows {sorted(rows)})"
            )
    return problems


def legend_problems(d: Drawn) -> list[str]:
    """The legend Grafana's VizLegend draws: rows reading `<run> · <metric title>` (the title
    the registry gives in the dashboard's language), one per run and metric at most, a row for
    every run that logs the chart's metrics and none for a run not selected, each in its run's
    colour (a chart of a name family's members has a row per member and run: not checked)."""
    problems = []
    for chart in d.charts:
        if "legend" not in chart or any(_kind(s) == "member" for s in chart["series"]):
            continue
        rows = chart["legend"]
        names = _row_names(chart, d.selected)
        labels = [r["label"] for r in rows]
        named = {names[label][0] for label in labels if label in names}
        if (
            any(label not in names for label in labels)
            or len(labels) != len(set(labels))
            or not chart["runs"] <= named
        ):
            problems.append(f"{chart['key']}: legend rows {[r['label'] for r in rows]}")
            continue
        for r in rows:
            run = names[r["label"]][0]
            want = d.page.evaluate("c => rlvitalsStored(c)", d.store_colours[run])
            if r["color"] != "rgb({}, {}, {})".format(*want[:3]):
                problems.append(f"{chart['key']}: legend row {r['label']} in {r['color']}")
    return problems


def empty_row_problems(d: Drawn) -> list[str]:
    """No legend row names a run and metric the chart draws no value of (a row with no line)."""
    problems = []
    for chart in d.charts:
        if "legend" not in chart or any(_kind(s) == "member" for s in chart["series"]):
            continue
        names = _row_names(chart, d.selected)
        drawn = {
            (s["labels"]["run"], s["name"].rpartition(" ")[0])
            for s in _run_series(chart)
            if _kind(s) == "smoothed" and s["nonNull"]
        }
        problems += [
            f"{chart['key']}: legend row {r['label']}, which has no line"
            for r in chart["legend"]
            if names.get(r["label"]) not in drawn
        ]
    return problems


_MOST_RUNS_AT = """([i, tip]) => {
  const u = rlvitalsCharts[i];
  let best = { step: null, runs: [] };
  u.data[0].forEach((x, k) => {
    const runs = new Set(u.__rlvitalsRuns.filter((r, j) => tip[j] && u.data[j + 1][k] != null));
    if (x != null && runs.size > best.runs.length) best = { step: x, runs: [...runs] };
  });
  return best;
}"""
"""The step of chart `i` at which the most runs have a value in a series the tooltip shows."""


def _hover_step(d: Drawn, chart: dict[str, Any]) -> int:
    """Where a chart is hovered: the events' step on the demo data, else the step where the
    most of its runs have a point (its `hovered` runs: a tooltip shows the runs with a value
    there)."""
    if d.case.data == "demo":
        chart["hovered"] = chart["runs"]
        return EVENT_STEP
    if "hovered" not in chart:
        tip = [not s["hideFrom"].get("tooltip") and s["show"] for s in chart["series"]]
        best = d.page.evaluate(_MOST_RUNS_AT, [chart["index"], tip])
        chart["hovered"], chart["hover_step"] = set(best["runs"]), best["step"]
    return int(chart["hover_step"])


def _tooltips(d: Drawn) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each chart hovered (`_hover_step`), with the tooltip Grafana's TooltipPlugin2 shows."""
    for chart in d.charts:
        if "series" not in chart or not chart["runs"]:
            continue
        point = d.page.evaluate(
            "([i, x]) => rlvitalsHoverPoint(i, x)", [chart["index"], _hover_step(d, chart)]
        )
        d.page.mouse.move(point["x"], point["y"] - 5)  # two moves: uPlot sees the cursor move
        d.page.mouse.move(point["x"], point["y"])
        d.page.wait_for_function(
            "i => rlvitalsTooltipRows(i) !== null", arg=chart["index"], timeout=30_000
        )
        yield chart, d.page.evaluate("i => rlvitalsTooltipRows(i)", chart["index"])


def tooltip_problems(d: Drawn) -> list[str]:
    """Hovered (at step 100 on the demo data): the header names the step; every row names one
    of the chart's runs and (outside a name family, whose rows name their member) one of its
    metrics; no two rows read alike; every run with a value there has a row (raw lines and
    event marks are hidden from the tooltip)."""
    problems = []
    for chart, tip in _tooltips(d):
        if tip["header"][:1] != ["step"]:
            problems.append(f"{chart['key']}: tooltip header {tip['header']}")
        labels = [r["label"] for r in tip["rows"]]
        if len(labels) != len(set(labels)):
            problems.append(f"{chart['key']}: tooltip rows read alike: {labels}")
        if any(_kind(s) == "member" for s in chart["series"]):
            if not all(any(run in label for run in chart["runs"]) for label in labels):
                problems.append(f"{chart['key']}: tooltip rows {labels}")
            continue
        prefixes = _row_names(chart, d.selected)
        named = {
            label: next((rm[0] for p, rm in prefixes.items() if label.startswith(p)), None)
            for label in labels
        }
        # every run with a value at the step has a row; Grafana's cursor also takes a series'
        # nearest value within a few pixels, so a run with a point beside the step may have one
        rows = set(named.values())
        if None in rows or not chart["hovered"] <= rows <= chart["runs"]:
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
        if not areas or not chart["runs"]:
            continue  # an empty chart has no scale for its area
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
    """Each event of a run (bundle_data's checkpoint at step 100; the demo's warm-up end,
    checkpoints, crash and resume): a dot at 1 on a scale pinned to [0, 1] that has no axis
    drawn, the colour of a run with an event there on the canvas at that spot; marks of the
    selected runs with an event only (none for runs with no event)."""
    problems = []
    stored = {
        run: d.page.evaluate("c => rlvitalsStored(c)", c) for run, c in d.store_colours.items()
    }
    marked = sorted(run for run, steps in d.events.items() if steps)
    for chart in d.charts:
        marks = [s for s in _run_series(chart) if s["name"] == EVENT_MARKS and s["nonNull"]]
        if not marks:
            continue
        key = chart["key"]
        if sorted(s["labels"]["run"] for s in marks) != marked:
            problems.append(f"{key}: marks of {sorted(s['labels']['run'] for s in marks)}")
        scales = {s["scale"] for s in marks}
        if len(scales) != 1:
            problems.append(f"{key}: marks on {len(scales)} scales")
            continue
        (scale,) = scales
        if not all(
            s["pointsOnly"] and s["nonNull"] == len(d.events.get(s["labels"]["run"], ()))
            for s in marks
        ):
            problems.append(f"{key}: marks not one dot per event step: {marks}")
        if (chart["scales"][scale]["min"], chart["scales"][scale]["max"]) != (0, 1):
            problems.append(f"{key}: marks' scale spans {chart['scales'][scale]}")
        if any(a["show"] and a["scale"] == scale for a in chart["axes"]):
            problems.append(f"{key}: an axis is drawn for the marks' scale")
        # a dot is `pointSize` (9) CSS pixels wide: dots of steps closer than that overlap
        a, b = (
            d.page.evaluate("([i, x]) => rlvitalsHoverPoint(i, x).x", [chart["index"], x])
            for x in (0, 100)
        )
        near = 6 / max((b - a) / 100, 1e-9)
        every = sorted({x for steps in d.events.values() for x in steps})
        for step in every:
            px = d.page.evaluate(
                "([i, x, s]) => rlvitalsPixelAt(i, x, 1, s)", [chart["index"], step, scale]
            )
            colours = [stored[run] for run in marked if step in d.events[run]]
            if any(abs(x - step) <= near for x in every if x != step):
                # another step's dot overlaps this one and may be drawn over it, antialiased
                # edges blending the two: an opaque pixel is what can be asked
                if px[3] != 255:
                    problems.append(f"{key}: at step {step}, top of the chart, no dot: {px}")
                continue
            if not any(all(abs(a - b) <= 6 for a, b in zip(px, c, strict=True)) for c in colours):
                problems.append(f"{key}: at step {step}, top of the chart, the canvas holds {px}")
    return problems


CHECKS = (
    drawn_problems,
    line_problems,
    colour_problems,
    legend_problems,
    empty_row_problems,
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
    """Every trend panel of every dashboard of the case's language gets a uPlot chart with
    joined lines for every run that logs its metrics; a PNG of each is kept. On the imported
    runs, how many charts draw lines is printed (`-s`) and must be most of them."""
    dashboards = _committed(builtin, drawn.case.lang)
    trend = [p for d in dashboards.values() for p in d["panels"] if p["type"] == "trend"]
    assert len(drawn.charts) == len(trend) > 40
    _fail_on(drawn_problems(drawn))
    with_lines = [c for c in drawn.charts if c["runs"]]
    print(f"{drawn.case.id}: {len(with_lines)} of {len(drawn.charts)} charts draw lines")
    if drawn.case.data == "imported":
        assert len(with_lines) > len(drawn.charts) // 2
        per_run = {run: sum(run in c["runs"] for c in drawn.charts) for run in IMPORTED}
        print(f"{drawn.case.id}: charts with a line of each run {per_run}")
        assert all(per_run.values()), per_run
    for chart in drawn.charts:
        assert Path(chart["shot"]).stat().st_size > (10_000 if chart["runs"] else 0), chart["shot"]


def test_every_run_that_logs_a_charts_metric_has_a_line_in_it(drawn: Drawn) -> None:
    """A 200-step run beside 40,960-step ones is about 5 buckets: the moving average used to
    hold back its first $smoothing - 1 and drew it one point or none (seen on imported runs)."""
    _fail_on(line_problems(drawn))


def test_each_runs_lines_are_drawn_in_the_colour_the_store_gave_it(drawn: Drawn) -> None:
    """In either theme and language: the store's colours are the theme's colours too (docs/
    compose.md: the same run the same colour in every chart and dashboard), raw lines grey."""
    assert set(drawn.store_colours) == set(drawn.selected)
    assert len(set(drawn.store_colours.values())) == len(drawn.selected)
    _fail_on(colour_problems(drawn))


def test_the_runs_drawn_in_a_chart_each_have_a_colour_of_their_own(drawn: Drawn) -> None:
    """Any runs shown together get distinct colours (issue 37): every run's smoothed lines in a
    chart are stroked in one colour no other run of the chart has; `rlvitals demo`'s eight runs
    in eight."""
    most = 0
    for chart in drawn.charts:
        strokes: dict[str, set[str]] = {}
        for s in _run_series(chart):
            if _kind(s) == "smoothed" and s["nonNull"]:
                strokes.setdefault(s["labels"]["run"], set()).add((s["stroke"] or "").lower())
        assert all(len(c) == 1 for c in strokes.values()), (chart["key"], strokes)
        assert len({c for (c,) in strokes.values()}) == len(strokes), (chart["key"], strokes)
        most = max(most, len(strokes))
    assert most == len(drawn.selected)
    if drawn.case.data == "rlvitals-demo":
        assert most == len(DEMO_RUNS) == 8


def test_each_legend_row_names_its_run_and_metric_in_the_runs_colour(drawn: Drawn) -> None:
    legends = [
        c
        for c in drawn.charts
        if c["runs"] and not any(_kind(s) == "member" for s in c.get("series", []))
    ]
    assert len(legends) > (30 if drawn.case.data == "demo" else 15)
    _fail_on(legend_problems(drawn))


def test_no_legend_row_names_a_run_with_no_line(drawn: Drawn) -> None:
    """A run logging other metrics of a chart's measurement got rows with a step and no value
    (the chart's `max("step")`), so a legend row with no line (seen on imported runs); within a
    chart of several metrics, a run logging one but not another got the other's column all null
    (the queries are merged into one table before the partition by run: GRPO's KL beside its
    clip fraction). Both fixed: the first in the query, the second by hiding a field with no
    value (`byValue`, `allIsNull`)."""
    _fail_on(empty_row_problems(drawn))


def test_each_tooltip_row_names_its_run_and_metric_and_none_read_alike(drawn: Drawn) -> None:
    _fail_on(tooltip_problems(drawn))


def test_threshold_areas_are_painted_on_their_metrics_own_axis(drawn: Drawn) -> None:
    assert sum(bool(c.get("thresholds")) for c in drawn.charts) > 5
    _fail_on(threshold_problems(drawn))


def test_event_marks_are_dots_at_the_top_of_a_hidden_axis_at_the_events_step(
    drawn: Drawn,
) -> None:
    marked = sum(any(s["name"] == EVENT_MARKS for s in c.get("series", [])) for c in drawn.charts)
    # a chart with events that no selected run logs a metric of shows why instead (the gate)
    asked = [
        c
        for c in drawn.charts
        if c["runs"] and any(EVENT_MARKS in t.get("query", "") for t in c["panel"]["targets"])
    ]
    assert len(asked) >= 7
    assert marked == (len(asked) if any(drawn.events.values()) else 0)
    _fail_on(marks_problems(drawn))


def test_the_step_axis_and_the_tooltip_read_plain_steps(drawn: Drawn) -> None:
    for chart in drawn.charts:
        if "axes" not in chart:
            continue
        (x_axis,) = [a for a in chart["axes"] if a["scale"] == "x"]
        assert x_axis["label"] in (None, "", "step"), (chart["key"], x_axis["label"])
    for chart, tip in _tooltips(drawn):
        if drawn.case.data == "demo":
            assert tip["header"] == ["step", str(EVENT_STEP)], (chart["key"], tip["header"])
        else:  # steps a few pixels apart: the cursor may land on a neighbour of the one aimed at
            assert tip["header"][0] == "step" and re.fullmatch(r"\d+", tip["header"][1]), tip
            assert int(tip["header"][1]) in chart["x"], (chart["key"], tip["header"])


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


def empty_fields_shown(dashboards: dict[str, Any]) -> None:
    """The override hiding a field with no value dropped (`byValue`, `allIsNull`)."""
    for panel in mutations._charts(dashboards):
        overrides = panel["fieldConfig"]["overrides"]
        panel["fieldConfig"]["overrides"] = [
            o for o in overrides if o["matcher"]["id"] != "byValue"
        ]


def test_without_hiding_empty_fields_imported_runs_get_legend_rows_with_no_line(
    browser: Any, harness_js: Path, builtin: registry.Registry, imported: Imported
) -> None:
    """The demo's runs all log the same metrics, so the mutation above is drawn on the imported
    real runs, where SB3, CleanRL and TRL each log some metrics of a chart and not others."""
    dashboards = copy.deepcopy(_english(builtin))
    before = copy.deepcopy(dashboards)
    empty_fields_shown(dashboards)
    assert dashboards != before, "empty_fields_shown changed nothing: the mutation is stale"
    runs = tuple(IMPORTED)
    result = draw(browser, harness_js, dashboards, imported.db, imported.api, runs=runs)
    try:
        drawn = Drawn(
            result.page, result.charts, result.store_colours, {}, Case("en", "dark", "imported")
        )
        for chart in drawn.charts:
            metrics = _metrics_of(chart["panel"])
            chart["runs"] = {run for run in runs if imported.logged[run] & metrics}
        assert empty_row_problems(drawn), "no legend row without a line: the check is blind"
    finally:
        result.page.close()


def marks_ungated(dashboards: dict[str, Any]) -> None:
    """The gate dropped that keeps a chart's rows only when a selected run answered one of its
    metrics (`_with_marks_gate`): the runs' event marks alone fill a chart no run logs."""
    for panel in mutations._charts(dashboards):
        panel["transformations"] = [
            t for t in panel["transformations"] if t["options"].get("type") != "include"
        ]


def test_without_the_marks_gate_a_chart_no_demo_run_logs_draws_their_events_alone(
    browser: Any, harness_js: Path, builtin: registry.Registry, demo_runs: Imported
) -> None:
    overview = "grafana/dashboards/en/overview.json"
    dashboards = {overview: copy.deepcopy(_english(builtin)[overview])}
    before = copy.deepcopy(dashboards)
    marks_ungated(dashboards)
    assert dashboards != before, "marks_ungated changed nothing: the mutation is stale"
    result = draw(browser, harness_js, dashboards, demo_runs.db, demo_runs.api, runs=DEMO_RUNS)
    try:
        for chart in result.charts:
            metrics = _metrics_of(chart["panel"])
            chart["runs"] = {r for r in DEMO_RUNS if demo_runs.logged.get(r, set()) & metrics}
        assert any(not c["runs"] for c in result.charts), "every chart has a run: the test is moot"
        case = Case("en", "dark", "rlvitals-demo")
        drawn = Drawn(result.page, result.charts, result.store_colours, demo_runs.events, case)
        assert drawn_problems(drawn), "no chart drew events alone: the check is blind"
    finally:
        result.page.close()
