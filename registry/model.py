"""Frozen dataclasses for everything the registry declares. Nothing past the loader sees raw YAML."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Alert",
    "Alias",
    "Band",
    "Bands",
    "BookkeepingKey",
    "Condition",
    "Derivation",
    "Display",
    "Formula",
    "Limits",
    "Metric",
    "NamePattern",
    "Rule",
    "Scenario",
    "Stages",
    "Term",
    "Text",
    "Transform",
]

Lang = Literal["en", "zh"]
Stage = Literal["early", "mid", "late"]
STAGES: tuple[Stage, ...] = ("early", "mid", "late")


@dataclass(frozen=True)
class Text:
    """A text in both languages."""

    en: str
    zh: str

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


@dataclass(frozen=True)
class Formula:
    expr: str
    over: str
    note: Text | None = None


@dataclass(frozen=True)
class Limits:
    """Physical limits: a value outside them is a bug in the logging, not a training state."""

    min: float | None
    max: float | None
    reason: str
    source: str | None = None
    undefined_when_constant: bool = False
    """NaN is what the metric is on constant input (a ratio of variances, 0/0): a logged NaN
    is a fact about the data, not a numerical failure of the training."""

    def contains(self, value: float) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)


@dataclass(frozen=True)
class Band:
    low: float | None
    high: float | None
    reason: str
    source: str | None = None

    def contains(self, value: float, scale: float = 1.0) -> bool:
        lo = -math.inf if self.low is None else self.low * scale
        hi = math.inf if self.high is None else self.high * scale
        return lo <= value <= hi


@dataclass(frozen=True)
class Bands:
    """Healthy ranges by stage. `basis` says what the numbers multiply (1 for absolute)."""

    basis: str
    early: Band | None = None
    mid: Band | None = None
    late: Band | None = None

    def for_stage(self, stage: Stage) -> Band | None:
        band: Band | None = getattr(self, stage)
        return band


@dataclass(frozen=True)
class Alert:
    severity: Literal["warning", "critical"]
    condition: Literal["above", "below", "abs_above"]
    threshold: float
    for_steps: int
    reason: str
    basis: str = "absolute"
    source: str | None = None
    # the alert applies only to runs with one of these action spaces ("unknown": none known),
    # since entropy's scale depends on it; None: to every run
    action_space: tuple[str, ...] | None = None
    # a physical fact (NaN is NaN) needs no related metric to confirm it
    corroborate: bool = True

    def violated(self, value: float, scale: float = 1.0) -> bool:
        limit = self.threshold * scale
        if self.condition == "above":
            return value > limit
        if self.condition == "below":
            return value < limit
        return abs(value) > limit


@dataclass(frozen=True)
class Transform:
    """How a framework's value becomes the canonical value: identity, negate, scale or reciprocal."""

    kind: Literal["identity", "negate", "scale", "reciprocal"] = "identity"
    factor: float = 1.0

    def apply(self, value: float) -> float:
        if self.kind == "negate":
            return -value
        if self.kind == "scale":
            return value * self.factor
        if self.kind == "reciprocal":
            return self.factor / value if value != 0 else math.inf
        return value

    def describe(self) -> str:
        if self.kind == "negate":
            return "negate (x -> -x)"
        if self.kind == "scale":
            return f"scale (x -> x * {self.factor:g})"
        if self.kind == "reciprocal":
            return f"reciprocal (x -> {self.factor:g} / x)"
        return "identity"


IDENTITY = Transform()


@dataclass(frozen=True)
class Alias:
    key: str
    framework: str
    metric: str
    transform: Transform = IDENTITY
    estimator: str | None = None
    reduction: str | None = None
    clip_definition: str | None = None
    condition: str | None = None
    note: str | None = None
    precedence: int = 0

    @property
    def is_pattern(self) -> bool:
        return "{" in self.key


@dataclass(frozen=True)
class BookkeepingKey:
    """A key a framework logs about the run's progress (a counter, a clock), not a metric: kept
    as logged, without a warning. `source` names the framework file it was read from."""

    key: str
    framework: str
    meaning: Text
    source: str


@dataclass(frozen=True)
class Scenario:
    symptom: Text
    causes: tuple[Text, ...]
    check: tuple[Text, ...]
    change: tuple[Text, ...]
    # which side of the healthy band the symptom is on; None: either
    direction: str | None = None


@dataclass(frozen=True)
class Display:
    axis: str = "left"
    emphasis: str = "primary"
    panel_with: tuple[str, ...] = ()
    color: str | None = None
    log_scale: bool = False
    health_slope: bool = False
    overview: bool = False
    """Drawn on the overview dashboard; the rest of the metrics are on the detail pages."""


