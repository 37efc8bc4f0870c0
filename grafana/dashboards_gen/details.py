"""Detail pages: every registry metric of some groups, and the run comparison of core metrics."""

from __future__ import annotations

from collections.abc import Mapping

from grafana_foundation_sdk.builders import dashboard as db

from registry import Registry

from .charts import charts_for
from .common import Grid, dashboard_shell
from .i18n import words
from .panels import card_panel, chart_panel
from .queries import step_measurement

__all__ = ["DETAIL_GROUPS", "compare_dashboard", "detail_dashboard"]

DETAIL_GROUPS: Mapping[str, tuple[str, ...]] = {
    "policy": ("policy", "advantage", "value", "optimization"),
    "reward": ("reward",),
    "generation": ("generation",),
    "resources": ("throughput", "system", "health"),
}
"""Which registry groups each detail page shows (a test checks every group has a page)."""


def detail_dashboard(reg: Registry, key: str, lang: str) -> db.Dashboard:
    w = words(lang)
    dash = dashboard_shell(key, getattr(w, key), lang, steps=step_measurement(reg))
    grid = Grid()
    for group in DETAIL_GROUPS[key]:
        # counters (step, NaN count) are the exporter's own live numbers, not stored fields
        metrics = [m for m in reg.by_group(group) if m.kind != "counter"]
        if not metrics:
            continue
        dash = dash.with_row(db.Row(group).id(grid.next_id()).grid_pos(grid.row()))
        for chart in charts_for(metrics, spikes=True):
            panel = chart_panel(chart, lang).id(grid.next_id())
            dash = dash.with_panel(panel.grid_pos(grid.place(12, 8)))
    return dash


def compare_dashboard(reg: Registry, lang: str) -> db.Dashboard:
    """Core metrics, smoothed only, one colour per run, with the focused run's cards."""
    w = words(lang)
    dash = dashboard_shell("compare", w.compare, lang, steps=step_measurement(reg))
    grid = Grid()
    metrics = [m for m in reg.core_metrics() if m.kind != "counter"]
    for chart in charts_for(metrics, raw=False, merge=False):
        panel = chart_panel(chart, lang).id(grid.next_id())
        dash = dash.with_panel(panel.grid_pos(grid.place(12, 8)))
    lead = metrics[0] if metrics else None
    if lead is not None:
        card = card_panel(lead.id, lead.title.get(lang), lang).id(grid.next_id())
        dash = dash.with_panel(card.grid_pos(grid.place(12, 8)))
    return dash
