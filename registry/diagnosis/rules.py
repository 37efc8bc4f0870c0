"""Evaluate the registry's multi-metric rules over step windows.

At an evaluation point (a step where any of the rule's metrics was logged) each condition's
statistic is computed from the rule's window `(step - window, step]` of its metric's finite
points; the conjunction holds when every metric has at least `min_points` finite points there and
every condition holds. A rule fires when the conjunction held at its last `for_steps` evaluation
points in a row. Statistics (see `rules.schema.json`): last, mean, min, max, std (population),
cv = std / |mean|, slope_per_1k, change_pct (last quarter of the points vs the first quarter, in
percent of the first), abs_change_pct, outside_band (1 when the latest value is outside its stage
band, 0 inside), relative_to_early (latest / mean of the run's early-stage values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..catalog import Registry
from ..model import Metric, Rule, Stages
from .bands import band_state, early_mean
from .stats import Series, change_pct, latest, slope_per_1k

__all__ = [
    "STATS",
    "Observation",
    "PointResult",
    "RuleContext",
    "RuleResult",
    "evaluate_point",
    "evaluate_rule",
    "evaluate_rules",
    "window_stat",
]

STATS = (
    "last",
    "mean",
    "min",
    "max",
    "std",
    "cv",
    "slope_per_1k",
    "change_pct",
    "abs_change_pct",
    "outside_band",
    "relative_to_early",
)


@dataclass(frozen=True)
class RuleContext:
    """What rule statistics need besides the series: stage boundaries, run config, metric bands."""

    stages: Stages
    config: Mapping[str, Any]
    metrics: Mapping[str, Metric]

    @classmethod
    def of(cls, registry: Registry, config: Mapping[str, Any] | None = None) -> RuleContext:
        cfg = dict(config or {})
        return cls(registry.stages_for(cfg), cfg, {m.id: m for m in registry.metrics})


def window_stat(
    stat: str, window: Series, ctx: RuleContext, metric_id: str, early_value: float | None
) -> float | None:
    """One condition statistic over a window of finite points; None when it is undefined there."""
    f = window.finite()
    v = f.values
    if v.size == 0:
        return None
    if stat == "last":
        return float(v[-1])
    if stat == "mean":
        return float(v.mean())
    if stat == "min":
        return float(v.min())
    if stat == "max":
        return float(v.max())
    if stat == "std":
        return float(v.std())
    if stat == "cv":
        m = float(v.mean())
        return None if m == 0.0 else float(v.std()) / abs(m)
    if stat == "slope_per_1k":
        return slope_per_1k(f)
    if stat == "change_pct":
        return change_pct(f)
    if stat == "abs_change_pct":
        c = change_pct(f)
        return None if c is None else abs(c)
    if stat == "outside_band":
        metric = ctx.metrics.get(metric_id)
        point = latest(f)
        if metric is None or point is None:
            return None
        band = band_state(metric, point.step, point.value, ctx.stages, ctx.config, early_value)
        if band is None or band.inside is None:
            return None
        return 0.0 if band.inside else 1.0
    if stat == "relative_to_early":
        if early_value is None or early_value == 0.0:
            return None
        return float(v[-1]) / early_value
    raise ValueError(f"unknown rule statistic {stat!r}")


@dataclass(frozen=True)
class Observation:
    metric: str
    stat: str
    op: str
    threshold: float
    observed: float | None
    holds: bool
    points: int

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "stat": self.stat,
            "op": self.op,
            "threshold": self.threshold,
            "observed": self.observed,
            "holds": self.holds,
            "points": self.points,
        }


@dataclass(frozen=True)
class PointResult:
    step: int
    held: bool
    observations: tuple[Observation, ...]
    reason: str | None = None


def evaluate_point(
    rule: Rule,
    step: int,
    windows: Mapping[str, Series],
    early: Mapping[str, float | None],
    ctx: RuleContext,
) -> PointResult:
    """The rule's conjunction at one step, given each metric's window ending there."""
    short = []
    for m in rule.metrics:
        w = windows.get(m)
        if w is None or int(np.isfinite(w.values).sum()) < rule.min_points:
            short.append(m)
    obs = []
    for c in rule.conditions:
        w = windows.get(c.metric)
        n = 0 if w is None else int(np.isfinite(w.values).sum())
        value = None if w is None else window_stat(c.stat, w, ctx, c.metric, early.get(c.metric))
        holds = (
            value is not None and math.isfinite(value) and c.holds(value) and c.metric not in short
        )
        obs.append(Observation(c.metric, c.stat, c.op, c.value, value, holds, n))
    reason = None
    if short:
        reason = f"fewer than {rule.min_points} finite points in the last {rule.window} steps: {', '.join(short)}"
    return PointResult(step, not short and all(o.holds for o in obs), tuple(obs), reason)


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    step: int | None
    consecutive: int
    observations: tuple[Observation, ...] = ()
    reason: str | None = None

    @property
    def fired(self) -> bool:
        return self.consecutive >= self.rule.for_steps

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule.id,
            "severity": self.rule.severity,
            "fired": self.fired,
            "step": self.step,
            "consecutive": self.consecutive,
            "for_steps": self.rule.for_steps,
            "window": self.rule.window,
            "observations": [o.to_dict() for o in self.observations],
            "reason": self.reason,
        }


def evaluate_rule(
    rule: Rule, series: Mapping[str, Series], ctx: RuleContext, end: int | None = None
) -> RuleResult:
    """The rule at its latest evaluation point (at or before `end`), counting held points back."""
    present = {
        m: series[m].until(end) if end is not None else series[m]
        for m in rule.metrics
        if m in series
    }
    missing = [m for m in rule.metrics if m not in present or present[m].empty]
    if missing:
        return RuleResult(rule, None, 0, (), f"no data for {', '.join(missing)}")
    # only the last for_steps evaluation points can matter; they are among each series' last ones
    tails = [s.steps[-rule.for_steps :] for s in present.values()]
    points = np.unique(np.concatenate(tails))[-rule.for_steps :]
    first: PointResult | None = None
    consecutive = 0
    for t in points[::-1].tolist():
        res = _point(rule, int(t), present, ctx)
        if first is None:
            first = res
        if not res.held:
            break
        consecutive += 1
        if consecutive >= rule.for_steps:
            break
    assert first is not None
    return RuleResult(rule, first.step, consecutive, first.observations, first.reason)


def _point(rule: Rule, step: int, series: Mapping[str, Series], ctx: RuleContext) -> PointResult:
    windows = {m: s.window(rule.window, step) for m, s in series.items()}
    early = {m: early_mean(s.until(step), ctx.stages) for m, s in series.items()}
    return evaluate_point(rule, step, windows, early, ctx)


def evaluate_rules(
    registry: Registry,
    series: Mapping[str, Series],
    config: Mapping[str, Any] | None = None,
    metric_id: str | None = None,
) -> tuple[RuleResult, ...]:
    """Every registry rule (or those that involve `metric_id`), in registry order."""
    ctx = RuleContext.of(registry, config)
    rules = [r for r in registry.rules if metric_id is None or metric_id in r.metrics]
    return tuple(evaluate_rule(r, series, ctx) for r in rules)
