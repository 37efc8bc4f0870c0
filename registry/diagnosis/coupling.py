"""Coupling: Pearson correlation between a metric and its related metrics over a recent window."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .stats import Series

__all__ = ["COUPLING_STEPS", "STRONG_R", "Coupling", "couplings", "pearson"]

COUPLING_STEPS = 200
STRONG_R = 0.7
MIN_POINTS = 5


@dataclass(frozen=True)
class Coupling:
    metric: str
    r: float
    points: int
    start_step: int
    end_step: int

    @property
    def strong(self) -> bool:
        return abs(self.r) > STRONG_R

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "r": self.r,
            "points": self.points,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "strong": self.strong,
        }


def pearson(a: Series, b: Series) -> tuple[float, int, int, int] | None:
    """r over the steps where both are finite, with the point count and first/last common step.

    None under five common points or when either side is constant there (r is undefined).
    """
    fa, fb = a.finite(), b.finite()
    common, ia, ib = np.intersect1d(fa.steps, fb.steps, assume_unique=True, return_indices=True)
    if common.size < MIN_POINTS:
        return None
    x = fa.values[ia] - fa.values[ia].mean()
    y = fb.values[ib] - fb.values[ib].mean()
    denom = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    if denom == 0.0:
        return None
    r = max(-1.0, min(1.0, float(np.dot(x, y)) / denom))
    return r, int(common.size), int(common[0]), int(common[-1])


def couplings(
    target: Series,
    others: Mapping[str, Series],
    window_steps: int = COUPLING_STEPS,
    end: int | None = None,
) -> tuple[Coupling, ...]:
    """r between `target` and each other series over `(end - window_steps, end]`, strongest first.

    `end` defaults to the target's last step. Pairs without enough common points are left out.
    """
    stop = target.last_step if end is None else end
    if stop is None:
        return ()
    t = target.window(window_steps, stop)
    out = []
    for name, other in others.items():
        res = pearson(t, other.window(window_steps, stop))
        if res is not None:
            out.append(Coupling(name, *res))
    return tuple(sorted(out, key=lambda c: -abs(c.r)))
