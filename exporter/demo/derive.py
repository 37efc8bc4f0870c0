"""Metrics the registry declares as derived (`derived: {method, of, config, window}`), computed
from a trajectory's measured series so the demo logs them the way a trainer that computes them
would. Methods: `ratio_to_config` (of[0] / config[key]), `ratio` (of[0] / of[1]), `difference`
(of[0] - of[1]) and `gradient` (least-squares slope of of[0] per 1000 steps over the trailing
`window` steps)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from registry import Metric, Registry

from .simulate import FloatArray, IntArray

__all__ = ["GRADIENT_WINDOW", "derive"]

GRADIENT_WINDOW = 50


def _config_number(config: Mapping[str, Any], key: str | None) -> float | None:
    value = config.get(key) if key else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number != 0.0 else None


def _gradient(steps: IntArray, values: FloatArray, window: int) -> FloatArray:
    out = np.full(values.size, math.nan)
    x_all = steps.astype(np.float64)
    for i in range(values.size):
        lo = np.searchsorted(steps, steps[i] - window, side="right")
        x, y = x_all[lo : i + 1], values[lo : i + 1]
        keep = np.isfinite(y)
        if int(keep.sum()) < max(3, window // 2):
            continue
        x, y = x[keep], y[keep]
        xc = x - x.mean()
        sxx = float(np.dot(xc, xc))
        if sxx > 0:
            out[i] = 1000.0 * float(np.dot(xc, y - y.mean())) / sxx
    return out


def _one(
    metric: Metric, steps: IntArray, values: Mapping[str, FloatArray], config: Mapping[str, Any]
) -> FloatArray | None:
    d = metric.derived
    if d is None or any(name not in values for name in d.of):
        return None
    first = values[d.of[0]]
    with np.errstate(divide="ignore", invalid="ignore"):
        if d.method == "ratio_to_config":
            denom = _config_number(config, d.config)
            return None if denom is None else first / denom
        if d.method == "ratio" and len(d.of) > 1:
            out: FloatArray = first / values[d.of[1]]
            return out
        if d.method == "difference" and len(d.of) > 1:
            diff: FloatArray = first - values[d.of[1]]
            return diff
    if d.method == "gradient":
        return _gradient(steps, first, d.window or GRADIENT_WINDOW)
    return None


def derive(
    reg: Registry, steps: IntArray, values: Mapping[str, FloatArray], config: Mapping[str, Any]
) -> dict[str, FloatArray]:
    """Every derived metric whose inputs are present and which is not already measured."""
    out: dict[str, FloatArray] = {}
    for metric in reg.metrics:
        if metric.id in values:
            continue
        series = _one(metric, steps, values, config)
        if series is not None:
            out[metric.id] = series
    return out