@dataclass(frozen=True)
class Derivation:
    method: str
    of: tuple[str, ...]
    config: str | None = None
    window: int | None = None


@dataclass(frozen=True)
class NamePattern:
    """A family of metrics named '<id>/<placeholder>' (sub-rewards)."""

    placeholder: str
    example: str
    weight_config: str | None = None


@dataclass(frozen=True)
class Metric:
    id: str
    title: Text
    definition: Text
    formula: Formula
    unit: str
    group: str
    layer: str
    sampling: str
    aggregation: str
    direction: str
    limits: Limits
    applies_to: tuple[str, ...]
    failure_scenarios: tuple[Scenario, ...]
    verification: tuple[Text, ...]
    confusions: tuple[Text, ...]
    related: tuple[str, ...]
    display: Display
    short: Text | None = None
    kind: str = "measured"
    core: bool = False
    bands: Bands | None = None
    alerts: tuple[Alert, ...] = ()
    aliases: tuple[Alias, ...] = ()
    derived: Derivation | None = None
    pattern: NamePattern | None = None
    quantity: str = "unstated"
    """What sort of quantity it is (`quantity.QUANTITIES`): a loss, a coefficient, an entropy...
    A suggestion never offers it for a name that states another (`quantity.stated_quantity`)."""
    # bands for runs whose action space is known (entropy: ln n, the early level, or none)
    bands_by_space: Mapping[str, Bands] = field(default_factory=dict)

    def band_at(self, stage: Stage) -> Band | None:
        return self.bands.for_stage(stage) if self.bands else None

    def bands_for(self, action_space: str | None) -> Bands | None:
        """The bands that apply to a run with this action space."""
        if action_space is not None and action_space in self.bands_by_space:
            return self.bands_by_space[action_space]
        return self.bands


@dataclass(frozen=True)
class Term:
    id: str
    title: Text
    definition: Text
    explains: tuple[str, ...]
    formula: str | None = None
    why_it_matters: Text | None = None
    confusions: tuple[Text, ...] = ()
    related_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Condition:
    metric: str
    stat: str
    op: str
    value: float
    level: float | None = None
    """`share_above`'s level: the share of the window's points above it is the statistic."""

    @property
    def label(self) -> str:
        """The statistic as the docs and alert texts name it: `share_above(0.1)`."""
        return self.stat if self.level is None else f"{self.stat}({self.level:g})"

    def holds(self, observed: float) -> bool:
        if self.op == ">":
            return observed > self.value
        if self.op == ">=":
            return observed >= self.value
        if self.op == "<":
            return observed < self.value
        if self.op == "<=":
            return observed <= self.value
        return observed == self.value


@dataclass(frozen=True)
class Rule:
    id: str
    title: Text
    severity: Literal["watch", "warning", "critical"]
    window: int
    conditions: tuple[Condition, ...]
    reading: Text
    actions: tuple[Text, ...]
    reason: str
    min_points: int = 8
    for_steps: int = 1
    source: str | None = None
    sentinel: str | None = None

    @functools.cached_property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.metric for c in self.conditions))


@dataclass(frozen=True)
class Timing:
    """Stages, warm-up and baselines in units that fit any run (registry `stages`), with reasons.

    With a planned length the early stage is its first `early_fraction`, the mid stage ends at
    `mid_fraction`; without one, at `early_points` / `mid_points` logged points. Warm-up is the
    first `warmup_points` points; a run's early value, its first `baseline_points` points.
    """

    early_fraction: float = 0.1
    mid_fraction: float = 0.5
    early_points: int = 20
    mid_points: int = 200
    warmup_points: int = 2
    baseline_points: int = 5
    cv_points: int = 10
    """A card's CV spans at least this many logged points (its step window widened to fit)."""
    trend_points: int = 20
    """A card's recent trend spans at least this many logged points."""
    reason: str = ""


@dataclass(frozen=True)
class Stages:
    """Step boundaries of the training stages; a run may override them."""

    early_end: int
    mid_end: int
    reason: str = ""
    source: str | None = None
    # the run's own baseline (an "early value") is its first `baseline_points` logged points when
    # the stages come from fractions of the run rather than explicit boundaries; None: the early stage
    baseline_points: int | None = None

    def stage_at(self, step: int) -> Stage:
        if step < self.early_end:
            return "early"
        if step < self.mid_end:
            return "mid"
        return "late"
