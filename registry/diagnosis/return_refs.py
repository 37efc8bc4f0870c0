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

from .context import RunContext, log_starts_mid_run
from .rules import SIGNIFICANCE, SMOOTH_FRACTION, SMOOTH_MIN
from .stats import Series
from .tuning import Tuning

__all__ = ["ReturnReference", "findings", "return_reference"]


@dataclass(frozen=True)
class ReturnReference:
    """What the return's references are measured from; `findings` judges them."""

    start: float
    best: float
    now: float
    held: float  # the higher of the last two rolling means: "below" must hold two points
    noise: float
    window: int  # points per rolling mean
    elapsed: float | None  # fraction of the planned run after the first update (None: no plan)
    points: int  # logged points after the first update
    random: float | None
    random_judged: bool  # the random level is known and the last window is after learning began
    improved: bool  # the best rolling mean rose above the start beyond the noise
    # the log began after the run did (`log_starts_mid_run`): whether the run improved before
    # is not in it, so "never improved" is not judged (worse than its start still is)
    mid_run: bool = False
    first_step: int = 0  # the first logged step

    def to_dict(self) -> dict[str, object]:
        return {
            "start": self.start,
            "best": self.best,
            "now": self.now,
            "held": self.held,
            "noise": self.noise,
            "window_points": self.window,
            "elapsed_fraction": self.elapsed,
            "points_after_first_update": self.points,
            "random": self.random,
            "random_judged": self.random_judged,
            "improved": self.improved,
            "log_starts_mid_run": self.mid_run,
        }


def findings(r: ReturnReference, tuning: Tuning) -> tuple[str, ...]:
    """Which of worse_than_start, never_improved, below_random hold."""
    out = []
    if r.held < r.start - max(r.noise, tuning.return_margin * abs(r.start)):
        out.append("worse_than_start")
    passed = (
        r.elapsed >= tuning.never_fraction
        if r.elapsed is not None
        else r.points >= tuning.never_points
    )
    if passed and not r.improved and not r.mid_run:
        out.append("never_improved")
    random = r.random if r.random_judged else None
    if random is not None and r.held < random - max(r.noise, tuning.return_margin * abs(random)):
        out.append("below_random")
    return tuple(out)


def return_reference(s: Series, ctx: RunContext) -> ReturnReference | None:
    """The return's references (None: too few points for a start and a present that do not
    overlap)."""
    f = s.finite()
    v = f.values
    k = max(SMOOTH_MIN, round(v.size * SMOOTH_FRACTION))
    if v.size < 2 * k + 1:
        return None
    rolling = np.convolve(v, np.ones(k) / k, mode="valid")
    sigma = float(np.std(np.diff(v))) / math.sqrt(2.0)
    noise = SIGNIFICANCE * math.sqrt(2.0) * sigma / math.sqrt(k)
    # learning begins with the first update, and for an epsilon-greedy learner once epsilon
    # reached its floor (returns before that are mostly those of random actions)
    starts = [x for x in (ctx.first_update, ctx.exploration_end) if x is not None]
    first = max(starts) if starts else int(f.steps[0])
    last = int(f.steps[-1])
    elapsed = None
    if ctx.planned_steps and ctx.planned_steps > first:
        elapsed = (last - first) / (ctx.planned_steps - first)
    judged = ctx.random_return is not None and (
        ctx.first_update is not None and int(f.steps[-k]) >= ctx.first_update
    )
    start, best = float(rolling[0]), float(rolling.max())
    return ReturnReference(
        start=start,
        best=best,
        now=float(rolling[-1]),
        held=float(rolling[-2:].max()),
        noise=noise,
        window=k,
        elapsed=elapsed,
        points=int(np.count_nonzero(f.steps >= first)),
        random=ctx.random_return,
        random_judged=judged,
        improved=best - start > max(noise, 1e-12),
        mid_run=log_starts_mid_run(ctx.planned_steps, f.steps),
        first_step=int(f.steps[0]),
    )
