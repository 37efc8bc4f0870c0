"""Absolute references the diagnosis reads besides the metrics: the return of a uniformly random
policy, measured per environment (`random_returns.yaml`, written by
`calibration/random_policy.py`). A run's return is judged against it when the run config names
its environment (`env`, or the user's own `random_return`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from importlib import resources

import yaml

__all__ = ["random_returns"]


@functools.cache
def random_returns() -> Mapping[str, float]:
    """Mean undiscounted episodic return of a uniformly random policy, by gymnasium env id."""
    text = resources.files(__package__).joinpath("random_returns.yaml").read_text("utf-8")
    doc = yaml.safe_load(text) or {}
    out: dict[str, float] = {}
    for env, entry in doc.items():
        mean = entry.get("mean") if isinstance(entry, dict) else None
        if isinstance(mean, int | float) and math.isfinite(mean):
            out[str(env)] = float(mean)
    return out
