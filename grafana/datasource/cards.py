"""Diagnosis cards for a run: fetch the windows a card reads and the whole-run mean of each
carded metric (from the store's running statistics or a server-side aggregate, never the raw
history), then ask the registry's engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def _early_fields(reg: registry.Registry, fields: Sequence[str]) -> list[str]:
    return [f for f in fields if reg.has_metric(f) and _needs_early(reg.metric(f))]


def _with_early_sketches(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    windows: Mapping[str, Points],
    stages: registry.Stages,
    whole_early: Mapping[str, Points],
) -> dict[str, Series]:
    """Each window as a series; for a metric judged relative to its early value, preceded by a
    small sketch of the early stage (bucket means) when the window starts after it.
    `whole_early` holds the sketches of the whole early stage, read while the windows were; a
    window that starts inside the early stage needs a sketch ending before it, read here
    (sketches ending at one step together)."""
    series = {f: as_series((w.steps, w.values)) for f, w in windows.items()}
    sketches: dict[str, Points] = {}
    by_end: dict[int, list[str]] = {}
    for f in _early_fields(reg, list(windows)):
        w = windows[f]
        first = int(w.steps[0]) if len(w) else 0
        if first <= 0 or stages.early_end <= 0:
            continue
        end = min(stages.early_end, first) - 1
        if end == stages.early_end - 1 and f in whole_early:
            sketches[f] = whole_early[f]
        else:
            by_end.setdefault(end, []).append(f)
    for end, names in by_end.items():
        sketches.update(store.series_many(run, names, 0, end, EARLY_SKETCH_POINTS))
    for f, early in sketches.items():
        w = windows[f]
        steps = np.concatenate([early.steps, w.steps])
        values = np.concatenate([early.values, w.values])
        series[f] = as_series((steps, values))
    return series


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
    config = dict(store.run_config(run))
    stages = reg.stages_for(config)
    early = _early_fields(reg, fields) if stages.early_end > 0 else []
    # The whole-run statistics and the early-stage sketches do not depend on the windows (at any
    # length a run is long past its early stage): read beside them, each a wait on the store.
    with ThreadPoolExecutor(2, thread_name_prefix="rlvitals-cards") as pool:
        stats_read = pool.submit(store.stats, run, list(metric_ids))
        early_read = pool.submit(
            store.series_many, run, early, 0, stages.early_end - 1, EARLY_SKETCH_POINTS
        )
        windows = store.windows(run, fields, window)
        stats, whole_early = stats_read.result(), early_read.result()
    whole_run = {m: s for m, s in stats.items() if len(windows.get(m, ()))}
    series = _with_early_sketches(reg, store, run, windows, stages, whole_early)
    cards = []
    for metric_id in metric_ids:
        subset = {m: series[m] for m in inputs[metric_id] if m in series}
        stats_of = whole_run.get(metric_id)
        run_mean = None if stats_of is None else RunMean(stats_of.count, stats_of.mean)
        card = build_card(reg, metric_id, subset, config, lang, whole_run=run_mean)
        cards.append(labelled(card.to_dict(), lang))
    return cards
