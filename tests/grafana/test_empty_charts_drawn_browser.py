"""Issue 37, "charts that adapt to what a run logs": a chart whose metrics the selected runs never
log says so, and names the algorithm families and frameworks that log them (the registry's
`applies_to` and aliases), DRAWN by the rendering harness as Grafana 13.2 shows it.

The runs here log a few metrics only (through the real exporter into a real InfluxDB), so most
charts of the committed dashboards get no series at all. The trend panel then has nothing to
draw and, as its app code does (TrendPanel.tsx, PanelDataErrorView.tsx `getMessageFor`: ported
in tests/grafana/node/render/harness.jsx, docs/grafana.md), shows a message: the chart's
`noValue` when its one frame has a `step` field of no values, else a warning such as "Unable to
find field: step". A chart with data still draws, and its own `noValue` never shows in its
legend or in a tooltip row of a run with no point at the hovered step.

`MUTATIONS` are defects these checks must catch: each is drawn on the overview and must fail one.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundle_data import healthy_value
from chromium import ARTIFACTS
from influx_server import InfluxDatabase
from test_dashboards_data_path import RUNS, panel_inputs
from test_dashboards_drawn_browser import (  # noqa: F401 (fixtures)
    REPO,
    Drawn,
    _english,
    draw,
    harness_js,
)

import registry
from grafana.dashboards_gen.i18n import words
from grafana.datasource import DatasourceConfig, create_app
from registry.families import ANY_FAMILY, FAMILY_NAMES, FRAMEWORK_NAMES

SHOTS = ARTIFACTS / "grafana-drawn-empty"
STEPS = 60
LOGGED = {"ppo-a": ("policy_entropy",), "ppo.b": ("learning_rate",), "sac-c": ("policy_entropy",)}
"""What each selected run logs (sac-c every third step of the first half only): every chart of
neither metric has no series; the entropy chart has a run (sac-c) with no point at two steps in
three, and none at all in the second half (far from any of its points: Grafana's cursor takes a
series' nearest value within a few pixels, so only there is its tooltip row a null)."""
STRIDE = {"sac-c": 3}
UNTIL = {"sac-c": STEPS // 2}

Dashboards = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def partial_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("partial-store")


@pytest.fixture(scope="module")
def partial(builtin: registry.Registry, influxd: Any, partial_store: Path) -> InfluxDatabase:
    """The runs of `LOGGED`, logged through the real exporter (no events: an event would draw
    its mark on the overview's charts)."""
    import exporter

    db = InfluxDatabase(influxd, "partial")
    influxd.post_query('CREATE DATABASE "partial"')
    assert set(LOGGED) == set(RUNS)
    for i, (name, ids) in enumerate(LOGGED.items()):
        run = exporter.init(
            name, registry=builtin, settings=db.settings(partial_store, policy="warn")
        )
        rng = np.random.default_rng(i)
        for step in range(0, UNTIL.get(name, STEPS), STRIDE.get(name, 1)):
            run.log(step, {m: healthy_value(builtin.metric(m), step, rng) for m in ids})
        run.finish(60)
    return db


@pytest.fixture(scope="module")
def partial_api(partial: InfluxDatabase, partial_store: Path, builtin: registry.Registry) -> Any:
    return create_app(DatasourceConfig(store=partial_store), builtin).test_client()


def _dashboards(builtin: registry.Registry) -> Dashboards:
    """Every committed English dashboard, and the Chinese overview."""
    zh = REPO / "grafana" / "dashboards" / "zh" / "overview.json"
    return {
        **_english(builtin),
        str(zh.relative_to(REPO)): json.loads(zh.read_text(encoding="utf-8")),
    }


def _metrics(panel: dict[str, Any], builtin: registry.Registry) -> list[registry.Metric]:
    r"""The registry's metrics a chart's queries read (`AS "<id> <kind>"`, or a name family's
    `mean(/^<id>\//)`)."""
    ids = {m.id for m in builtin.metrics}
    found: list[str] = []
    for t in panel["targets"]:
        query = t.get("query", "")
        for name in re.findall(r'AS "([^" /]+) ', query) + re.findall(r"mean\(/\^(\w+)\\/", query):
            if name in ids and name not in found:
                found.append(name)
    return [builtin.metric(i) for i in found]


def _lang(chart: dict[str, Any]) -> str:
    return "zh" if "/zh/" in chart["path"] else "en"


def _draw(browser: Any, harness: Path, dashboards: Dashboards, db: Any, api: Any, **kw: Any) -> Any:
    """The charts drawn, each with its path, the points its queries returned, and its metrics."""
    pi = panel_inputs(dashboards, db, api)
    promised = {
        (path, panel["title"]): p
        for (path, panel, _d), p in zip(pi.panels, pi.promised, strict=True)
    }
    # an InfluxDB query that answered anything gives a frame (refIds A, B64, ...)
    answered = {
        (path, panel["title"]): any(f["refId"][:1].isupper() for f in inp["frames"])
        for (path, panel, _d), inp in zip(pi.panels, pi.inputs, strict=True)
    }
    d = draw(browser, harness, dashboards, db, api, **kw)
    paths = [path for path, panel, _d in pi.panels if panel["type"] == "trend"]
    for chart, path in zip(d.charts, paths, strict=True):
        chart["path"] = path
        chart["promised"] = promised[(path, chart["panel"]["title"])]
        chart["answered"] = answered[(path, chart["panel"]["title"])]
    return d


@pytest.fixture(scope="module")
def drawn(
    browser: Any,
    harness_js: Path,  # noqa: F811 (the drawn module's fixture)
    partial: InfluxDatabase,
    partial_api: Any,
    builtin: registry.Registry,
) -> Iterator[Drawn]:
    result = _draw(browser, harness_js, _dashboards(builtin), partial, partial_api, shots=SHOTS)
    yield result
    result.page.close()


def _empty(d: Drawn) -> list[dict[str, Any]]:
    """The charts none of whose InfluxDB queries answered anything for the selected runs: no run
    wrote any point to the charts' measurement."""
    return [c for c in d.charts if not c["answered"]]


def _beside_others(d: Drawn, builtin: registry.Registry) -> list[dict[str, Any]]:
    """The charts no selected run logs whose measurement (the registry's group) holds metrics
    the runs do log: a query of the measurement finds their points, with none of the chart's."""
    logged = {builtin.metric(m).group for ids in LOGGED.values() for m in ids}
    return [
        c
        for c in d.charts
        if not c["promised"] and {m.group for m in _metrics(c["panel"], builtin)} & logged
    ]


def _with_data(d: Drawn) -> list[dict[str, Any]]:
    return [c for c in d.charts if c["promised"]]


# --- the checks: each returns what it found wrong ---------------------------------------------------


def _who(metrics: list[registry.Metric], lang: str) -> list[str]:
    """The names the message must hold: the families the registry says the metrics apply to (or
    "any algorithm" when one applies to all), and every framework with a spelling of one."""
    families = {f for m in metrics for f in m.applies_to}
    names = (
        [words(lang).any_family]
        if ANY_FAMILY in families
        else [FAMILY_NAMES[f][lang] for f in families]
    )
    # a `generic` spelling is no framework's
    spelled = {a.framework for m in metrics for a in m.aliases} & set(registry.FRAMEWORKS)
    return names + [FRAMEWORK_NAMES[f] for f in spelled]


def message_problems(
    d: Drawn, builtin: registry.Registry, charts: list[dict[str, Any]] | None = None
) -> list[str]:
    """Every chart with no series (`_empty`, or `charts`) shows one message, which names who
    logs its metrics."""
    problems = []
    for chart in _empty(d) if charts is None else charts:
        key = chart["key"]
        if "message" not in chart or "warning" in chart:
            problems.append(f"{key}: {chart.get('warning') or 'drawn'} instead of a message")
            continue
        shown = d.page.locator(
            f'section.rlvitals-chart[data-key="{key}"] '
            '[data-testid="data-testid Panel data error message"]'
        )
        text = shown.inner_text() if shown.count() == 1 else ""
        if text != chart["message"]:
            problems.append(f"{key}: the page shows {text!r}, not {chart['message']!r}")
        metrics = _metrics(chart["panel"], builtin)
        if not metrics:
            problems.append(f"{key}: no registry metric in its queries")
        missing = [n for n in _who(metrics, _lang(chart)) if n not in text]
        if missing:
            problems.append(f"{key}: {text!r} does not name {sorted(set(missing))}")
    return problems


def _not_logged_texts(d: Drawn) -> set[str]:
    return {c["panel"]["fieldConfig"]["defaults"].get("noValue") or "" for c in d.charts} - {""}


def data_chart_problems(d: Drawn) -> list[str]:
    """A chart with data draws lines, and no chart's "not logged" message shows in its legend or
    in its tooltip hovered at a step where a run has no point (a field's `noValue` is what
    @grafana/ui shows for a null: legend calcs, VizTooltip's rows)."""
    problems = []
    messages = _not_logged_texts(d)
    charts = _with_data(d)
    if not charts:
        return ["no chart has data"]
    hovered = 0
    for chart in charts:
        key = chart["key"]
        if "series" not in chart:
            problems.append(f"{key}: not drawn: {chart.get('message') or chart.get('error')}")
            continue
        legend = d.page.locator(
            f'section.rlvitals-chart[data-key="{key}"] [data-testid="data-testid viz-layout-legend"]'
        ).inner_text()
        problems += [f"{key}: legend shows {m!r}" for m in messages if m in legend]
        # a step where one run has a point and another none, late (far from the sparse run's
        # points, and inside the plot: the last step is at its edge)
        step = d.page.evaluate(
            """i => { const u = rlvitalsCharts[i];
                 for (let j = Math.floor(u.data[0].length * 0.8); j >= 0; j--) {
                   const ys = u.data.slice(1).map((s) => s[j]);
                   if (u.data[0][j] != null && ys.some((v) => v != null) && ys.some((v) => v == null))
                     return u.data[0][j];
                 }
                 return null; }""",
            chart["index"],
        )
        if step is None:
            continue  # one run only (the learning rate's), or every run at every step
        hovered += 1
        point = d.page.evaluate("([i, x]) => rlvitalsHoverPoint(i, x)", [chart["index"], step])
        d.page.mouse.move(point["x"], point["y"] - 5)
        d.page.mouse.move(point["x"], point["y"])
        d.page.wait_for_function(
            "i => rlvitalsTooltipRows(i) !== null", arg=chart["index"], timeout=30_000
        )
        tip = d.page.evaluate("i => rlvitalsTooltipRows(i)", chart["index"])
        problems += [
            f"{key}: tooltip at step {step} shows {m!r}" for m in messages if m in tip["text"]
        ]
    if not hovered:
        problems.append("no chart has a step where one run has a point and another none")
    return problems


# --- the tests ----------------------------------------------------------------------------------


def test_most_charts_have_no_series_and_some_have_data(drawn: Drawn) -> None:
    assert len(_empty(drawn)) > 20
    assert 1 <= len(_with_data(drawn)) < 10
    assert any(_lang(c) == "zh" for c in _empty(drawn))


def test_a_chart_no_selected_run_logs_names_who_logs_its_metrics(
    drawn: Drawn, builtin: registry.Registry
) -> None:
    problems = message_problems(drawn, builtin)
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:5])


