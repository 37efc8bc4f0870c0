"""Diagnosis cards for a run: fetch the windows a card reads and the whole-run mean of each
carded metric (from the store's running statistics or a server-side aggregate, never the raw
history), then ask the registry's engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import registry
from exporter.schema import nonfinite_field
from registry.diagnosis import Card
from registry.diagnosis.card import context_of, run_stages
from registry.diagnosis.run_cards import carded_metrics, diagnose
from registry.diagnosis.stats import RunMean, Series, as_series

from .card_words import labelled
from .history import FieldStats, HistoryStore, Points, metric_of_field
from .stage_memo import StageMemo

__all__ = [
    "EARLY_SKETCH_POINTS",
    "card_inputs",
    "cards_for",
    "cards_in",
    "run_cards",
    "stages_of_run",
]

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


def _with_nonfinite(
    series: dict[str, Series], windows: Mapping[str, Points], marks: Mapping[str, str]
) -> None:
    """Each metric's non-finite values put back as NaN at their steps (the store keeps them as
    `<field>/nonfinite` counts, never as values): a card then tells "every value was NaN" from
    "nothing was logged". Marks older than the metric's window are left out with it."""
    for metric, mark in marks.items():
        bad = windows.get(mark)
        if bad is None or not len(bad):
            continue
        have = series.get(metric)
        steps = bad.steps
        if have is not None and len(have):
            steps = steps[(steps >= have.steps[0]) & ~np.isin(steps, have.steps)]
            if not steps.size:
                continue
            both = np.concatenate([have.steps, steps])
            values = np.concatenate([have.values, np.full(steps.size, np.nan)])
        else:
            both, values = steps, np.full(steps.size, np.nan)
        order = np.argsort(both, kind="stable")
        series[metric] = as_series((both[order], values[order]))


def _card_series(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    fields: Sequence[str],
    window: int,
    stats_ids: Sequence[str],
) -> tuple[dict[str, Series], dict[str, Any], Mapping[str, FieldStats]]:
    """The series a card is judged on (each field's last `window` points, a sketch of the early
    stage before it where the metric is judged against its early value, NaN where a value was
    non-finite), the run config, and the whole-run statistics of `stats_ids`."""
    # a store answers an unknown field with no points: every metric's marks are asked for
    marks = {f: nonfinite_field(f) for f in fields if metric_of_field(reg, f) is not None}
    config = dict(store.run_config(run))
    stages = reg.stages_for(config)
    early = _early_fields(reg, fields) if stages.early_end > 0 else []
    wanted = [*fields, *marks.values()]
    if store.kind == "memory":  # nothing to wait on: no threads
        stats = store.stats(run, stats_ids)
        whole_early = store.series_many(run, early, 0, stages.early_end - 1, EARLY_SKETCH_POINTS)
        windows = store.windows(run, wanted, window)
    else:
        # The whole-run statistics and the early-stage sketches do not depend on the windows (at
        # any length a run is long past its early stage): read beside them, each a wait on the
        # store.
        with ThreadPoolExecutor(2, thread_name_prefix="rlvitals-cards") as pool:
            stats_read = pool.submit(store.stats, run, stats_ids)
            early_read = pool.submit(
                store.series_many, run, early, 0, stages.early_end - 1, EARLY_SKETCH_POINTS
            )
            windows = store.windows(run, wanted, window)
            stats, whole_early = stats_read.result(), early_read.result()
    values = {f: windows[f] for f in fields if f in windows}
    series = _with_early_sketches(reg, store, run, values, stages, whole_early)
    _with_nonfinite(series, windows, marks)
    series = {f: s for f, s in series.items() if len(s)}
    whole_run = {m: s for m, s in stats.items() if len(windows.get(m, ()))}
    return series, config, whole_run


def _logged_metrics(reg: registry.Registry, store: HistoryStore, run: str) -> list[str]:
    """What the run logged (not its hyperparameters, stored once at step 0): registry metrics
    and members of their families (`reward_component/<name>`: a run config's task_reward names
    one)."""
    return [f for f in store.logged_fields(run) if metric_of_field(reg, f) is not None]


def run_cards(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric_ids: Sequence[str] | None,
    lang: str,
    window: int,
) -> list[Card]:
    """One card per metric (None: `carded_metrics`, the run's own), judged with the last
    `window` points of everything the run logged and the whole-run mean of each metric carded:
    what `registry.diagnosis.diagnose` needs, read from any history store."""
    ids, series, config, whole_run = _card_reading(reg, store, run, metric_ids, window)
    return diagnose(reg, series, config, ids, lang, whole_run)


def _card_reading(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric_ids: Sequence[str] | None,
    window: int,
) -> tuple[list[str], dict[str, Series], dict[str, Any], dict[str, RunMean]]:
    """What `run_cards` reads from the store: the metrics carded, their series, the run config
    and the whole-run means."""
    logged = _logged_metrics(reg, store, run)
    ids = list(carded_metrics(reg, logged) if metric_ids is None else metric_ids)
    needed = {f for m in ids for f in card_inputs(reg, m)}
    fields = list(dict.fromkeys([*logged, *(f for f in needed if f not in logged)]))
    series, config, stats = _card_series(reg, store, run, fields, window, ids)
    whole_run = {m: RunMean(s.count, s.mean) for m, s in stats.items()}
    return ids, series, config, whole_run


def stages_of_run(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    window: int,
    memo: StageMemo | None = None,
) -> registry.Stages:
    """The stages the run's cards judge it in (`registry.diagnosis.run_stages`), for a chart
    that shades a stage's band: its context measured as the cards measure it, from the same
    reads of the metrics that set it (the registry's update metrics the run logged, whose
    spacing is its cadence; every metric when it logged none of them). With `memo`, kept while
    the run's newest step stays the same."""
    if memo is not None:
        return memo.stages(store, run, lambda: stages_of_run(reg, store, run, window))
    logged = _logged_metrics(reg, store, run)
    updates = set(reg.update_metrics())
    fields = [f for f in logged if f in updates] or logged
    series, config, _ = _card_series(reg, store, run, fields, window, [])
    return run_stages(reg, config, context_of(reg, config, series))


def cards_for(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric_ids: Sequence[str] | None,
    lang: str,
    window: int,
) -> list[dict[str, Any]]:
    """`run_cards` as the JSON the datasource answers, with the words of `lang`."""
    return [
        labelled(c.to_dict(), lang) for c in run_cards(reg, store, run, metric_ids, lang, window)
    ]


def cards_in(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    metric_ids: Sequence[str] | None,
    langs: Sequence[str],
    window: int,
) -> dict[str, list[dict[str, Any]]]:
    """`cards_for` in each of `langs`, the store read once: a card is judged the same in every
    language, only its words differ (the report shows both; reading the windows is most of a
    card's cost)."""
    ids, series, config, whole_run = _card_reading(reg, store, run, metric_ids, window)
    return {
        lang: [
            labelled(c.to_dict(), lang) for c in diagnose(reg, series, config, ids, lang, whole_run)
        ]
        for lang in langs
    }
