"""Diagnosis cards for a run: fetch the windows a card reads and the whole-run mean of each
carded metric (from the store's running statistics or a server-side aggregate, never the raw
history), then ask the registry's engine."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import registry
from registry.diagnosis import build_card
from registry.diagnosis.stats import RunMean, Series, as_series

from .card_words import labelled
from .history import HistoryStore, Points

__all__ = ["EARLY_SKETCH_POINTS", "card_inputs", "cards_for"]

EARLY_SKETCH_POINTS = 32
_SKETCHES_AT_ONCE = 4


def card_inputs(reg: registry.Registry, metric_id: str) -> tuple[str, ...]:
    """The metric, its related metrics and every metric a rule about it reads."""
    metric = reg.metric(metric_id)
    needed = [metric_id, *metric.related]
    for rule in reg.rules:
        if metric_id in rule.metrics:
            needed.extend(rule.metrics)
    return tuple(m for m in dict.fromkeys(needed) if reg.has_metric(m))


def _needs_early(metric: registry.Metric) -> bool:
    bands = metric.bands is not None and metric.bands.basis == "early_value"
    return bands or any(a.basis == "early_value" for a in metric.alerts)


def _with_early(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    field: str,
    window: Points,
    stages: registry.Stages,
) -> Series:
    """The window; for a metric judged relative to its early value, preceded by a small sketch
    of the early stage (bucket means) when the window starts after it."""
    if not (reg.has_metric(field) and _needs_early(reg.metric(field))) or not len(window):
        return as_series((window.steps, window.values))
    first = int(window.steps[0])
    if first <= 0 or stages.early_end <= 0:
        return as_series((window.steps, window.values))
    early = store.series(run, field, 0, min(stages.early_end, first) - 1, EARLY_SKETCH_POINTS)
    steps = np.concatenate([early.steps, window.steps])
    values = np.concatenate([early.values, window.values])
    return as_series((steps, values))


def cards_for(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric_ids: Sequence[str],
    lang: str,
    window: int,
) -> list[dict[str, Any]]:
    """One card per metric, reading each needed field's last `window` points once and the
    whole-run count and mean of each metric carded."""
    inputs = {m: card_inputs(reg, m) for m in metric_ids}
    fields = list(dict.fromkeys(f for needed in inputs.values() for f in needed))
    windows = store.windows(run, fields, window)
    whole_run = store.stats(run, [m for m in metric_ids if len(windows.get(m, ()))])
    config = dict(store.run_config(run))
    stages = reg.stages_for(config)
    # the early sketches are a store query each: side by side (each waits on the store)
    with ThreadPoolExecutor(_SKETCHES_AT_ONCE, thread_name_prefix="rlvitals-cards") as pool:
        sketched = pool.map(
            lambda item: _with_early(reg, store, run, item[0], item[1], stages), windows.items()
        )
        series: dict[str, Series] = dict(zip(windows, sketched, strict=True))
    cards = []
    for metric_id in metric_ids:
        subset = {m: series[m] for m in inputs[metric_id] if m in series}
        stats = whole_run.get(metric_id)
        run_mean = None if stats is None else RunMean(stats.count, stats.mean)
        card = build_card(reg, metric_id, subset, config, lang, whole_run=run_mean)
        cards.append(labelled(card.to_dict(), lang))
    return cards