def test_a_chart_of_metrics_logged_beside_others_names_who_logs_them(
    drawn: Drawn, builtin: registry.Registry
) -> None:
    """Issue 37: such a chart drew empty axes and a legend of runs with no line (its query's
    `max("step")` answered every bucket of the measurement)."""
    charts = _beside_others(drawn, builtin)
    assert len(charts) >= 3
    problems = message_problems(drawn, builtin, charts)
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:5])


def test_a_chart_with_data_draws_and_never_shows_the_message(drawn: Drawn) -> None:
    problems = data_chart_problems(drawn)
    assert not problems, f"{len(problems)} problems, e.g. " + "; ".join(problems[:5])


# --- mutations: each must fail a check above -----------------------------------------------------


def _trends(dashboards: Dashboards) -> Iterator[dict[str, Any]]:
    for d in dashboards.values():
        yield from (p for p in d["panels"] if p["type"] == "trend")


def no_value_removed(dashboards: Dashboards) -> None:
    """The chart says Grafana's "No data"."""
    for p in _trends(dashboards):
        p["fieldConfig"]["defaults"].pop("noValue", None)


def empty_step_column_removed(dashboards: Dashboards) -> None:
    """No query gives the empty `step` field: back to "Unable to find field: step"."""
    for p in _trends(dashboards):
        p["targets"] = [t for t in p["targets"] if t.get("source") != "inline"]


