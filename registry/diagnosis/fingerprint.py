"""Reward fingerprint (density, variance, consistency) and the reward-hacking sentinels.

Each sentinel compares the change of two series over the same window, using the rules'
`change_pct` (mean of the last quarter of the points vs the first quarter, in percent of the
first). Sentinel names match `rules.schema.json`'s `sentinel` values, so a card can tell when a
registry rule already covers the same pattern.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .stats import Series, change_pct

__all__ = [
    "EVAL_SENTINEL_STEPS",
    "FINGERPRINT_POINTS",
    "SENTINEL_STEPS",
    "RewardFingerprint",
    "Sentinel",
    "components_diverge",
    "length_rising_reward_flat",
    "refusal_rising_with_reward",
    "reward_fingerprint",
    "rm_rising_eval_not",
    "shaped_up_raw_down",
    "shaping_took_the_gain",
]

FINGERPRINT_POINTS = 50
SENTINEL_STEPS = 200
EVAL_SENTINEL_STEPS = 10_000
_MIN_POINTS = 8


@dataclass(frozen=True)
class RewardFingerprint:
    """Over the last `points` finite rewards: how often, how spread, how self-consistent."""

    points: int
    density: float
    mean: float
    variance: float
    consistency: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "points": self.points,
            "density": self.density,
            "mean": self.mean,
            "variance": self.variance,
            "consistency": self.consistency,
        }


def _lag1(v: np.ndarray[tuple[int], np.dtype[np.float64]]) -> float | None:
    if v.size < 3:
        return None
    c = v - v.mean()
    denom = float(np.dot(c, c))
    if denom == 0.0:
        return None
    return float(np.dot(c[:-1], c[1:])) / denom


def reward_fingerprint(
    series: Series, points: int = FINGERPRINT_POINTS
) -> RewardFingerprint | None:
    """Density = share of non-zero rewards; variance; consistency = lag-1 autocorrelation.

    None with fewer than three finite points. Consistency is None for a constant reward.
    """
    f = series.finite().tail(points)
    v = f.values
    if v.size < 3:
        return None
    return RewardFingerprint(
        points=int(v.size),
        density=float(np.count_nonzero(v)) / v.size,
        mean=float(v.mean()),
        variance=float(v.var()),
        consistency=_lag1(v),
    )


@dataclass(frozen=True)
class Sentinel:
    name: str
    fired: bool
    observed: dict[str, float | None] = field(default_factory=dict)
    window_steps: int = SENTINEL_STEPS
    reason: str | None = None
    falling: tuple[str, ...] = ()
    """The parts that fell, for `components_diverge`."""

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "fired": self.fired,
            "observed": dict(self.observed),
            "window_steps": self.window_steps,
            "reason": self.reason,
        }


def _changes(
    name: str,
    a: tuple[str, Series],
    b: tuple[str, Series],
    window_steps: int,
    min_points: int = _MIN_POINTS,
) -> tuple[float | None, float | None, Sentinel | None]:
    """change_pct of both over the window ending at their common last step, or a quiet Sentinel."""
    ends = [s.last_step for _, s in (a, b)]
    if None in ends:
        return None, None, Sentinel(name, False, {}, window_steps, "no data")
    end = min(e for e in ends if e is not None)
    wa, wb = a[1].window(window_steps, end), b[1].window(window_steps, end)
    short = [
        n for n, w in ((a[0], wa), (b[0], wb)) if int(np.isfinite(w.values).sum()) < min_points
    ]
    if short:
        reason = f"fewer than {min_points} finite points of {', '.join(short)} in the window"
        return None, None, Sentinel(name, False, {}, window_steps, reason)
    return change_pct(wa), change_pct(wb), None


def _gt(x: float | None, limit: float) -> bool:
    return x is not None and math.isfinite(x) and x > limit


def _lt(x: float | None, limit: float) -> bool:
    return x is not None and math.isfinite(x) and x < limit


def shaped_up_raw_down(
    shaped: Series,
    raw: Series,
    window_steps: int = SENTINEL_STEPS,
    rise_pct: float = 5.0,
    fall_pct: float = 5.0,
) -> Sentinel:
    """Shaped reward up by more than `rise_pct` % while raw reward fell by more than `fall_pct` %."""
    name = "reward_hacking"
    cs, cr, quiet = _changes(name, ("shaped", shaped), ("raw", raw), window_steps)
    if quiet:
        return quiet
    fired = _gt(cs, rise_pct) and _lt(cr, -fall_pct)
    return Sentinel(name, fired, {"shaped_change_pct": cs, "raw_change_pct": cr}, window_steps)


def length_rising_reward_flat(
    length: Series,
    reward: Series,
    window_steps: int = SENTINEL_STEPS,
    rise_pct: float = 20.0,
    flat_pct: float = 5.0,
) -> Sentinel:
    """Length up by more than `rise_pct` % while reward moved less than `flat_pct` % either way."""
    name = "length_hacking"
    cl, cr, quiet = _changes(name, ("length", length), ("reward", reward), window_steps)
    if quiet:
        return quiet
    fired = _gt(cl, rise_pct) and cr is not None and abs(cr) < flat_pct
    return Sentinel(name, fired, {"length_change_pct": cl, "reward_change_pct": cr}, window_steps)


def refusal_rising_with_reward(
    refusal: Series,
    reward: Series,
    window_steps: int = SENTINEL_STEPS,
    rise_pct: float = 20.0,
    reward_pct: float = 5.0,
) -> Sentinel:
    """Refusal rate up by more than `rise_pct` % while reward rose by more than `reward_pct` %."""
    name = "refusal"
    cf, cr, quiet = _changes(name, ("refusal", refusal), ("reward", reward), window_steps)
    if quiet:
        return quiet
    fired = _gt(cf, rise_pct) and _gt(cr, reward_pct)
    return Sentinel(name, fired, {"refusal_change_pct": cf, "reward_change_pct": cr}, window_steps)


def rm_rising_eval_not(
    rm_score: Series,
    eval_score: Series,
    window_steps: int = EVAL_SENTINEL_STEPS,
    rise_pct: float = 5.0,
    eval_pct: float = 1.0,
) -> Sentinel:
    """Reward-model score up by more than `rise_pct` % while the independent eval rose under `eval_pct` %.

    Evaluations are sparse, so the window is long and four points of each suffice.
    """
    name = "rm_overoptimization"
    rm, ev = ("rm_score", rm_score), ("eval_score", eval_score)
    cm, ce, quiet = _changes(name, rm, ev, window_steps, min_points=4)
    if quiet:
        return quiet
    fired = _gt(cm, rise_pct) and ce is not None and ce < eval_pct
    return Sentinel(name, fired, {"rm_change_pct": cm, "eval_change_pct": ce}, window_steps)


GAIN_SHARE = 0.25  # the task part earned under a quarter of the reward's gain
_SMOOTH_FRACTION, _SMOOTH_MIN, _SIGNIFICANCE = 0.1, 5, 3.0  # as the rules' drop_from_best


def shaping_took_the_gain(shaped: Series, raw: Series, share: float = GAIN_SHARE) -> Sentinel:
    """The reward optimised (`shaped`: the sum of every reward part) has risen beyond noise
    since the start, and its task part (`raw`) earned under `share` of that gain: the policy
    improves its reward through the parts that are not the task (a length or format bonus).
    Rolling means over 10 % of the points (at least 5), as the rules' drop_from_best; both
    series must cover the same steps."""
    name = "shaping_gain"
    common = np.intersect1d(shaped.finite().steps, raw.finite().steps)
    if common.size < 2 * _SMOOTH_MIN + 1:
        return Sentinel(name, False, {}, 0, "too few steps logged by both")
    ts = shaped.finite()
    tr = raw.finite()
    a = ts.values[np.searchsorted(ts.steps, common)]
    b = tr.values[np.searchsorted(tr.steps, common)]
    k = max(_SMOOTH_MIN, round(common.size * _SMOOTH_FRACTION))
    sigma = float(np.std(np.diff(a))) / math.sqrt(2.0)
    noise = _SIGNIFICANCE * math.sqrt(2.0) * sigma / math.sqrt(k)
    gain = float(a[-k:].mean() - a[:k].mean())
    task = float(b[-k:].mean() - b[:k].mean())
    observed: dict[str, float | None] = {
        "reward_gain": gain,
        "task_gain": task,
        "task_share": task / gain if gain > 0 else None,
        "noise": noise,
    }
    fired = gain > noise and task < share * gain
    return Sentinel(name, fired, observed, int(common[-1] - common[0]))


COMPONENT_POINTS = 40  # the recent points two reward parts are compared over
_COMPONENT_FALL = 0.25  # the falling part lost at least a quarter of its level


def components_diverge(components: Mapping[str, Series]) -> Sentinel:
    """Two parts of one reward moving apart: over the last `COMPONENT_POINTS` points logged by
    every part, one part's mean (last quarter against first quarter) rose and another's fell,
    each beyond three standard errors of the difference of two such means (the error from the
    part's point-to-point differences, as `drop_from_best`), the falling one by at least a
    quarter of its level. The policy is buying its reward from the part that rises at the cost
    of the other (a format reward rising while the accuracy reward falls): the seeds' raw vs
    shaped split, part by part, with no part named the task's."""
    name = "component_divergence"
    if len(components) < 2:
        return Sentinel(name, False, {}, 0, "fewer than two reward parts")
    common = None
    for s in components.values():
        steps = s.finite().steps
        common = steps if common is None else np.intersect1d(common, steps)
    assert common is not None
    common = common[-COMPONENT_POINTS:]
    if common.size < _MIN_POINTS:
        return Sentinel(name, False, {}, 0, "too few steps logged by every part")
    k = max(2, common.size // 4)
    moves: dict[str, tuple[float, float, float]] = {}  # part -> (change, noise, level)
    for part, s in components.items():
        f = s.finite()
        v = f.values[np.searchsorted(f.steps, common)]
        sigma = float(np.std(np.diff(v))) / math.sqrt(2.0)
        noise = 3.0 * math.sqrt(2.0) * sigma / math.sqrt(k)
        before = float(v[:k].mean())
        moves[part] = (float(v[-k:].mean()) - before, noise, abs(before))
    up = [p for p, (c, n, _) in moves.items() if c > max(n, 1e-12)]
    down = [
        p for p, (c, n, lvl) in moves.items() if -c > max(n, 1e-12) and -c >= _COMPONENT_FALL * lvl
    ]
    observed: dict[str, float | None] = {f"{p} change": moves[p][0] for p in sorted(moves)}
    fired = bool(up) and bool(down)
    reason = f"{', '.join(sorted(up))} up, {', '.join(sorted(down))} down" if fired else None
    return Sentinel(name, fired, observed, int(common[-1] - common[0]), reason, tuple(down))
