"""Statistics of one metric's step series: current value, history, variation, trend and smoothing.

A series is a pair of arrays keyed by training step. Values may be NaN or infinite (a logged NaN
is evidence, not noise); every statistic here looks only at the finite points and says `None`
when there are too few of them, never a guessed number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "FloatArray",
    "IntArray",
    "Point",
    "RunMean",
    "Series",
    "SeriesLike",
    "Summary",
    "Trend",
    "as_series",
    "change_pct",
    "cv",
    "deviation_pct",
    "ema",
    "ema_lag_points",
    "ema_lag_steps",
    "latest",
    "mean",
    "median",
    "slope_per_1k",
    "std",
    "summarize",
    "trend",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Direction = Literal["up", "down", "flat"]

CV_STEPS = 100
RECENT_STEPS = 1000
EMA_MAX_WEIGHT = 0.999  # TensorBoard's SCALARS_SMOOTHING_MAX
_FLAT_T = 2.0  # |slope / standard error| below this is no trend
_FLAT_REL = 0.01  # a fitted change under 1 % of the level is no trend


@dataclass(frozen=True, eq=False)
class Series:
    """Steps (strictly increasing ints) and their values (float, may be NaN). Build with `as_series`."""

    steps: IntArray
    values: FloatArray

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def empty(self) -> bool:
        return self.steps.size == 0

    @property
    def last_step(self) -> int | None:
        return int(self.steps[-1]) if self.steps.size else None

    def finite(self) -> Series:
        keep = np.isfinite(self.values)
        return Series(self.steps[keep], self.values[keep])

    def window(self, steps: int, end: int | None = None) -> Series:
        """The points with `end - steps < step <= end` (`end` defaults to the last step)."""
        if self.empty:
            return self
        stop = self.last_step if end is None else end
        assert stop is not None
        lo = np.searchsorted(self.steps, stop - steps, side="right")
        hi = np.searchsorted(self.steps, stop, side="right")
        return Series(self.steps[lo:hi], self.values[lo:hi])

    def until(self, step: int) -> Series:
        hi = np.searchsorted(self.steps, step, side="right")
        return Series(self.steps[:hi], self.values[:hi])

    def before(self, step: int) -> Series:
        hi = np.searchsorted(self.steps, step, side="left")
        return Series(self.steps[:hi], self.values[:hi])

    def tail(self, points: int) -> Series:
        start = max(0, self.steps.size - points)
        return Series(self.steps[start:], self.values[start:])


SeriesLike = Series | tuple[npt.ArrayLike, npt.ArrayLike]


def as_series(data: SeriesLike) -> Series:
    """Sorted by step; a step logged twice keeps its last value (a re-logged step overwrites)."""
    if isinstance(data, Series):
        return data
    steps_in, values_in = data
    steps = np.asarray(steps_in, dtype=np.int64).reshape(-1)
    values = np.asarray(values_in, dtype=np.float64).reshape(-1)
    if steps.size != values.size:
        raise ValueError(f"steps ({steps.size}) and values ({values.size}) differ in length")
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    keep = np.append(steps[1:] != steps[:-1], True) if steps.size else np.zeros(0, dtype=bool)
    steps, values = steps[keep].copy(), values[keep].copy()
    steps.setflags(write=False)
    values.setflags(write=False)
    return Series(steps, values)


@dataclass(frozen=True)
class Point:
    step: int
    value: float


def latest(series: Series) -> Point | None:
    """The most recent finite point."""
    idx = np.flatnonzero(np.isfinite(series.values))
    if idx.size == 0:
        return None
    i = int(idx[-1])
    return Point(int(series.steps[i]), float(series.values[i]))


def _finite_values(series: Series) -> FloatArray:
    v = series.values
    return v[np.isfinite(v)]


def _mean(v: FloatArray) -> float:
    """Mean that is exact for a constant array (no rounding drift on a flat series)."""
    first = float(v[0])
    return first if bool(np.all(v == first)) else float(v.mean())


def mean(series: Series) -> float | None:
    v = _finite_values(series)
    return _mean(v) if v.size else None


def median(series: Series) -> float | None:
    v = _finite_values(series)
    return float(np.median(v)) if v.size else None


def std(series: Series) -> float | None:
    """Population standard deviation of the finite values (None under two points)."""
    v = _finite_values(series)
    return float(v.std()) if v.size >= 2 else None


def deviation_pct(value: float | None, reference: float | None) -> float | None:
    """(value - reference) in percent of |reference|; None when the reference is 0 or unknown."""
    if (
        value is None
        or reference is None
        or not math.isfinite(value)
        or not math.isfinite(reference)
    ):
        return None
    if reference == 0.0:
        return None
    return (value - reference) / abs(reference) * 100.0


def cv(series: Series) -> float | None:
    """Coefficient of variation std / |mean| of the finite values; None when the mean is 0."""
    v = _finite_values(series)
    if v.size < 2:
        return None
    m = _mean(v)
    if m == 0.0:
        return None
    if bool(np.all(v == v[0])):
        return 0.0
    return float(v.std()) / abs(m)


def _fit(series: Series) -> tuple[float, float, int] | None:
    """Least-squares slope per step, its standard error and the number of points."""
    f = series.finite()
    n = len(f)
    if n < 2:
        return None
    x = f.steps.astype(np.float64)
    x = x - x.mean()
    sxx = float(np.dot(x, x))
    if sxx == 0.0:
        return None
    y = f.values - f.values.mean()
    slope = float(np.dot(x, y)) / sxx
    if n < 3:
        return slope, math.inf, n
    resid = y - slope * x
    ssr = float(np.dot(resid, resid))
    return slope, math.sqrt(ssr / (n - 2) / sxx), n


def slope_per_1k(series: Series) -> float | None:
    """Least-squares slope of value on step, per 1000 steps."""
    fit = _fit(series)
    return None if fit is None else fit[0] * 1000.0


@dataclass(frozen=True)
class Trend:
    slope_per_1k: float
    direction: Direction
    t_stat: float | None
    points: int
    span_steps: int

    def to_dict(self) -> dict[str, object]:
        t = None if self.t_stat is None or not math.isfinite(self.t_stat) else self.t_stat
        return {
            "slope_per_1k": self.slope_per_1k,
            "direction": self.direction,
            "t_stat": t,
            "points": self.points,
            "span_steps": self.span_steps,
        }


def trend(series: Series) -> Trend | None:
    """Slope per 1k steps and its sign.

    `flat` unless the slope is at least two standard errors from zero and the fitted change over
    the span is at least 1 % of the level (so a noisy or tiny drift is not called a trend).
    """
    fit = _fit(series)
    if fit is None:
        return None
    slope, se, n = fit
    f = series.finite()
    span = int(f.steps[-1] - f.steps[0])
    t_stat = None if not math.isfinite(se) else (math.inf if se == 0.0 else slope / se)
    level = max(abs(float(f.values.mean())), float(np.abs(f.values).max()) * 1e-9, 1e-12)
    fitted_change = abs(slope) * span
    significant = t_stat is None or abs(t_stat) >= _FLAT_T
    direction: Direction = "flat"
    if slope != 0.0 and significant and fitted_change >= _FLAT_REL * level:
        direction = "up" if slope > 0 else "down"
    return Trend(slope * 1000.0, direction, t_stat, n, span)


def change_pct(series: Series) -> float | None:
    """Mean of the last quarter of the finite points vs the first quarter, in percent of the first.

    Quarters are counted in points (at least one each), so sparse or irregular logging still
    compares the oldest and newest parts of the window. Needs four points.
    """
    v = _finite_values(series)
    if v.size < 4:
        return None
    q = v.size // 4
    first = float(v[:q].mean())
    last = float(v[-q:].mean())
    return deviation_pct(last, first)


def ema(values: Sequence[float] | FloatArray, weight: float) -> FloatArray:
    """TensorBoard's debiased exponential moving average (`classicSmoothing`).

    `last = s*last + (1-s)*y; out = last / (1 - s^n)` over the finite points in logged order;
    non-finite points are output unchanged and neither update `last` nor count in `n`. A constant
    series is returned unchanged. The weight is clamped to [0, 0.999] (TensorBoard's maximum).
    """
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    out = y.copy()
    if y.size == 0:
        return out
    finite = np.isfinite(y)
    if np.all(y == y[0]):
        return out
    s = min(max(float(weight), 0.0), EMA_MAX_WEIGHT)
    if s == 0.0 or not finite.any():
        return out
    yf = y[finite]
    n = np.arange(1, yf.size + 1, dtype=np.float64)
    last = np.empty_like(yf)
    acc = 0.0
    for i, v in enumerate(yf.tolist()):
        acc = s * acc + (1.0 - s) * v
        last[i] = acc
    out[finite] = last / (1.0 - np.power(s, n))
    return out


def ema_lag_points(weight: float) -> float:
    """Mean lag, in logged points, of an EMA with this weight: s / (1 - s)."""
    s = min(max(float(weight), 0.0), EMA_MAX_WEIGHT)
    return s / (1.0 - s)


def ema_lag_steps(weight: float, steps: Sequence[int] | IntArray) -> float | None:
    """The lag in training steps: points of lag times the median spacing of the logged steps."""
    x = np.asarray(steps, dtype=np.int64)
    if x.size < 2:
        return None
    return ema_lag_points(weight) * float(np.median(np.diff(x)))


@dataclass(frozen=True)
class RunMean:
    """A metric's mean over its whole run and the finite points behind it, computed where the
    history lives (running sums kept at ingest, a database aggregate) when the series at hand is
    only the recent window of a long run."""

    points: int
    mean: float | None


@dataclass(frozen=True)
class Summary:
    """How the present compares with the run's own history.

    `mean` is the whole-run mean (`mean_points` finite points): the `whole_run` given to
    `summarize`, else the series' own mean. `median`, `window_mean` and `window_points` describe
    the series at hand (the window a caller fetched), `recent_*` its last `recent_steps` steps.
    `deviation_pct` is the latest value against `mean`.
    """

    points: int
    finite_points: int
    step: int | None
    value: float | None
    latest_is_finite: bool
    mean: float | None
    mean_points: int
    median: float | None
    window_mean: float | None
    window_points: int
    recent_mean: float | None
    recent_median: float | None
    recent_steps: int
    deviation_pct: float | None
    cv: float | None
    cv_steps: int
    trend: Trend | None


def summarize(
    series: Series,
    recent_steps: int = RECENT_STEPS,
    cv_steps: int = CV_STEPS,
    whole_run: RunMean | None = None,
) -> Summary:
    cur = latest(series)
    recent = series.window(recent_steps)
    window_mean = mean(series)
    finite_points = int(np.isfinite(series.values).sum())
    run = whole_run if whole_run is not None else RunMean(finite_points, window_mean)
    latest_finite = bool(series.values.size and math.isfinite(float(series.values[-1])))
    return Summary(
        points=len(series),
        finite_points=finite_points,
        step=None if cur is None else cur.step,
        value=None if cur is None else cur.value,
        latest_is_finite=latest_finite,
        mean=run.mean,
        mean_points=run.points,
        median=median(series),
        window_mean=window_mean,
        window_points=finite_points,
        recent_mean=mean(recent),
        recent_median=median(recent),
        recent_steps=recent_steps,
        deviation_pct=deviation_pct(None if cur is None else cur.value, run.mean),
        cv=cv(series.window(cv_steps)),
        cv_steps=cv_steps,
        trend=trend(recent),
    )
