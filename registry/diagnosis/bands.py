"""Which healthy band applies now, scaled to the run, and how long each alert threshold has been crossed.

Bands and alerts are declared relative where they must be (`basis`): `absolute` numbers are used
as they are; `early_value` multiplies the run's own early mean; `clip_epsilon` the run config's
`clip_epsilon`; `max_entropy` ln(n) for the config's `n_actions`. When the basis is unknown for a
run (no config key, no early values) the band is not judged: `scale` is None and `inside` None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Alert, Metric, Stage, Stages
from .stats import Series

__all__ = [
    "EARLY_FALLBACK_POINTS",
    "AlertState",
    "BandState",
    "alert_states",
    "band_state",
    "basis_scale",
    "clip_epsilon",
    "consecutive_violations",
    "early_mean",
    "early_values",
    "in_warmup",
    "max_entropy",
    "run_band",
    "warmup_end",
]

EARLY_FALLBACK_POINTS = 10
WARMUP_FRACTION = 0.1

Config = Mapping[str, Any]


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v > 0 else None


def clip_epsilon(config: Config | None) -> float | None:
    """The run's PPO clip epsilon from config `clip_epsilon` (a positive number), else None."""
    return _positive((config or {}).get("clip_epsilon"))


def max_entropy(config: Config | None) -> float | None:
    """ln(n) for a discrete action space of config `n_actions` (an integer >= 2), else None."""
    n = (config or {}).get("n_actions")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        return None
    return math.log(n)


def early_values(series: Series, stages: Stages) -> Series:
    """The finite points of the early stage (its first `baseline_points` when the stages come
    from the registry's timing); a run that starts after it uses its first points."""
    f = series.finite()
    early = f.before(stages.early_end)
    first = EARLY_FALLBACK_POINTS
    if stages.baseline_points is not None:
        first = stages.baseline_points
        early = Series(early.steps[:first], early.values[:first])
    return early if len(early) else Series(f.steps[:first], f.values[:first])


def early_mean(series: Series, stages: Stages) -> float | None:
    e = early_values(series, stages)
    return float(e.values.mean()) if len(e) else None


def basis_scale(basis: str, config: Config | None, early_value: float | None) -> float | None:
    """What a band's numbers multiply for this run; None when the run does not tell us."""
    if basis == "absolute":
        return 1.0
    if basis == "clip_epsilon":
        return clip_epsilon(config)
    if basis == "max_entropy":
        return max_entropy(config)
    if basis == "early_value":
        return _positive(early_value)
    return None


def warmup_end(
    stages: Stages, config: Config | None, steps: Series | None = None, points: int | None = None
) -> int:
    """First step after warm-up: config `warmup_steps`; else, with the registry's timing, the
    step of the metric's point after its first `points` (`steps` is the series); else the first
    10 % of the early stage."""
    w = (config or {}).get("warmup_steps")
    if isinstance(w, int) and not isinstance(w, bool) and w >= 0:
        return w
    if stages.baseline_points is not None and steps is not None and points is not None:
        if len(steps) > points:
            return int(steps.steps[points])
        return int(steps.steps[-1]) + 1 if len(steps) else 0
    return int(stages.early_end * WARMUP_FRACTION)


def in_warmup(
    step: int,
    stages: Stages,
    config: Config | None,
    steps: Series | None = None,
    points: int | None = None,
) -> bool:
    return step < warmup_end(stages, config, steps, points)


@dataclass(frozen=True)
class BandState:
    """The stage band at a step, in the metric's own unit (already multiplied by `scale`)."""

    stage: Stage
    basis: str
    scale: float | None
    low: float | None
    high: float | None
    reason: str
    value: float
    inside: bool | None

    def to_dict(self) -> dict[str, object]:
        return {
            "stage": self.stage,
            "basis": self.basis,
            "scale": self.scale,
            "low": self.low,
            "high": self.high,
            "inside": self.inside,
            "reason": self.reason,
        }


