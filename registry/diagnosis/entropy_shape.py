"""The shape of an entropy trajectory, and its gradient as an early warning.

The absolute entropy matters less than how it moves. Shapes, checked in this order:

A drop counts once at least three points have stayed at the new level (a fall in the very last
points is a single excursion until then).

- `staircase_collapse`: two or more drops of similar size (largest / smallest <= 2.5) separated
  by flat segments, together making up the net decline;
- `cliff`: one drop making up most of the net decline (collapse in one go);
- `sawtooth`: periodic swings around the trend: the detrended series changes sign at least four
  times and its autocorrelation has a peak >= 0.4 at a lag of at least 3 points (the period);
- `gradual_decay`: a significant negative slope that a straight line explains (R^2 >= 0.6)
  with a decline of at least 5 % of the starting level: healthy learning;
- `plateau`: the fitted change over the window is under 5 % of the level;
- `rising`, or `irregular` when none of these fits; `insufficient` under 12 finite points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .stats import FloatArray, Series

__all__ = ["Drop", "EntropyGradient", "EntropyShape", "classify_entropy", "entropy_gradient"]

ShapeKind = Literal[
    "staircase_collapse",
    "cliff",
    "sawtooth",
    "gradual_decay",
    "plateau",
    "rising",
    "irregular",
    "insufficient",
]

MIN_POINTS = 12
MAX_POINTS = 400
_DROP_SIGMAS = 4.0
_DROP_RANGE = 0.1  # a drop is at least 10 % of the window's range
_MEMBER_RANGE = 0.03  # diffs below -3 % of the range join a drop spread over several points
_SIMILAR = 2.5
_SETTLE_POINTS = 3  # points at the new level after a drop before it counts
_FLAT_SEGMENT = 0.35  # change within a segment, as a fraction of the mean drop
_ACF_PEAK = 0.4
_MIN_PERIOD = 3
_MIN_SIGN_CHANGES = 4
_SWING_REL = 0.03
_DECAY_R2 = 0.6
_CHANGE_REL = 0.05
_T_SIGNIFICANT = 3.0


@dataclass(frozen=True)
class Drop:
    step: int
    size: float


@dataclass(frozen=True)
class EntropyShape:
    kind: ShapeKind
    points: int
    start_step: int | None = None
    end_step: int | None = None
    slope_per_1k: float | None = None
    r2: float | None = None
    net_change: float | None = None
    drops: tuple[Drop, ...] = ()
    period_steps: float | None = None
    acf_peak: float | None = None
    sign_changes: int | None = None

    @property
    def healthy(self) -> bool:
        return self.kind == "gradual_decay"

    @property
    def collapse(self) -> bool:
        return self.kind in ("staircase_collapse", "cliff")

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "points": self.points,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "slope_per_1k": self.slope_per_1k,
            "r2": self.r2,
            "net_change": self.net_change,
            "drops": [{"step": d.step, "size": d.size} for d in self.drops],
            "period_steps": self.period_steps,
            "acf_peak": self.acf_peak,
            "sign_changes": self.sign_changes,
        }


def _line(x: FloatArray, y: FloatArray) -> tuple[float, float, float, float]:
    """Slope, intercept, R^2 and slope t-statistic of a least-squares line."""
    xc = x - x.mean()
    sxx = float(np.dot(xc, xc))
    slope = float(np.dot(xc, y - y.mean())) / sxx if sxx else 0.0
    intercept = float(y.mean()) - slope * float(x.mean())
    resid = y - (slope * x + intercept)
    ssr = float(np.dot(resid, resid))
    sst = float(np.dot(y - y.mean(), y - y.mean()))
    r2 = 1.0 - ssr / sst if sst > 0 else 0.0
    se = math.sqrt(ssr / (x.size - 2) / sxx) if sxx and x.size > 2 else math.inf
    t = slope / se if se > 0 else (math.inf if slope else 0.0) * (1 if slope >= 0 else -1)
    return slope, intercept, r2, t


def _drops(x: FloatArray, y: FloatArray, span: float) -> list[tuple[int, int, float]]:
    """Drop events as (first diff index, last diff index, size > 0)."""
    d = np.diff(y)
    dc = d - float(np.median(d))
    sigma = 1.4826 * float(np.median(np.abs(dc)))
    member = dc < -max(3.0 * sigma, _MEMBER_RANGE * span)
    events: list[tuple[int, int, float]] = []
    i = 0
    while i < member.size:
        if not member[i]:
            i += 1
            continue
        j = i
        while j + 1 < member.size and member[j + 1]:
            j += 1
        size = -float(d[i : j + 1].sum())
        settled = y.size - (j + 2) >= _SETTLE_POINTS  # a drop in the last points is one excursion
        if settled and size >= max(_DROP_SIGMAS * sigma * math.sqrt(j - i + 1), _DROP_RANGE * span):
            events.append((i, j, size))
        i = j + 1
    return events


def _flat_between(
    x: FloatArray, y: FloatArray, events: list[tuple[int, int, float]], drop: float
) -> bool:
    """Every segment between (and around) the drops changes by less than a fraction of a drop."""
    bounds = [0] + [e[1] + 1 for e in events]
    ends = [e[0] + 1 for e in events] + [y.size]
    for lo, hi in zip(bounds, ends, strict=True):
        if hi - lo < 3:
            continue
        slope, _, _, _ = _line(x[lo:hi], y[lo:hi])
        if abs(slope) * float(x[hi - 1] - x[lo]) > _FLAT_SEGMENT * drop:
            return False
    return True


def _acf_peak(r: FloatArray) -> tuple[int, float] | None:
    """Lag and height of the first autocorrelation peak after the ACF first goes negative."""
    r0 = r - r.mean()
    denom = float(np.dot(r0, r0))
    if denom == 0.0:
        return None
    n = r0.size
    acf = np.array([float(np.dot(r0[:-k], r0[k:])) / denom for k in range(1, n // 2 + 1)])
    negative = np.flatnonzero(acf < 0)
    if negative.size == 0:
        return None
    start = int(negative[0])
    if start + 1 >= acf.size:
        return None
    k = start + int(np.argmax(acf[start:]))
    return k + 1, float(acf[k])


def classify_entropy(series: Series, max_points: int = MAX_POINTS) -> EntropyShape:
    """Classify the last `max_points` finite points of an entropy series."""
    f = series.finite().tail(max_points)
    n = len(f)
    if n < MIN_POINTS:
        return EntropyShape("insufficient", n)
    x = f.steps.astype(np.float64)
    y = f.values
    slope, intercept, r2, t = _line(x, y)
    edge = max(1, n // 10)
    net = float(y[-edge:].mean() - y[:edge].mean())
    span = float(y.max() - y.min())
    level = max(float(np.abs(y).mean()), 1e-12)

    def shape(
        kind: ShapeKind,
        drops: tuple[Drop, ...] = (),
        period: float | None = None,
        acf: float | None = None,
        sign_changes: int | None = None,
    ) -> EntropyShape:
        return EntropyShape(
            kind,
            n,
            int(f.steps[0]),
            int(f.steps[-1]),
            slope * 1000.0,
            r2,
            net,
            drops,
            period,
            acf,
            sign_changes,
        )

    if span <= 1e-12 * max(level, 1.0):
        return shape("plateau")
    events = _drops(x, y, span)
    drops = tuple(Drop(int(f.steps[e[1] + 1]), e[2]) for e in events)
    total = sum(e[2] for e in events)
    decline = -net
    if events and decline > 0 and 0.6 * decline <= total <= 1.5 * decline:
        sizes = [e[2] for e in events]
        similar = len(events) >= 2 and max(sizes) <= _SIMILAR * min(sizes)
        if similar and _flat_between(x, y, events, total / len(events)):
            return shape("staircase_collapse", drops)
        if len(events) == 1:
            return shape("cliff", drops)
    resid = y - (slope * x + intercept)
    signs = np.sign(resid[resid != 0])
    sign_changes = int(np.count_nonzero(signs[1:] != signs[:-1]))
    peak = _acf_peak(resid)
    if (
        peak is not None
        and peak[1] >= _ACF_PEAK
        and peak[0] >= _MIN_PERIOD
        and sign_changes >= _MIN_SIGN_CHANGES
        and float(resid.std()) >= _SWING_REL * level
    ):
        period = peak[0] * float(np.median(np.diff(x)))
        return shape("sawtooth", (), period, peak[1], sign_changes)
    fitted = slope * float(x[-1] - x[0])
    start_level = max(abs(slope * float(x[0]) + intercept), 1e-12)
    if (
        slope < 0
        and t <= -_T_SIGNIFICANT
        and r2 >= _DECAY_R2
        and -fitted >= _CHANGE_REL * start_level
    ):
        return shape("gradual_decay", drops)
    if abs(fitted) < _CHANGE_REL * level:
        return shape("plateau")
    if slope > 0 and t >= _T_SIGNIFICANT:
        return shape("rising")
    return shape("irregular", drops)


@dataclass(frozen=True)
class EntropyGradient:
    """d entropy / d step over the last points, against the slope of the history before them."""

    per_step: float
    baseline_per_step: float | None
    t_stat: float
    points: int
    start_step: int
    end_step: int
    steps_to_zero: float | None
    warning: bool

    def to_dict(self) -> dict[str, object]:
        t = self.t_stat if math.isfinite(self.t_stat) else None
        return {
            "per_step": self.per_step,
            "per_1k": self.per_step * 1000.0,
            "baseline_per_step": self.baseline_per_step,
            "t_stat": t,
            "points": self.points,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "steps_to_zero": self.steps_to_zero,
            "warning": self.warning,
        }


def entropy_gradient(
    series: Series, window_points: int = 20, factor: float = 3.0
) -> EntropyGradient | None:
    """The entropy gradient over the last `window_points` finite points.

    Warns when it is significantly negative (t <= -3) and at least `factor` times steeper than
    the slope of the earlier history (or the earlier history was flat or rising). Needs at least
    `window_points` earlier points to compare with, so a short run never warns.
    """
    f = series.finite()
    if len(f) < max(window_points, 3):
        return None
    recent = f.tail(window_points)
    x = recent.steps.astype(np.float64)
    slope, _, _, t = _line(x, recent.values)
    history = f.before(int(recent.steps[0]))
    baseline = None
    if len(history) >= window_points:
        baseline = _line(history.steps.astype(np.float64), history.values)[0]
    steep = baseline is not None and (baseline >= 0 or abs(slope) >= factor * abs(baseline))
    warning = slope < 0 and t <= -_T_SIGNIFICANT and steep
    value = float(recent.values[-1])
    to_zero = value / -slope if slope < 0 and value > 0 else None
    return EntropyGradient(
        slope,
        baseline,
        t,
        len(recent),
        int(recent.steps[0]),
        int(recent.steps[-1]),
        to_zero,
        warning,
    )
