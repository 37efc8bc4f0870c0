"""Everything a report shows, gathered from a history store (embedded outbox or InfluxDB).

Charts are the registry's core metrics that the run logged, in registry order; a metric shares
a chart with the metrics its `display.panel_with` names when they are core too and sit on the
same axis in the same unit (raw and shaped reward). Each series is downsampled by the store to at
most `points` points (bucket means in step space), smoothed with TensorBoard's debiased EMA, and
carries its stage band's edges scaled to the run. Cards come from the registry's diagnosis engine
in each language asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import registry
from registry.diagnosis import ema
from registry.model import Metric

from ..datasource.cards import cards_in, stages_of_run
from ..datasource.history import HistoryStore
from ..datasource.history.base import Event
from ..datasource.series import band_edges, early_value

__all__ = [
    "DEFAULT_POINTS",
    "DEFAULT_SMOOTHING",
    "ChartData",
    "ReportData",
    "SeriesData",
    "chart_groups",
    "gather",
]

DEFAULT_POINTS = 1000
DEFAULT_SMOOTHING = 0.6
DEFAULT_CARD_WINDOW = 2000
MAX_EVENTS = 10_000

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class SeriesData:
    metric: Metric
    steps: IntArray
    raw: FloatArray
    smooth: FloatArray
    band_low: tuple[float | None, ...]
    band_high: tuple[float | None, ...]
    bucket: int
    source_points: int | None


@dataclass(frozen=True, eq=False)
class ChartData:
    """One chart: its first series is the chart's metric; its bands are that metric's."""

    id: str
    series: tuple[SeriesData, ...]

    @property
    def metric(self) -> Metric:
        return self.series[0].metric


@dataclass(frozen=True, eq=False)
class ReportData:
    run: str
    config: Mapping[str, Any]
    stages: registry.Stages
    charts: tuple[ChartData, ...]
    cards: Mapping[str, Mapping[str, Mapping[str, Any]]]  # lang -> metric -> card dict
    events: tuple[Event, ...]
    first_step: int | None
    last_step: int | None
    smoothing: float
    points: int


def chart_groups(reg: registry.Registry, available: Sequence[str]) -> list[list[Metric]]:
    """Core metrics with data, grouped into charts (registry order)."""
    have = set(available)
    core = [m for m in reg.core_metrics() if m.id in have]
    placed: set[str] = set()
    groups: list[list[Metric]] = []
    for m in core:
        if m.id in placed:
            continue
        group = [m]
        placed.add(m.id)
        for other in core:
            if other.id in placed:
                continue
            linked = other.id in m.display.panel_with or m.id in other.display.panel_with
            if linked and other.display.axis == m.display.axis and other.unit == m.unit:
                group.append(other)
                placed.add(other.id)
        groups.append(group)
    return groups


def _series(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric: Metric,
    config: Mapping[str, Any],
    stages: registry.Stages,
    points: int,
    smoothing: float,
) -> SeriesData:
    p = store.series(run, metric.id, None, None, points)
    steps, raw = p.steps[:points], p.values[:points]
    smooth = ema(raw, smoothing) if smoothing > 0 else raw.copy()
    early = None
    if metric.bands is not None and metric.bands.basis == "early_value" and steps.size:
        early = early_value(store, run, metric.id, stages)
    low, high = band_edges(metric, steps, stages, config, early)
    return SeriesData(metric, steps, raw, smooth, tuple(low), tuple(high), p.bucket, p.total)


def gather(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    *,
    langs: Sequence[str] = ("en", "zh"),
    points: int = DEFAULT_POINTS,
    smoothing: float = DEFAULT_SMOOTHING,
    card_window: int = DEFAULT_CARD_WINDOW,
) -> ReportData:
    """Read one run for the report. Raises the store's UnknownRun for a run it does not hold."""
    config = dict(store.run_config(run))
    # the stages the cards under the charts judge the run in (its boundaries, planned length or
    # measured cadence): a chart's shading and its card say the same stage
    stages = stages_of_run(reg, store, run, card_window)
    fields = store.fields(run)
    groups = chart_groups(reg, fields)
    charts = tuple(
        ChartData(
            group[0].id,
            tuple(_series(reg, store, run, m, config, stages, points, smoothing) for m in group),
        )
        for group in groups
    )
    charts = tuple(c for c in charts if any(s.steps.size for s in c.series))
    ids = [s.metric.id for c in charts for s in c.series]
    cards = {
        lang: {c["metric"]: c for c in judged}
        for lang, judged in cards_in(reg, store, run, ids, langs, card_window).items()
    }
    steps = [int(s.steps[i]) for c in charts for s in c.series if s.steps.size for i in (0, -1)]
    return ReportData(
        run=run,
        config=config,
        stages=stages,
        charts=charts,
        cards=cards,
        events=store.events(run, MAX_EVENTS),
        first_step=min(steps) if steps else None,
        last_step=max(steps) if steps else None,
        smoothing=smoothing,
        points=points,
    )
