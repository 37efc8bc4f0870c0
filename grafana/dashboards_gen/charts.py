"""Which metrics share a chart, decided by the registry's `display.panel_with` and units."""

from __future__ import annotations

from collections.abc import Sequence

from registry import Metric

from .panels import Chart
from .queries import Series

__all__ = ["MAX_PER_CHART", "charts_for"]

MAX_PER_CHART = 3


def _components(metrics: Sequence[Metric]) -> list[list[Metric]]:
    ids = {m.id for m in metrics}
    parent = {m.id: m.id for m in metrics}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for m in metrics:
        for other in m.display.panel_with:
            if other in ids:
                parent[find(other)] = find(m.id)
    groups: dict[str, list[Metric]] = {}
    for m in metrics:
        groups.setdefault(find(m.id), []).append(m)
    return list(groups.values())


def _merge_singletons(groups: list[list[Metric]]) -> list[list[Metric]]:
    """A lone metric joins a chart of its registry group with the same unit (same axis), or a lone
    metric of its group that it can sit beside on the right axis; this keeps pages short."""
    out: list[list[Metric]] = []
    for g in groups:
        if len(g) == 1:
            m = g[0]
            home = next(
                (
                    o
                    for o in out
                    if len(o) < MAX_PER_CHART
                    and o[0].group == m.group
                    and (o[0].unit == m.unit or (len(o) == 1 and m.display.axis == "right"))
                ),
                None,
            )
            if home is not None:
                home.append(m)
                continue
        out.append(list(g))
    return out


def _order(group: list[Metric]) -> list[Metric]:
    rank = {"primary": 0, "secondary": 1, "thin": 2}
    return sorted(group, key=lambda m: (m.display.axis == "right", rank.get(m.display.emphasis, 1)))


def charts_for(
    metrics: Sequence[Metric],
    *,
    raw: bool = True,
    merge: bool = True,
    spikes: bool = False,
    slope: bool = False,
) -> list[Chart]:
    """Charts for these metrics in registry order: partners (`panel_with`) share a chart."""
    groups = _components(metrics)
    if merge:
        groups = _merge_singletons(groups)
    charts = []
    for g in groups:
        ordered = _order(g)
        for i in range(0, len(ordered), MAX_PER_CHART):
            part = ordered[i : i + MAX_PER_CHART]
            series = tuple(
                Series(
                    m, raw=raw, smoothed=True, spikes=spikes and m.layer == "health", slope=slope
                )
                for m in part
            )
            charts.append(Chart(series))
    return charts
