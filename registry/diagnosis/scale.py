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
    latest: float  # |latest value|
    held: float  # the smaller |value| of the last two points: past the bound for both
    early: float | None  # its early level after the first update (None: too few points yet)
    bound: float | None  # 2R² for a loss, R for a Q value or TD error (None: no return logged)
    scale: float | None  # R

    @property
    def growth(self) -> float | None:
        return None if self.early is None else self.latest / self.early

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "value": self.latest,
            "held": self.held,
            "early": self.early,
            "growth": self.growth,
            "bound": self.bound,
            "return_scale": self.scale,
        }


def value_severity(
    latest: float, held: float, early: float | None, bound: float | None, tuning: Tuning
) -> str:
    """critical: past the bound the returns allow for the last two points (a physical fact,
    judged from the first points); warning: past it once, or both of the last two points grown
    by orders of magnitude over the early level while within reach of it (or with no return
    logged to bound it). Growth must hold two points: a healthy critic's loss spikes at one
    terminal transition (calibration corpus sb3_a2c_cartpole_healthy's last point)."""
    if bound is not None and held > bound:
        return "critical"
    if bound is not None and latest > bound:
        return "warning"
    if (
        early is not None
        and early > 0
        and held / early >= tuning.value_growth_warning
        and (bound is None or held > tuning.value_bound_warning * bound)
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
    """The value-side reading of a TD / critic loss, TD error or Q value (None: not one, or
    not yet logged)."""
    if metric_id not in VALUE_METRICS:
        return None
    if metric_id == "total_loss" and ("policy_loss" in series or ctx.family != "off_policy"):
        return None  # the total loss is a TD loss only where it is the whole loss (DQN)
    f = s.finite()
    if not len(f):
        return None
    last = np.abs(f.values[-2:])
    # An LLM trainer logs its reward as a batch mean (0.01 when one answer in a hundred is
    # right), far below the largest return one sample earns, which is what bounds a value: no
    # bound from it (a fresh value head's loss starts far above any such figure and falls:
    # calibration/llm_corpus, verl PPO). Growth over the early level still judges it.
    scale = None if ctx.action_space == "token" else return_scale(series)
    loss = metric_id in ("value_loss", "total_loss")
    bound = None if scale is None else (2.0 * scale * scale if loss else scale)
    held = float(np.min(last)) if last.size == 2 else 0.0
    early = _early(s, ctx.first_update)
    return ValueDivergence(metric_id, float(last[-1]), held, early, bound, scale)


@dataclass(frozen=True)
class SpreadGrowth:
    """How far a Gaussian policy's spread moved from where it started, per action dimension,
    as nats (a factor exp(per_dim) on the std): read off its std when the run logs one, else
    off its entropy."""

    early: float
    value: float
    per_dim: float  # nats per dimension (ln of the std factor)
    source: str  # "action_std" or "policy_entropy"
    dims: int  # dimensions the entropy change is spread over (1 for a std)

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
            "source": self.source,
        }


def spread_severity(per_dim: float, tuning: Tuning) -> str:
    if per_dim >= tuning.spread_critical_nats:
        return "critical"
    if per_dim >= tuning.spread_warning_nats or per_dim <= -tuning.collapse_warning_nats:
        return "warning"
    return "ok"


START_POINTS = 1  # where the policy started: its first logged spread (after one rollout's update)


def action_dims(ctx: RunContext, entropy: Series) -> int:
    """Action dimensions the entropy is a sum over: the config's, else an estimate from the
    first entropy (a unit Gaussian has ½·ln(2πe) nats per dimension) that never counts fewer
    dimensions than there are, so it never makes the judgement more sensitive."""
    if ctx.action_dims:
        return ctx.action_dims
    first = float(entropy.finite().values[0]) if len(entropy.finite()) else 0.0
    return max(1, math.ceil(first / GAUSSIAN_NATS - 0.25))


def spread_growth(metric_id: str, s: Series, ctx: RunContext) -> SpreadGrowth | None:
    """A continuous policy's spread against where it started, both ways (None: not a Gaussian
    policy's std or entropy, or too few points). Held two points: the nearer-to-start of the
    last two is judged."""
    if ctx.action_space != "continuous" or metric_id not in ("action_std", "policy_entropy"):
        return None
    f = s.finite()
    if len(f) < START_POINTS + 2:  # a start and two points held after it
        return None
    v = f.values
    if metric_id == "action_std":
        if np.any(v[:START_POINTS] <= 0):
            return None
        early = float(np.mean(np.log(v[:START_POINTS])))
        last = np.log(np.maximum(v[-2:], 1e-300))
        dims = 1
    else:
        early = float(np.mean(v[:START_POINTS]))
        last = v[-2:]
        dims = action_dims(ctx, s)
    value = float(last[np.argmin(np.abs(last - early))])
    return SpreadGrowth(early, value, (value - early) / dims, metric_id, dims)
