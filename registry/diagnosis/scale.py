"""Judgements against physical scales rather than a run's own mean: a critic's error against what
the rewards allow, and a Gaussian policy's spread against where it started.

- `value_divergence`: a TD / critic loss (or a Q value) is bounded by the return scale. With
  every estimate inside the range the rewards allow, |Q| <= R (R: the largest episode return
  seen, in absolute value; the discounted return from any state is no larger for rewards of one
  sign), a TD error is at most 2R and the canonical loss (½·MSE) at most 2R². A loss past that
  bound means the estimates left the achievable range: bootstrapped targets feeding on
  themselves. A loss also grown by orders of magnitude over its own early level rules out a
  reward scaling the return does not show (a scaled reward starts large and stays large).
- `spread_growth`: a diagonal Gaussian's entropy is Σ_i ½·ln(2πe) + ln σ_i, so a rise of
  d·ln 10 nats over the early level means every one of d action dimensions' std grew tenfold:
  the objective pays the policy to be random (an entropy bonus far too large) and actions
  become noise clipped at the action bounds. A fall of d·ln 1000 (std a thousandth) is a policy
  that no longer explores at all; healthy continuous policies converge by one order of
  magnitude (calibration corpus sb3_ppo_pendulum_healthy: std 0.97 -> 0.085).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .context import RunContext
from .stats import Series
from .tuning import Tuning

__all__ = [
    "GAUSSIAN_NATS",
    "RETURN_METRICS",
    "VALUE_METRICS",
    "SpreadGrowth",
    "ValueDivergence",
    "action_dims",
    "spread_growth",
    "spread_severity",
    "value_divergence",
    "value_severity",
]

GAUSSIAN_NATS = 0.5 * math.log(2.0 * math.pi * math.e)  # a unit Gaussian's entropy per dimension
EARLY_POINTS = 5  # the registry timing's baseline_points: a run's own early level
VALUE_METRICS = ("value_loss", "total_loss", "td_error", "q_value")
RETURN_METRICS = ("episodic_return", "raw_reward")


@dataclass(frozen=True)
class ValueDivergence:
    metric: str
    value: float  # the smaller of the last two points: held, not one spike
    early: float
    growth: float  # value / early
    bound: float | None  # 2R² for a loss, R for a Q value or TD error (None: no return logged)
    scale: float | None  # R

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "value": self.value,
            "early": self.early,
            "growth": self.growth,
            "bound": self.bound,
            "return_scale": self.scale,
        }


def value_severity(value: float, growth: float, bound: float | None, tuning: Tuning) -> str:
    """critical: past the bound and grown by orders of magnitude; warning: grown further while
    within reach of the bound (or with no return logged to bound it)."""
    if bound is not None and value > bound and growth >= tuning.value_growth_critical:
        return "critical"
    if growth >= tuning.value_growth_warning and (
        bound is None or value > tuning.value_bound_warning * bound
    ):
        return "warning"
    return "ok"


def _early(s: Series, after: int | None) -> float | None:
    f = s.finite()
    v = np.abs(f.values if after is None else f.values[f.steps >= after])
    v = v[v > 0]
    if v.size < EARLY_POINTS + 1:
        return None
    return float(np.median(v[:EARLY_POINTS]))


def return_scale(series: Mapping[str, Series]) -> float | None:
    """R: the largest |return| the run has logged (None without one)."""
    for m in RETURN_METRICS:
        s = series.get(m)
        if s is not None and len(s.finite()):
            r = float(np.max(np.abs(s.finite().values)))
            return r if r > 0 else None
    return None


def value_divergence(
    metric_id: str, s: Series, series: Mapping[str, Series], ctx: RunContext
) -> ValueDivergence | None:
    """The value-side reading of a TD / critic loss, TD error or Q value (None: not one, or too
    few points after the first update to have an early level)."""
    if metric_id not in VALUE_METRICS:
        return None
    early = _early(s, ctx.first_update)
    f = s.finite()
    if early is None or len(f) < 2:
        return None
    value = float(np.min(np.abs(f.values[-2:])))
    growth = value / early
    scale = return_scale(series)
    loss = metric_id in ("value_loss", "total_loss")
    bound = None if scale is None else (2.0 * scale * scale if loss else scale)
    return ValueDivergence(metric_id, value, early, growth, bound, scale)


def action_dims(ctx: RunContext, entropy: Series | None) -> int:
    """Action dimensions: the config's, else read off the first entropy of a policy starting
    at std 1 (SB3's log_std_init 0: d·½·ln(2πe) nats), else 1."""
    if ctx.action_dims:
        return ctx.action_dims
    if entropy is not None and len(entropy.finite()):
        first = float(entropy.finite().values[0])
        d = round(first / GAUSSIAN_NATS)
        if d >= 1 and abs(first - d * GAUSSIAN_NATS) <= 0.05 * d:
            return int(d)
    return 1


@dataclass(frozen=True)
class SpreadGrowth:
    """How far a Gaussian policy's entropy moved from its early level, per action dimension,
    as a factor on the std (exp of the per-dimension change)."""

    early: float
    value: float
    dims: int
    per_dim: float  # nats per dimension, value - early over dims

    @property
    def std_factor(self) -> float:
        return math.exp(self.per_dim)

    def to_dict(self) -> dict[str, object]:
        return {
            "early": self.early,
            "value": self.value,
            "dims": self.dims,
            "per_dim_nats": self.per_dim,
            "std_factor": self.std_factor,
        }


def spread_severity(per_dim: float, tuning: Tuning) -> str:
    if per_dim >= tuning.spread_critical_nats:
        return "critical"
    if per_dim >= tuning.spread_warning_nats or per_dim <= -tuning.collapse_warning_nats:
        return "warning"
    return "ok"


def spread_growth(s: Series, ctx: RunContext) -> SpreadGrowth | None:
    """A continuous policy's entropy against its early level, both ways (None: not continuous or
    too few points). Held two points: the nearer-to-early of the last two is judged."""
    if ctx.action_space != "continuous":
        return None
    f = s.finite()
    if len(f) < EARLY_POINTS + 1:
        return None
    early = float(np.mean(f.values[:EARLY_POINTS]))
    last = f.values[-2:]
    value = float(last[np.argmin(np.abs(last - early))])
    dims = action_dims(ctx, s)
    return SpreadGrowth(early, value, dims, (value - early) / dims)
