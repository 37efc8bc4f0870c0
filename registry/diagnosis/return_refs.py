"""The return against absolute references, not only its own mean (DESIGN.md, "Diagnosis
principles"): where the run started, whether it ever improved within the planned run, and a
random policy's return where it is known.

A run that never learned, or sits below where it started, has a return that is flat or
quiet against its own mean: a card comparing only with the run's mean calls it ok. The same
rolling mean and noise as `drop_from_best` (rules.py) are used: a rolling mean over 10 % of the
points so far (at least 5), and a difference counts when it exceeds three standard errors of
the difference of two rolling means.

- worse than start: the last two rolling means below the first one by more than the noise and
  by a tenth of the start's magnitude (a dip a person would call a regression, not a wobble);
- never improved: no rolling mean ever above the start by more than the noise, once half of the
  planned run after the first update has passed (with no planned length: 40 logged points after
  it, the length of a short run at one point per rollout);
- below random: the last two rolling means below the random policy's return (the run config's
  `env` in `registry/random_returns.yaml`, or the user's `random_return`) by the same margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .context import RunContext
from .rules import SIGNIFICANCE, SMOOTH_FRACTION, SMOOTH_MIN
from .stats import Series

__all__ = ["ReturnReference", "return_reference"]

MARGIN_FRACTION = 0.1
NEVER_FRACTION = 0.5
NEVER_POINTS = 40


@dataclass(frozen=True)
class ReturnReference:
    start: float
    best: float
    now: float
    noise: float
    window: int  # points per rolling mean
    horizon_passed: bool  # far enough into the run to call "never improved"
    random: float | None
    worse_than_start: bool
    never_improved: bool
    below_random: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "start": self.start,
            "best": self.best,
            "now": self.now,
            "noise": self.noise,
            "window_points": self.window,
            "random": self.random,
            "worse_than_start": self.worse_than_start,
            "never_improved": self.never_improved,
            "below_random": self.below_random,
        }


def _horizon_passed(s: Series, ctx: RunContext) -> bool:
    first = ctx.first_update if ctx.first_update is not None else int(s.steps[0])
    last = int(s.steps[-1])
    if ctx.planned_steps and ctx.planned_steps > first:
        return (last - first) >= NEVER_FRACTION * (ctx.planned_steps - first)
    return int(np.count_nonzero(s.steps >= first)) >= NEVER_POINTS


def return_reference(s: Series, ctx: RunContext) -> ReturnReference | None:
    """The return's references (None: too few points for a start, a best and a present that do
    not overlap)."""
    f = s.finite()
    v = f.values
    k = max(SMOOTH_MIN, round(v.size * SMOOTH_FRACTION))
    if v.size < 2 * k + 1:
        return None
    rolling = np.convolve(v, np.ones(k) / k, mode="valid")
    sigma = float(np.std(np.diff(v))) / math.sqrt(2.0)
    noise = SIGNIFICANCE * math.sqrt(2.0) * sigma / math.sqrt(k)
    start = float(rolling[0])
    best = float(rolling.max())
    now = float(rolling[-1])
    held = float(rolling[-2:].max())  # both of the last two rolling means, for "below"
    margin = max(noise, MARGIN_FRACTION * abs(start))
    # "now" must not overlap the start window: the last rolling mean starts after it
    worse = v.size >= 2 * k + 1 and held < start - margin
    passed = _horizon_passed(f, ctx)
    never = passed and best - start <= max(noise, 1e-12)
    random = ctx.random_return
    below = False
    if random is not None and ctx.first_update is not None and f.steps[-k] >= ctx.first_update:
        below = held < random - max(noise, MARGIN_FRACTION * abs(random))
    return ReturnReference(start, best, now, noise, k, passed, random, worse, never, below)
