"""Training curves for the bundle tests, derived from the built-in registry: a healthy run that
learns (reward up, entropy slowly down, everything inside its band) and injected failures."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import registry

__all__ = ["healthy_value", "log_runs", "logged_metrics", "steps_of"]


def logged_metrics(reg: registry.Registry) -> list[registry.Metric]:
    """Metrics a run stores (derived ones included, as the demo and callbacks store them), without
    the exporter's own counters and name families."""
    return [m for m in reg.metrics if m.kind != "counter" and m.pattern is None]


def _base(m: registry.Metric) -> float:
    value = 1.0
    if m.bands is not None and m.bands.basis == "absolute":
        band = m.bands.mid or m.bands.early or m.bands.late
        if band is not None:
            if band.low is not None and band.high is not None:
                value = (band.low + band.high) / 2
            elif band.high is not None:
                value = band.high / 2 if band.high > 0 else band.high - 1
            elif band.low is not None:
                value = band.low * 2 if band.low > 0 else band.low + 1
    for a in m.alerts:
        if a.basis == "absolute" and a.violated(value):
            value = a.threshold / 2 if a.condition != "below" else a.threshold * 2 + 1
    if m.limits.max is not None:
        value = min(value, m.limits.max * 0.9)
    if m.limits.min is not None:
        value = max(
            value, m.limits.min + 0.1 * abs(value) if value > m.limits.min else m.limits.min + 0.5
        )
    return value


def healthy_value(m: registry.Metric, step: int, rng: np.random.Generator) -> float:
    """A learning run: rewards rise ~20 % over 1000 steps, entropy falls ~15 %, the rest wobbles 1 %."""
    base = _base(m)
    t = min(step, 1000) / 1000
    drift = 1.0
    if m.group == "reward":
        drift = 1 + 0.2 * t
    elif m.id == "policy_entropy":
        drift = 1 - 0.15 * t
    value = base * drift * (1 + rng.normal(0, 0.01))
    if base > 0 and value <= 0:
        value = base
    return value if math.isfinite(value) else base


def steps_of(n: int, start: int = 0) -> Iterator[int]:
    return iter(range(start, start + n))


def log_runs(
    reg: registry.Registry,
    settings: Callable[[], Any],
    runs: Sequence[str],
    steps: int,
    family_members: Sequence[str] = ("format", "length"),
    stride: Mapping[str, int] | None = None,
) -> None:
    """Log healthy runs through the real exporter: every stored metric at every step (every
    `stride[run]`-th step for the runs it names, so runs can have different step sets), each
    name family with a few members, a checkpoint event at step 100."""
    import exporter

    families = [m for m in reg.metrics if m.pattern is not None]
    for i, name in enumerate(runs):
        run = exporter.init(name, registry=reg, settings=settings())
        rng = np.random.default_rng(i)
        for step in range(0, steps, (stride or {}).get(name, 1)):
            values = {m.id: healthy_value(m, step, rng) for m in logged_metrics(reg)}
            for family in families:
                values.update(
                    {f"{family.id}/{n}": 0.5 + 0.1 * j for j, n in enumerate(family_members)}
                )
            run.log(step, values)
        run.event(100, "checkpoint", "saved ckpt-100")
        run.finish(60)
