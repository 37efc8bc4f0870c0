"""Step-space series for a panel: raw (bucket means), smoothed, and the healthy band's edges."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import registry
from registry.diagnosis.bands import basis_scale
from registry.diagnosis.stats import ema, ema_lag_points
from registry.model import STAGES

from .cards import stages_of_run
from .errors import BadRequest
from .history import HistoryStore, Points
from .jsonio import finite
from .stage_memo import StageMemo

__all__ = ["band_edges", "early_value", "series_payload"]

_EARLY_POINTS = 1000


def early_value(store: HistoryStore, run: str, field: str, stages: registry.Stages) -> float | None:
    """Mean of the run's early-stage values (bucketed in the store; never the raw history)."""
    if stages.early_end <= 0:
        return None
    p = store.series(run, field, 0, stages.early_end - 1, _EARLY_POINTS)
    v = p.values[np.isfinite(p.values)]
    return float(v.mean()) if v.size else None


def band_edges(
    metric: registry.Metric,
    steps: np.ndarray[Any, np.dtype[np.int64]],
    stages: registry.Stages,
    config: Mapping[str, Any],
    early: float | None,
) -> tuple[list[float | None], list[float | None]]:
    """The stage band's low and high at each step, scaled to the run; None where undeclared."""
    n = int(steps.size)
    low: list[float | None] = [None] * n
    high: list[float | None] = [None] * n
    if metric.bands is None or n == 0:
        return low, high
    scale = basis_scale(metric.bands.basis, config, early)
    if scale is None:
        return low, high
    stage_index = np.searchsorted(np.array([stages.early_end, stages.mid_end]), steps, side="right")
    for i, stage in enumerate(STAGES):
        band = metric.bands.for_stage(stage)
        if band is None:
            continue
        lo = None if band.low is None else band.low * scale
        hi = None if band.high is None else band.high * scale
        for j in np.flatnonzero(stage_index == i).tolist():
            low[j], high[j] = lo, hi
    return low, high


def series_payload(
    reg: registry.Registry,
    store: HistoryStore,
    run: str,
    field: str,
    metric: registry.Metric,
    *,
    points: int,
    smoothing: float,
    start: int | None,
    end: int | None,
    card_window: int,
    memo: StageMemo | None = None,
    rank: int | None = None,
) -> dict[str, Any]:
    """At most `points` rows `{step, raw, smooth, band_low, band_high}`, ascending by step; the
    band is the stage's the run's cards judge in (`cards.stages_of_run`, read with the cards'
    `card_window`).

    A series several ranks of a job logged is read from rank 0 (`history.ranks`), and each row
    also carries `rank_low` and `rank_high`: the lowest and highest value any rank logged in
    its bucket (a straggler's step time, one rank's exploding gradient). `ranks` lists the
    ranks that logged it and `rank` the one read; with `rank` given, that rank's series alone
    (BadRequest when that rank logged none of it)."""
    spread = store.rank_spread(run, field, start, end, points)
    if rank is not None:
        if rank not in spread.ranks:
            logged = ", ".join(map(str, spread.ranks)) or "none: one process logged it"
            raise BadRequest(
                f"parameter 'rank': rank {rank} logged no {field!r} in run {run!r} "
                f"(its ranks: {logged})"
            )
        p: Points = store.rank_series(run, field, rank, start, end, points)
    else:
        p = store.series(run, field, start, end, points)
    several = rank is None and len(spread.ranks) > 1
    steps, raw = p.steps[:points], p.values[:points]
    smooth = ema(raw, smoothing) if smoothing > 0 else raw
    config = store.run_config(run)
    low: list[float | None] = [None] * int(steps.size)
    high = list(low)
    if metric.bands is not None and steps.size:
        stages = stages_of_run(reg, store, run, card_window, memo)
        early = None
        if metric.bands.basis == "early_value":
            early = early_value(store, run, field, stages)
        low, high = band_edges(metric, steps, stages, config, early)
    rows = [
        {
            "step": s,
            "raw": finite(r),
            "smooth": finite(m),
            "band_low": lo,
            "band_high": hi,
        }
        for s, r, m, lo, hi in zip(
            steps.tolist(), raw.tolist(), smooth.tolist(), low, high, strict=True
        )
    ]
    if several:
        for row in rows:
            edges = spread.at(int(row["step"]))
            row["rank_low"] = None if edges is None else finite(edges[0])
            row["rank_high"] = None if edges is None else finite(edges[1])
    return {
        "run": run,
        "metric": field,
        "unit": metric.unit,
        "points": len(rows),
        "bucket_steps": p.bucket,
        "source_points": p.total,
        "smoothing": smoothing,
        "smoothing_lag_points": ema_lag_points(smoothing),
        "ranks": list(spread.ranks),
        "rank": rank if rank is not None else (min(spread.ranks) if several else None),
        "rows": rows,
    }