def band_state(
    metric: Metric,
    step: int,
    value: float,
    stages: Stages,
    config: Config | None = None,
    early_value: float | None = None,
) -> BandState | None:
    """The band for the stage at `step`, or None when the metric declares none for that stage.

    A run config may replace the registry's band for one metric and stage with absolute edges:
    `{"bands": {"policy_entropy": {"early": [0.3, 0.69]}}}` (a two-action policy cannot reach the
    registry's default early entropy band).
    """
    stage = stages.stage_at(step)
    override = run_band(config, metric.id, stage)
    if override is not None:
        low, high = override
        inside = (
            (low is None or value >= low) and (high is None or value <= high)
            if math.isfinite(value)
            else False
        )
        reason = f"set by the run config (bands.{metric.id}.{stage})"
        return BandState(stage, "run_config", 1.0, low, high, reason, value, inside)
    bands = metric.bands_for((config or {}).get("action_space"))
    if bands is None:
        return None
    band = bands.for_stage(stage)
    if band is None:
        return None
    scale = basis_scale(bands.basis, config, early_value)
    if scale is None:
        return BandState(stage, bands.basis, None, None, None, band.reason, value, None)
    low = None if band.low is None else band.low * scale
    high = None if band.high is None else band.high * scale
    inside = band.contains(value, scale) if math.isfinite(value) else False
    return BandState(stage, bands.basis, scale, low, high, band.reason, value, inside)


def run_band(
    config: Config | None, metric_id: str, stage: Stage
) -> tuple[float | None, float | None] | None:
    """The run config's absolute band edges for one metric and stage, if it sets valid ones."""
    bands = (config or {}).get("bands")
    if not isinstance(bands, Mapping):
        return None
    per_metric = bands.get(metric_id)
    edges = per_metric.get(stage) if isinstance(per_metric, Mapping) else None
    if not isinstance(edges, list | tuple) or len(edges) != 2:
        return None
    low, high = (None if e is None else _number(e) for e in edges)
    if (edges[0] is not None and low is None) or (edges[1] is not None and high is None):
        return None
    if low is not None and high is not None and low > high:
        return None
    return low, high


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def consecutive_violations(series: Series, alert: Alert, scale: float) -> tuple[int, int | None]:
    """Finite points, counted back from the latest, that violate the alert; and the first of them.

    NaN points are not measurements: they neither count nor break the run of violations.
    """
    f = series.finite()
    if not len(f):
        return 0, None
    limit = alert.threshold * scale
    v = f.values
    if alert.condition == "above":
        bad = v > limit
    elif alert.condition == "below":
        bad = v < limit
    else:
        bad = np.abs(v) > limit
    ok_idx = np.flatnonzero(~bad)
    start = int(ok_idx[-1]) + 1 if ok_idx.size else 0
    count = int(v.size - start)
    return count, (int(f.steps[start]) if count else None)


@dataclass(frozen=True)
class AlertState:
    alert: Alert
    threshold: float | None
    consecutive: int
    since_step: int | None

    @property
    def active(self) -> bool:
        return self.threshold is not None and self.consecutive >= self.alert.for_steps

    def to_dict(self) -> dict[str, object]:
        return {
            "severity": self.alert.severity,
            "condition": self.alert.condition,
            "threshold": self.threshold,
            "for_steps": self.alert.for_steps,
            "consecutive": self.consecutive,
            "since_step": self.since_step,
            "active": self.active,
        }


def alert_states(
    metric: Metric, series: Series, config: Config | None = None, early_value: float | None = None
) -> tuple[AlertState, ...]:
    """Every alert of the metric with its scaled threshold and its current run of violations."""
    out = []
    space = (config or {}).get("action_space") or "unknown"
    for alert in metric.alerts:
        if alert.action_space is not None and space not in alert.action_space:
            continue
        scale = basis_scale(alert.basis, config, early_value)
        if scale is None:
            out.append(AlertState(alert, None, 0, None))
            continue
        count, since = consecutive_violations(series, alert, scale)
        out.append(AlertState(alert, alert.threshold * scale, count, since))
    return tuple(out)
