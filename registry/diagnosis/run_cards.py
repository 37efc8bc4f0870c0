"""A run's cards and its status, as every entry point builds them.

The datasource (`/api/cards`, the run page), the diagnosis replay (`rlvitals evaluate`) and the
report all ask `diagnose()`: one run context read from everything the run logged (never from
the handful of series one card happens to read), the same prepared series, one `build_card()`
per metric. `run_status()` is the run's verdict from its cards: resource readings (throughput,
GPU) describe the machine and never set it (DESIGN.md, "Diagnosis principles").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..catalog import Registry
from .card import (
    STATUSES,
    Card,
    CardOptions,
    Status,
    all_rules,
    build_card,
    context_of,
    prepare_series,
    with_context,
)
from .context import RunContext
from .stats import RunMean, SeriesLike, as_series

__all__ = ["carded_metrics", "diagnose", "run_status", "verdict_cards"]

_RANK: dict[str, int] = {"no_data": -1, "ok": 0, "watch": 1, "warning": 2, "critical": 3}


def carded_metrics(registry: Registry, logged: Iterable[str]) -> tuple[str, ...]:
    """The metrics a run's cards show, in registry order: every core metric (a core metric the
    run does not log reads `no_data`, which says so), then every other registry metric the run
    logged (a DQN's TD loss is `total_loss`, not a core metric, and still needs its card).
    Metrics rlvitals derives (KL / clip epsilon, the entropy's rate of change) get none: the
    cards of what they derive from read them (the KL card its zone, the entropy card its
    gradient), in the run's own step unit."""
    have = set(logged)
    return tuple(
        m.id
        for m in registry.metrics
        if m.pattern is None and (m.core or (m.id in have and m.kind != "derived"))
    )


def diagnose(
    registry: Registry,
    series: Mapping[str, SeriesLike],
    config: Mapping[str, Any] | None,
    metric_ids: Sequence[str],
    lang: str = "en",
    whole_run: Mapping[str, RunMean] | None = None,
    options: CardOptions | None = None,
    context: RunContext | None = None,
) -> list[Card]:
    """One card per metric of `metric_ids`, each judged with every series of the run: `series`
    holds everything the run logged (a window of it for a long run; NaN where a value was
    non-finite), `whole_run` the whole-run mean of a metric when `series` is a window."""
    ser = {k: as_series(v) for k, v in series.items()}
    ctx = context if context is not None else context_of(registry, config, ser)
    cfg = with_context(config, ctx, ser)
    ready = prepare_series(registry, ctx, ser)
    rules = all_rules(registry, ready, cfg, ctx)
    means = whole_run or {}
    return [
        build_card(
            registry,
            m,
            ready,
            cfg,
            lang,
            options=options,
            whole_run=means.get(m),
            context=ctx,
            prepared=True,
            rules=rules,
        )
        for m in metric_ids
    ]


def verdict_cards(registry: Registry, cards: Iterable[Card]) -> list[Card]:
    """The cards that make the run's verdict: all but resource readings."""
    return [c for c in cards if registry.metric(c.metric).layer != "resource"]


def run_status(registry: Registry, cards: Iterable[Card]) -> tuple[Status, tuple[Card, ...]]:
    """The run's status (its worst training-health card; `no_data` without any) and the cards
    at it."""
    judged = verdict_cards(registry, cards)
    worst = max((_RANK[c.status] for c in judged), default=-1)
    status = next(s for s in STATUSES if _RANK[s] == worst)
    return status, tuple(c for c in judged if _RANK[c.status] == worst)
