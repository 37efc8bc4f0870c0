"""When did the expected flag go up? Replays a stored run step by step against one rule, one
alert or one event kind, with the registry's own evaluation (`registry.diagnosis`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from exporter.store.outbox import EventRecord
from registry import Registry
from registry.diagnosis import RuleContext, Series, basis_scale, early_mean
from registry.diagnosis.rules import fired_at

from .scenarios import Expectation

__all__ = [
    "Detection",
    "detect",
    "first_alert_step",
    "first_event_step",
    "first_quiet_step",
    "first_rule_step",
]


@dataclass(frozen=True)
class Detection:
    """The first step at or after `since` where the expectation was met (None: never)."""

    expect: Expectation
    injection: int | None
    step: int | None
    tolerance: int
    quiet: int | None = None
    """For a rule: the first step after `step` at which it no longer fired (None: it still
    fires at the run's last step, or never fired)."""

    @property
    def delay(self) -> int | None:
        if self.step is None or self.injection is None:
            return None
        return self.step - self.injection

    @property
    def on_time(self) -> bool:
        d = self.delay
        return d is not None and 0 <= d <= self.tolerance

    def describe(self) -> str:
        where = "never" if self.step is None else f"at step {self.step:,}"
        # an event is recorded, not judged: nothing "flags" it
        verb = "recorded" if self.expect.kind == "event" else "flagged"
        head = f"{self.expect.label}: {verb} {where}"
        if self.injection is None:
            return head
        delay = "" if self.delay is None else f", {self.delay:+d} steps"
        verdict = "OK" if self.on_time else "MISSED"
        return (
            f"{head} (injected at step {self.injection:,}{delay}; "
            f"allowed {self.tolerance}) {verdict}"
        )


def first_rule_step(
    reg: Registry,
    rule_id: str,
    series: Mapping[str, Series],
    config: Mapping[str, Any],
    since: int = 0,
) -> int | None:
    """First evaluation step >= `since` at which the rule fires (held for its `for_steps`)."""
    rule = reg.rule(rule_id)
    ctx = RuleContext.of(reg, config)
    present = [series[m] for m in rule.metrics if m in series and not series[m].empty]
    if len(present) < len(rule.metrics):
        return None
    points = np.unique(np.concatenate([s.steps for s in present]))
    later = points[points >= since].tolist()
    for t, fired in zip(later, fired_at(rule, series, ctx, later), strict=True):
        if fired:
            return int(t)
    return None


def first_quiet_step(
    reg: Registry,
    rule_id: str,
    series: Mapping[str, Series],
    config: Mapping[str, Any],
    since: int,
) -> int | None:
    """First evaluation step after `since` at which the rule does not fire (None: it fires at
    every later one)."""
    rule = reg.rule(rule_id)
    ctx = RuleContext.of(reg, config)
    present = [series[m] for m in rule.metrics if m in series and not series[m].empty]
    points = np.unique(np.concatenate([s.steps for s in present])) if present else np.array([])
    later = [int(t) for t in points[points > since].tolist()]
    for t, fired in zip(later, fired_at(rule, series, ctx, later), strict=True):
        if not fired:
            return t
    return None


def first_alert_step(
    reg: Registry,
    metric_id: str,
    severity: str,
    series: Mapping[str, Series],
    config: Mapping[str, Any],
    since: int = 0,
) -> int | None:
    """First step >= `since` at which one of the metric's alerts of that severity has been
    violated for its `for_steps` consecutive finite points."""
    metric = reg.metric(metric_id)
    s = series.get(metric_id)
    if s is None or s.empty:
        return None
    f = s.finite()
    early = early_mean(f, reg.stages_for(config))
    found: list[int] = []
    for alert in metric.alerts:
        if alert.severity != severity:
            continue
        scale = basis_scale(alert.basis, config, early)
        if scale is None:
            continue
        bad = np.array([alert.violated(float(v), scale) for v in f.values], dtype=bool)
        run = 0
        for step, b in zip(f.steps.tolist(), bad.tolist(), strict=True):
            run = run + 1 if b else 0
            if run >= alert.for_steps and step >= since:
                found.append(int(step))
                break
    return min(found) if found else None


def first_event_step(events: Sequence[EventRecord], kind: str, since: int = 0) -> int | None:
    steps = [e.step for e in events if e.kind == kind and e.step >= since]
    return min(steps) if steps else None


def detect(
    reg: Registry,
    expect: Expectation,
    injection: int | None,
    tolerance: int,
    series: Mapping[str, Series],
    events: Sequence[EventRecord],
    config: Mapping[str, Any],
) -> Detection:
    """When the expectation was first met over the whole run (a flag raised before the
    injection is a false alarm and counts as not on time)."""
    quiet = None
    if expect.kind == "rule":
        step = first_rule_step(reg, expect.id, series, config)
        if step is not None:
            quiet = first_quiet_step(reg, expect.id, series, config, step)
    elif expect.kind == "alert":
        step = first_alert_step(reg, expect.id, expect.severity or "critical", series, config)
    else:
        step = first_event_step(events, expect.id)
    return Detection(expect, injection, step, tolerance, quiet)
