"""Metrics the registry declares as derived, computed on the worker as their inputs arrive.

A registry entry with `derived: {method, of, config, window}` is not logged by any framework; the
exporter computes it per step so every consumer (embedded store, InfluxDB, dashboards, cards,
alerts) sees the same series:

- `ratio_to_config`: of[0] / run config[config]   (policy KL / clip epsilon); when the config
  does not give it, the value the run logs under that id at the step (SB3's `train/clip_range`,
  which also follows a clip-range schedule)
- `ratio`, `difference`: of[0] / of[1], of[0] - of[1], once both are logged for the step
- `gradient`: least-squares slope of of[0] per 1000 steps over the trailing `window` steps

A derived metric the training logs itself is left alone. The worker also writes the step's
`nonfinite_count` (how many NaN/Inf values it refused at that step), which the registry declares
as a per-step count kept by the exporter.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from registry import Metric, Registry

__all__ = ["NONFINITE_FIELD", "StepDeriver"]

NONFINITE_FIELD = "nonfinite_count"
_DEFAULT_WINDOW = 50


_Key = tuple[str, str]  # (field, gpu label): derived metrics read and write unlabelled fields


@dataclass(frozen=True)
class _Rule:
    metric: Metric
    key: _Key
    method: str
    inputs: tuple[_Key, ...]
    divisor: float | None
    window: int
    logged_divisor: _Key | None = None


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
            logged_divisor = (
                (d.config, "")
                if d.method == "ratio_to_config" and divisor is None and d.config
                else None
            )
            window = d.window or _DEFAULT_WINDOW
            inputs = tuple((name, "") for name in d.of)
            self._rules.append(
                _Rule(metric, (metric.id, ""), d.method, inputs, divisor, window, logged_divisor)
            )
        self._inputs = tuple({key for rule in self._rules for key in rule.inputs})
        # What a rule reads or writes: a call logging none of these derives nothing but the
        # step's `nonfinite_count`, however many other names it logs.
        self.relevant = frozenset(
            {*self._inputs}
            | {rule.key for rule in self._rules}
            | {rule.logged_divisor for rule in self._rules if rule.logged_divisor is not None}
        )
        self._nonfinite_group = (
            registry.metric(NONFINITE_FIELD).group if registry.has_metric(NONFINITE_FIELD) else None
        )
        self._step: int | None = None
        self._values: dict[_Key, float] = {}  # everything logged at the current step
        self._nonfinite_at_step = 0
        self._history: dict[_Key, _Window] = {
            rule.inputs[0]: _Window(rule.window)
            for rule in self._rules
            if rule.method == "gradient"
        }

    @property
    def step(self) -> int | None:
        """The step the last `derive` call was for (a call for it again adds to that step)."""
        return self._step

    @property
    def nonfinite_group(self) -> str | None:
        """The measurement of the per-step `nonfinite_count` (None: the registry has none)."""
        return self._nonfinite_group

    def reads(self, keys: Iterable[_Key]) -> bool:
        """Whether a derived metric is computed from one of `keys`."""
        return not set(self._inputs).isdisjoint(keys)

    def derive(
        self, step: int, logged: Mapping[_Key, float], nonfinite: int
    ) -> list[tuple[str, str, float]]:
        """What to store for `step` after a log call that brought `logged` (canonical
        (field, gpu label) -> value) and refused `nonfinite` values."""
        out: list[tuple[str, str, float]] = []
        group = self._nonfinite_group
        # Zero is written too, once per step: "no NaN at this step" is a measurement, and a
        # series with only its failures in it would look like missing data.
        if step != self._step:
            self._step = step
            self._values = values = dict(logged)
            self._nonfinite_at_step = nonfinite
            if group is not None:
                out.append((group, NONFINITE_FIELD, float(nonfinite)))
        else:
            values = self._values
            values.update(logged)
            if nonfinite and group is not None:
                self._nonfinite_at_step += nonfinite
                out.append((group, NONFINITE_FIELD, float(self._nonfinite_at_step)))
        for key in self._inputs:  # most calls bring no input of any rule
            if key in logged:
                break
        else:
            return out
        for rule in self._rules:
            if rule.key in values:
                continue  # logged by the training itself
            for key in rule.inputs:
                if key in logged:
                    break
            else:
                continue  # nothing new for it
            value = self._compute(rule, step, logged)
            if value is not None and math.isfinite(value):
                out.append((rule.metric.group, rule.metric.id, value))
        return out

    def derive_steps(
        self,
        steps: Sequence[int],
        keys: Sequence[_Key],
        values: npt.NDArray[np.float64],
        present: npt.NDArray[np.bool_] | None = None,
        nonfinite: npt.NDArray[np.int64] | None = None,
    ) -> list[tuple[int, str, str, float]]:
        """`derive` for consecutive calls, each at a step past the one before (the first may
        be the step the deriver is at), logging `keys` with `values[i, j]` at `steps[i]`
        (where `present[i, j]`, every cell by default: a value rejected at a step was not
        logged there) and refusing `nonfinite[i]` non-finite values (none by default):
        (step, group, field, value) to store, the per-step `nonfinite_count` included. The
        columns a rule reads are derived as columns (`derive_columns`); a call logging none of
        them costs next to nothing."""
        out: list[tuple[int, str, str, float]] = []
        if present is None:
            present = np.ones(values.shape, dtype=np.bool_)
        counts = [0] * len(steps) if nonfinite is None else nonfinite.tolist()
        start = 0
        if len(steps) and steps[0] == self._step:  # the deriver's step again: adds to it
            logged = {key: float(values[0, j]) for j, key in enumerate(keys) if present[0, j]}
            out += [(steps[0], *row) for row in self.derive(steps[0], logged, counts[0])]
            start = 1
        rest = list(steps[start:])
        if not rest:
            return out
        group = self._nonfinite_group
        if group is not None:
            out += [
                (step, group, NONFINITE_FIELD, float(k))
                for step, k in zip(rest, counts[start:], strict=True)
            ]
        if not self.relevant.isdisjoint(keys):
            for rule_group, field, result, emitted in self.derive_columns(
                rest, keys, values[start:], present[start:]
            ):
                for i in np.flatnonzero(emitted).tolist():
                    out.append((rest[i], rule_group, field, float(result[i])))
        else:  # where `derive_columns` would leave the deriver, without its arithmetic
            self._step = rest[-1]
            self._values = {}
        self._nonfinite_at_step = counts[-1]  # (the last step's, which a later call adds to)
        return out

    def derive_columns(
        self,
        steps: Sequence[int],
        keys: Sequence[_Key],
        values: npt.NDArray[np.float64],
        present: npt.NDArray[np.bool_],
    ) -> list[tuple[str, str, npt.NDArray[np.float64], npt.NDArray[np.bool_]]]:
        """`derive(steps[i], logged_i, 0)` for every i in turn, where `logged_i` maps
        `keys[j]` to `values[i, j]` wherever `present[i, j]`; the steps are strictly
        increasing and each one new to the deriver. Returns, for every derived metric, its
        measurement, id, values and the steps where `derive` returns it (the per-step
        `nonfinite_count` aside), and leaves the deriver where those calls would.

        The arithmetic is the same IEEE operation `derive` does on each step, done on columns;
        gradients keep their history, so they are computed step by step."""
        count = len(steps)
        column = {key: j for j, key in enumerate(keys)}
        absent = np.zeros(count, dtype=np.bool_)

        def col(key: _Key | None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
            j = column.get(key) if key is not None else None
            if j is None:
                return np.zeros(count), absent
            return values[:, j], present[:, j]

        out: list[tuple[str, str, npt.NDArray[np.float64], npt.NDArray[np.bool_]]] = []
        for rule in self._rules:
            _, logged_itself = col(rule.key)
            fed = np.zeros(count, dtype=np.bool_)
            for key in rule.inputs:
                fed |= col(key)[1]
            wanted = fed & ~logged_itself
            first, has_first = col(rule.inputs[0])
            result = np.full(count, np.nan)
            with np.errstate(all="ignore"):
                if rule.method == "ratio_to_config":
                    if rule.divisor is not None:
                        result = first / rule.divisor
                        ok = has_first
                    else:
                        divisor, has_divisor = col(rule.logged_divisor)
                        ok = has_first & has_divisor & (divisor != 0)
                        result = first / np.where(ok, divisor, 1.0)
                elif rule.method in ("ratio", "difference") and len(rule.inputs) > 1:
                    second, has_second = col(rule.inputs[1])
                    ok = has_first & has_second
                    if rule.method == "ratio":
                        ok &= second != 0
                        result = first / np.where(ok, second, 1.0)
                    else:
                        result = first - second
                elif rule.method == "gradient":
                    ok = np.zeros(count, dtype=np.bool_)
                    firsts = first.tolist()
                    for i in np.flatnonzero(wanted & has_first).tolist():
                        slope = self._slope(rule, steps[i], firsts[i])
                        if slope is not None:
                            result[i] = slope
                            ok[i] = True
                else:
                    ok = absent
            emitted = wanted & ok & np.isfinite(result)
            out.append((rule.metric.group, rule.metric.id, result, emitted))
        last = count - 1
        self._step = steps[last]
        self._values = {k: float(values[last, j]) for k, j in column.items() if present[last, j]}
        self._nonfinite_at_step = 0
        return out

    def _compute(self, rule: _Rule, step: int, logged: Mapping[_Key, float]) -> float | None:
        values = self._values
        for key in rule.inputs:
            if key not in values:
                return None
        first = values[rule.inputs[0]]
        if rule.method == "ratio_to_config":
            if rule.divisor is not None:
                return first / rule.divisor
            # the run did not say its clip epsilon: the one it logs at this step, if any
            logged_divisor = values.get(rule.logged_divisor) if rule.logged_divisor else None
            return first / logged_divisor if logged_divisor else None
        if rule.method == "ratio" and len(rule.inputs) > 1:
            second = values[rule.inputs[1]]
            return first / second if second != 0 else None
        if rule.method == "difference" and len(rule.inputs) > 1:
            return first - values[rule.inputs[1]]
        if rule.method == "gradient" and rule.inputs[0] in logged:
            return self._slope(rule, step, first)
        return None

    def _slope(self, rule: _Rule, step: int, value: float) -> float | None:
        window = self._history[rule.inputs[0]]
        window.drop_from(step)  # a re-logged or resumed step replaces history
        window.drop_before(step - rule.window + 1)
        window.add(step, value)
        if window.n < max(3, rule.window // 2):
            return None
        return window.slope()


class _Window:
    """The points of a trailing step window with the sums a least-squares slope needs, kept as
    points come and go (a slope per step would otherwise cost a pass over the window). Steps
    are summed relative to an anchor inside the window. The sums are rebuilt from the points
    whenever a step enters a new `span`-long stretch of steps, so two readers holding the same
    points (a restarted `tail` once its window has filled again) give the same slopes to the
    last bit, whatever came before."""

    def __init__(self, span: int) -> None:
        self.points: deque[tuple[int, float]] = deque()
        self._span = max(1, span)
        self._stretch: int | None = None
        self._anchor = 0
        self._sx = self._sy = self._sxx = self._sxy = 0.0

    @property
    def n(self) -> int:
        return len(self.points)

    def _add_sums(self, step: int, value: float, sign: float) -> None:
        x = float(step - self._anchor)
        self._sx += sign * x
        self._sy += sign * value
        self._sxx += sign * x * x
        self._sxy += sign * x * value

    def _rebuild(self) -> None:
        self._anchor = self.points[0][0] if self.points else 0
        self._sx = self._sy = self._sxx = self._sxy = 0.0
        for step, value in self.points:
            self._add_sums(step, value, 1.0)

    def add(self, step: int, value: float) -> None:
        self.points.append((step, value))
        stretch = step // self._span
        if stretch != self._stretch:
            self._stretch = stretch
            self._rebuild()
        else:
            self._add_sums(step, value, 1.0)

    def drop_from(self, step: int) -> None:
        dropped = False
        while self.points and self.points[-1][0] >= step:
            self.points.pop()
            dropped = True
        if dropped:
            self._rebuild()

    def drop_before(self, step: int) -> None:
        while self.points and self.points[0][0] < step:
            old = self.points.popleft()
            self._add_sums(*old, -1.0)

    def slope(self) -> float | None:
        n = len(self.points)
        sxx = self._sxx - self._sx * self._sx / n
        if sxx <= 1e-9 * max(1.0, self._sxx):
            return None
        sxy = self._sxy - self._sx * self._sy / n
        return 1000.0 * sxy / sxx