def null_step_row_kept(dashboards: Dashboards) -> None:
    """The empty step column keeps its null row: "Cannot visualize data"."""
    for p in _trends(dashboards):
        p["transformations"] = [t for t in p["transformations"] if t["id"] != "filterByValue"]


def fields_keep_no_value(dashboards: Dashboards) -> None:
    """Every field keeps the panel's `noValue`: a null shows the message in legend and tooltip."""
    for p in _trends(dashboards):
        overrides = p["fieldConfig"]["overrides"]
        overrides[:] = [o for o in overrides if o["matcher"]["id"] != "byType"]


MUTATIONS: tuple[Callable[[Dashboards], None], ...] = (
    no_value_removed,
    empty_step_column_removed,
    null_step_row_kept,
    fields_keep_no_value,
)


@pytest.fixture(scope="module")
def mutated(
    browser: Any,
    harness_js: Path,  # noqa: F811 (the drawn module's fixture)
    partial: InfluxDatabase,
    partial_api: Any,
    builtin: registry.Registry,
) -> Iterator[dict[str, Drawn]]:
    """mutation name -> the English overview so mutated, drawn (all on one page, for time)."""
    path = "grafana/dashboards/en/overview.json"
    overview = _english(builtin)[path]
    dashboards = {}
    for mutation in MUTATIONS:
        copies = {path: copy.deepcopy(overview)}
        mutation(copies)
        assert copies[path] != overview, f"{mutation.__name__} changed nothing: it is stale"
        dashboards[f"grafana/dashboards/en/overview-{mutation.__name__}.json"] = copies[path]
    everything = _draw(browser, harness_js, dashboards, partial, partial_api)
    yield {
        m.__name__: Drawn(
            everything.page,
            [c for c in everything.charts if c["dashboard"] == f"overview-{m.__name__}"],
            everything.store_colours,
        )
        for m in MUTATIONS
    }
    everything.page.close()


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.__name__ for m in MUTATIONS])
def test_each_mutation_fails_a_check(
    mutation: Any, mutated: dict[str, Drawn], builtin: registry.Registry
) -> None:
    drawn = mutated[mutation.__name__]
    assert len(drawn.charts) >= 7
    failed = message_problems(drawn, builtin) + data_chart_problems(drawn)
    assert failed, f"{mutation.__name__}: every check still passes"
