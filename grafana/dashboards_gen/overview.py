"""The Overview dashboard: Health, Trend and Resource rows over the registry's core metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from grafana_foundation_sdk.builders import dashboard as db

from registry import Metric, Registry

from .charts import charts_for
from .common import Grid, dashboard_shell
from .i18n import words
from .panels import Chart, cards_panel, chart_panel, events_panel, state_stat_panel
from .queries import step_measurement

__all__ = ["HEALTH_STATS", "LAYERS", "overview_dashboard"]

LAYERS: tuple[str, ...] = ("health", "trend", "resource")

HEALTH_STATS: tuple[tuple[str, str, tuple[tuple[float | None, str], ...]], ...] = (
    ("step", "step", ((None, "blue"),)),
    ("steps_per_second", "steps_per_second", ((None, "red"), (1e-9, "green"))),
    ("nonfinite", "nonfinite", ((None, "green"), (1.0, "red"))),
    ("active_alerts", "alerts", ((None, "green"), (1.0, "orange"))),
)
"""The Health row's four numbers: (title word, `/api/run_state` column, colour steps). Read from
the datasource, not Prometheus: Prometheus holds only what live processes serve, so a finished,
imported or demo run read "No data" there."""


def _health_stats(dash: db.Dashboard, grid: Grid, lang: str) -> db.Dashboard:
    w = words(lang)
    for word, column, steps in HEALTH_STATS:
        title = getattr(w, word)
        panel = state_stat_panel(title, title, column, "short", steps, lang)
        dash = dash.with_panel(panel.id(grid.next_id()).grid_pos(grid.place(6, 4)))
    return dash


def _chart(dash: db.Dashboard, grid: Grid, chart: Chart, lang: str, width: int) -> db.Dashboard:
    panel = chart_panel(chart, lang).id(grid.next_id())
    return dash.with_panel(panel.grid_pos(grid.place(width, 8)))


def overview_charts(reg: Registry) -> dict[str, list[Chart]]:
    """The overview's charts by layer, health first: the metrics the registry marks
    `display.overview` (about eight charts: the seeds keep the overview to about eight core
    metrics and send the rest to sub-pages), each drawn once. Those with `health_slope` are
    drawn in the Health row with their slope; counters are live stats instead."""
    chosen = [m for m in reg.metrics if m.display.overview and m.kind != "counter"]
    out: dict[str, list[Chart]] = {
        "health": charts_for(
            [m for m in chosen if m.display.health_slope], spikes=False, slope=True, merge=False
        )
    }
    for layer in LAYERS:
        metrics: Sequence[Metric] = [
            m for m in chosen if m.layer == layer and not m.display.health_slope
        ]
        out[layer] = out.get(layer, []) + charts_for(metrics, spikes=True, merge=False)
    return {layer: [replace(c, events=True) for c in charts] for layer, charts in out.items()}


def overview_dashboard(reg: Registry, lang: str) -> db.Dashboard:
    """Health (live stats, KL with its slope, gradient norm, the focused run's diagnosis cards
    and events), then Trend and Resource charts."""
    w = words(lang)
    dash = dashboard_shell("overview", w.overview, lang, steps=step_measurement(reg))
    grid = Grid()
    titles = {"health": w.health, "trend": w.trend, "resource": w.resource}
    charts = overview_charts(reg)
    for layer in LAYERS:
        dash = dash.with_row(db.Row(titles[layer]).id(grid.next_id()).grid_pos(grid.row()))
        if layer == "health":
            dash = _health_stats(dash, grid, lang)
            grid.newline()
        for chart in charts[layer]:
            dash = _chart(dash, grid, chart, lang, 12)
        if layer == "health":
            grid.newline()
            cards = cards_panel(lang).id(grid.next_id())
            dash = dash.with_panel(cards.grid_pos(grid.place(12, 10)))
            dash = dash.with_panel(
                events_panel(lang).id(grid.next_id()).grid_pos(grid.place(12, 10))
            )
    return dash
