"""Incremental rule evaluation, one training step at a time, in bounded memory.

`StreamingDiagnosis.update(step, {field: value})` keeps, per metric, a ring buffer of the last
points its longest rule window can see (windows are counted in points; a metric read by a
whole-history statistic such as `drop_from_best` keeps up to HISTORY_POINTS points),
the early-stage points `relative_to_early` needs (at most `early_end` of them), and per rule the
last `for_steps` held/not-held results. It gives exactly the batch answer of `evaluate_rule`
over the same points. A step logged again merges into that step; a lower step (a resume from an
earlier checkpoint) drops everything at or after it, and windows refill from there.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..catalog import Registry
from ..model import Rule
from .bands import EARLY_FALLBACK_POINTS
from .rules import PointResult, RuleContext, RuleResult, evaluate_point
from .stats import Series

__all__ = ["HISTORY_POINTS", "HISTORY_STATS", "StreamingDiagnosis"]

# statistics that read a metric's whole history (the running best of a reward), not a window:
# their metrics keep up to HISTORY_POINTS points; past that the history starts at the oldest kept
HISTORY_STATS = frozenset({"drop_from_best"})
HISTORY_POINTS = 20_000


class _Buffer:
    """Ring buffer of (step, value) for one metric, steps increasing, plus its early points."""

    def __init__(self, capacity: int, early_end: int) -> None:
        self.points: deque[tuple[int, float]] = deque(maxlen=capacity)
        self.early: list[tuple[int, float]] = []  # finite points with step < early_end
        self.first: list[tuple[int, float]] = []  # first finite points, the fallback early values
        self.early_end = early_end
        self._early_sum = 0.0
        self._cache: Series | None = None

    def put(self, step: int, value: float) -> None:
        if self.points and self.points[-1][0] == step:
            self.points.pop()
            self._forget(step)
        self.points.append((step, value))
        self._cache = None
        if math.isfinite(value):
            if step < self.early_end:
                self.early.append((step, value))
                self._early_sum += value
            if len(self.first) < EARLY_FALLBACK_POINTS:
                self.first.append((step, value))

    def rewind(self, step: int) -> None:
        while self.points and self.points[-1][0] >= step:
            self.points.pop()
        self._cache = None
        self._forget(step)

    def _forget(self, step: int) -> None:
        if self.early and self.early[-1][0] >= step:
            self.early = [p for p in self.early if p[0] < step]
            self._early_sum = math.fsum(p[1] for p in self.early)
        self.first = [p for p in self.first if p[0] < step]

    def series(self) -> Series:
        if self._cache is None:
            n = len(self.points)
            steps = np.fromiter((p[0] for p in self.points), dtype=np.int64, count=n)
            values = np.fromiter((p[1] for p in self.points), dtype=np.float64, count=n)
            self._cache = Series(steps, values)
        return self._cache

    def early_mean(self) -> float | None:
        if self.early:
            return self._early_sum / len(self.early)
        return sum(p[1] for p in self.first) / len(self.first) if self.first else None


class StreamingDiagnosis:
    """Live rule states for the exporter's `/metrics`: `update()` once per logged step."""

    def __init__(self, registry: Registry, config: Mapping[str, Any] | None = None) -> None:
        self._ctx = RuleContext.of(registry, config)
        self._rules: tuple[Rule, ...] = registry.rules
        capacity: dict[str, int] = {}
        for rule in self._rules:
            for c in rule.conditions:
                need = HISTORY_POINTS if c.stat in HISTORY_STATS else rule.window
                capacity[c.metric] = max(capacity.get(c.metric, 0), need)
        self._buffers = {m: _Buffer(cap, self._ctx.stages.early_end) for m, cap in capacity.items()}
        self._holds: dict[str, deque[tuple[int, bool]]] = {
            r.id: deque(maxlen=r.for_steps) for r in self._rules
        }
        self._last: dict[str, PointResult] = {}
        self._step: int | None = None

    @property
    def step(self) -> int | None:
        return self._step

    def update(self, step: int, values: Mapping[str, float | None]) -> dict[str, bool]:
        """Add one step's values and return every rule's state (True = firing)."""
        step = int(step)
        if self._step is not None and step < self._step:
            self._rewind(step)
        self._step = step if self._step is None else max(self._step, step)
        touched = set()
        for name, raw in values.items():
            buf = self._buffers.get(name)
            if buf is None:
                continue
            buf.put(step, _as_float(raw))
            touched.add(name)
        for rule in self._rules:
            if touched.intersection(rule.metrics):
                self._evaluate(rule, step)
        return self.states()

    def states(self) -> dict[str, bool]:
        return {r.id: self._active(r) for r in self._rules}

    def results(self) -> tuple[RuleResult, ...]:
        """Every rule's latest evaluation, with the observed numbers."""
        out = []
        for r in self._rules:
            last = self._last.get(r.id)
            if last is None:
                out.append(RuleResult(r, None, 0, (), "not evaluated yet"))
            else:
                out.append(
                    RuleResult(r, last.step, self._consecutive(r), last.observations, last.reason)
                )
        return tuple(out)

    def _evaluate(self, rule: Rule, step: int) -> None:
        windows, early, histories = {}, {}, {}
        size = self._ctx.window(rule)[0]
        for m in rule.metrics:
            buf = self._buffers[m]
            if buf.points:
                histories[m] = buf.series().until(step)
                windows[m] = histories[m].tail(size)
                early[m] = buf.early_mean()
        if len(windows) < len(rule.metrics):
            missing = ", ".join(m for m in rule.metrics if m not in windows)
            res = PointResult(step, False, (), f"no data for {missing}")
        else:
            res = evaluate_point(rule, step, windows, early, self._ctx, histories)
        holds = self._holds[rule.id]
        if holds and holds[-1][0] == step:
            holds.pop()
        holds.append((step, res.held))
        self._last[rule.id] = res

    def _consecutive(self, rule: Rule) -> int:
        n = 0
        for _, held in reversed(self._holds[rule.id]):
            if not held:
                break
            n += 1
        return n

    def _active(self, rule: Rule) -> bool:
        return self._consecutive(rule) >= rule.for_steps

    def _rewind(self, step: int) -> None:
        for buf in self._buffers.values():
            buf.rewind(step)
        for rule_id, holds in self._holds.items():
            while holds and holds[-1][0] >= step:
                holds.pop()
            last = self._last.get(rule_id)
            if last is not None and last.step >= step:
                del self._last[rule_id]
        self._step = None


def _as_float(value: float | None) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
