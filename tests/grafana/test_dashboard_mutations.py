"""The data-path checks see what a user would: each mutation of the generated dashboards that
issue 37 found passing them unnoticed must now fail at least one of them.

Each mutation edits a copy of every generated dashboard (both languages), which then goes through
the same path as the real ones (`test_dashboards_data_path.process`: a real InfluxDB, Grafana's
@grafana/data in Node) and through every check of test_dashboards_data_path.py; the test fails if
all the checks still pass. `MUTATIONS` is the list the suite runs: add one for every defect the
checks should never miss again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import test_dashboards_data_path as data_path
from influx_server import InfluxDatabase
from test_dashboards_data_path import (  # noqa: F401 (fixtures)
    Processed,
    built,
    datapath_store,
    loaded,
    process,
    runs_api,
)

import registry
from exporter.store.run_colors import PALETTE
from grafana.dashboards_gen.queries import EVENT_MARKS

Dashboards = dict[str, dict[str, Any]]


def _charts(dashboards: Dashboards, page: str = "") -> list[dict[str, Any]]:
    return [
        p
        for path, d in dashboards.items()
        if path.endswith(f"{page}.json")
        for p in d["panels"]
        if p.get("type") == "trend"
    ]


def _marks_override(panel: dict[str, Any]) -> dict[str, Any] | None:
    return next(
        (
            o
            for o in panel["fieldConfig"]["overrides"]
            if EVENT_MARKS in str(o["matcher"].get("options", ""))
        ),
        None,
    )


def compare_first_query_only(dashboards: Dashboards) -> None:
    """The compare page's charts reduced to their first metric's query (issue 37, item 4)."""
    for panel in _charts(dashboards, "compare"):
        panel["targets"] = [t for t in panel["targets"] if t["refId"].startswith("A")]


def overview_without_a_chart(dashboards: Dashboards) -> None:
    """A 7-chart overview, as a registry edit dropping a chart's `display.overview` makes it."""
    for path, d in dashboards.items():
        if path.endswith("overview.json"):
            trend = [p for p in d["panels"] if p.get("type") == "trend"]
            d["panels"].remove(trend[-1])


def marks_at_the_bottom(dashboards: Dashboards) -> None:
    """Event marks drawn at 0, the bottom of their [0, 1] axis."""
    for panel in _charts(dashboards):
        for t in panel["targets"]:
            if "query" in t:  # not the runs' colours (the rlvitals API)
                t["query"] = t["query"].replace('"step" * 0 + 1', '"step" * 0')


def marks_on_a_visible_axis(dashboards: Dashboards) -> None:
    """Event marks on an axis of their own that is drawn (their 1 read as a value)."""
    for panel in _charts(dashboards):
        o = _marks_override(panel)
        for prop in o["properties"] if o else []:
            if prop["id"] == "custom.axisPlacement":
                prop["value"] = "auto"


def marks_for_unselected_runs(dashboards: Dashboards) -> None:
    """The event-marks query ignores the run selection."""
    for panel in _charts(dashboards):
        for t in panel["targets"]:
            if EVENT_MARKS in t.get("query", ""):
                t["query"] = t["query"].replace('"run" =~ /^${run:regex}$/', '"run" =~ /.+/')


def span_nulls_off(dashboards: Dashboards) -> None:
    """Lines broken at every step another run logged and this one did not."""
    for panel in _charts(dashboards):
        panel["fieldConfig"]["defaults"].setdefault("custom", {})["spanNulls"] = False


def marks_inherit_the_healthy_band(dashboards: Dashboards) -> None:
    """The threshold-area defect ("told is true" issue): the marks' scale gets the chart's band."""
    for panel in _charts(dashboards):
        o = _marks_override(panel)
        if o:
            o["properties"] = [p for p in o["properties"] if p["id"] != "custom.thresholdsStyle"]


def _is_run_colour(override: dict[str, Any]) -> bool:
    return 'color="' in str(override["matcher"].get("options", ""))


def colours_back_to_palette_classic_by_name(dashboards: Dashboards) -> None:
    """Run colours by Grafana's hash of the run's name again (issue 37, item 1): no run-colour
    overrides, the charts' colour mode `palette-classic-by-name`."""
    for panel in _charts(dashboards):
        config = panel["fieldConfig"]
        config["defaults"]["color"] = {"mode": "palette-classic-by-name"}
        config["overrides"] = [o for o in config["overrides"] if not _is_run_colour(o)]


def colour_override_removed(dashboards: Dashboards) -> None:
    """The override of the palette's first colour (the first run a store creates) dropped."""
    for panel in _charts(dashboards):
        config = panel["fieldConfig"]
        config["overrides"] = [
            o
            for o in config["overrides"]
            if not (_is_run_colour(o) and PALETTE[0] in str(o["matcher"]["options"]))
        ]


MUTATIONS: tuple[Callable[[Dashboards], None], ...] = (
    compare_first_query_only,
    overview_without_a_chart,
    marks_at_the_bottom,
    marks_on_a_visible_axis,
    marks_for_unselected_runs,
    span_nulls_off,
    marks_inherit_the_healthy_band,
    colours_back_to_palette_classic_by_name,
    colour_override_removed,
)


def _checks() -> list[Callable[..., None]]:
    return [
        getattr(data_path, name)
        for name in dir(data_path)
        if name.startswith("test_")
        and "processed" in getattr(data_path, name).__code__.co_varnames
        and "loaded" not in getattr(data_path, name).__code__.co_varnames
    ]


def _failing(result: Processed, builtin: registry.Registry) -> list[str]:
    failed = []
    for check in _checks():
        kwargs: dict[str, Any] = {"processed": result}
        if "builtin" in check.__code__.co_varnames:
            kwargs["builtin"] = builtin
        try:
            check(**kwargs)
        except AssertionError:
            failed.append(check.__name__)
    return failed


def test_the_generated_dashboards_pass_every_check(
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
) -> None:
    """The baseline: without a mutation nothing fails, so a failure below is the mutation's."""
    assert _failing(process(built(builtin), loaded, runs_api), builtin) == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.__name__ for m in MUTATIONS])
def test_each_listed_mutation_fails_a_data_path_check(
    mutation: Callable[[Dashboards], None],
    loaded: InfluxDatabase,  # noqa: F811 (the data-path module's fixture)
    runs_api: Any,  # noqa: F811 (the data-path module's fixture)
    builtin: registry.Registry,
) -> None:
    dashboards = copy.deepcopy(built(builtin))
    before = copy.deepcopy(dashboards)
    mutation(dashboards)
    assert dashboards != before, f"{mutation.__name__} changed nothing: the mutation is stale"
    assert _failing(process(dashboards, loaded, runs_api), builtin), (
        f"{mutation.__name__}: every data-path check still passes"
    )
