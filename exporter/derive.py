"""Metrics the registry declares as derived, computed on the worker as their inputs arrive.

A registry entry with `derived: {method, of, config, window}` is not logged by any framework; the
exporter computes it per step so every consumer (embedded store, InfluxDB, dashboards, cards,
alerts) sees the same series:

- `ratio_to_config`: of[0] / run config[config]   (policy KL / clip epsilon)
- `ratio`, `difference`: of[0] / of[1], of[0] - of[1], once both are logged for the step
- `gradient`: least-squares slope of of[0] per 1000 steps over the trailing `window` steps

A derived metric the training logs itself is left alone. The worker also writes the step's
`nonfinite_count` (how many NaN/Inf values it refused at that step), which the registry declares
as a per-step count kept by the exporter.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from registry import Metric, Registry

__all__ = ["NONFINITE_FIELD", "StepDeriver"]

NONFINITE_FIELD = "nonfinite_count"
_DEFAULT_WINDOW = 50


@dataclass(frozen=True)
class _Rule:
    metric: Metric
    method: str
    inputs: tuple[str, ...]
    divisor: float | None
    window: int


def _config_number(config: Mapping[str, Any], key: str | None) -> float | None:
    value = config.get(key) if key else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number != 0.0 else None


class StepDeriver:
    """Per-run state for derived metrics; `derive` returns (group, field, value) to store."""

    def __init__(self, registry: Registry, config: Mapping[str, Any] | None) -> None:
        config = config or {}
        self._rules: list[_Rule] = []
        for metric in registry.metrics:
            d = metric.derived
            if d is None:
                continue
            divisor = _config_number(config, d.config) if d.method == "ratio_to_config" else None
            if d.method == "ratio_to_config" and divisor is None:
                continue  # the run did not say its clip epsilon: nothing to divide by
            window = d.window or _DEFAULT_WINDOW
            self._rules.append(_Rule(metric, d.method, d.of, divisor, window))
        self._inputs = {name for rule in self._rules for name in rule.inputs}
        self._nonfinite = (
            registry.metric(NONFINITE_FIELD) if registry.has_metric(NONFINITE_FIELD) else None
        )
        self._step: int | None = None
        self._values: dict[str, float] = {}
        self._measured: set[str] = set()
        self._nonfinite_at_step = 0
        self._history: dict[str, deque[tuple[int, float]]] = {
            rule.inputs[0]: deque() for rule in self._rules if rule.method == "gradient"
        }

    def derive(
        self, step: int, logged: Mapping[str, float], nonfinite: int
    ) -> list[tuple[str, str, float]]:
        """What to store for `step` after a log call that brought `logged` (canonical fields
        without a gpu label) and refused `nonfinite` values."""
        new_step = step != self._step
        if new_step:
            self._step = step
            self._values = {}
            self._measured = set()
            self._nonfinite_at_step = 0
        self._measured.update(logged)
        self._values.update(logged)
        out: list[tuple[str, str, float]] = []
        # Zero is written too, once per step: "no NaN at this step" is a measurement, and a
        # series with only its failures in it would look like missing data.
        if self._nonfinite is not None and (new_step or nonfinite):
            self._nonfinite_at_step += nonfinite
            out.append((self._nonfinite.group, NONFINITE_FIELD, float(self._nonfinite_at_step)))
        if not self._inputs.intersection(logged):
            return out
        for rule in self._rules:
            if rule.metric.id in self._measured or not any(i in logged for i in rule.inputs):
                continue
            value = self._compute(rule, step, logged)
            if value is not None and math.isfinite(value):
                out.append((rule.metric.group, rule.metric.id, value))
        return out

    def _compute(self, rule: _Rule, step: int, logged: Mapping[str, float]) -> float | None:
        values = self._values
        if any(i not in values for i in rule.inputs):
            return None
        first = values[rule.inputs[0]]
        if rule.method == "ratio_to_config" and rule.divisor is not None:
            return first / rule.divisor
        if rule.method == "ratio" and len(rule.inputs) > 1:
            second = values[rule.inputs[1]]
            return first / second if second != 0 else None
        if rule.method == "difference" and len(rule.inputs) > 1:
            return first - values[rule.inputs[1]]
        if rule.method == "gradient" and rule.inputs[0] in logged:
            return self._slope(rule, step, first)
        return None

    def _slope(self, rule: _Rule, step: int, value: float) -> float | None:
        points = self._history[rule.inputs[0]]
        while points and points[-1][0] >= step:  # a re-logged or resumed step replaces history
            points.pop()
        points.append((step, value))
        while points and points[0][0] <= step - rule.window:
            points.popleft()
        if len(points) < max(3, rule.window // 2):
            return None
        n = len(points)
        mean_x = sum(p[0] for p in points) / n
        mean_y = sum(p[1] for p in points) / n
        sxx = sum((p[0] - mean_x) ** 2 for p in points)
        if sxx <= 0:
            return None
        sxy = sum((p[0] - mean_x) * (p[1] - mean_y) for p in points)
        return 1000.0 * sxy / sxx
