"""Checking request parameters (query strings and JSON payloads alike).

Every check raises `BadRequest` (wrong type, out of range) or `NotFound` (unknown run, metric or
term) with a message naming the parameter, so bad input is always a 4xx, never a 500.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import registry

from .errors import BadRequest, NotFound
from .history import HistoryStore, metric_of_field

__all__ = [
    "LANGS",
    "MAX_TEXT",
    "check_field",
    "check_metric",
    "check_run",
    "choice",
    "integer",
    "lang",
    "number",
    "text",
]

LANGS = ("en", "zh")
MAX_TEXT = 256


def text(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise BadRequest(f"missing parameter {name!r}")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"parameter {name!r} must be a string, not {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise BadRequest(f"parameter {name!r} is longer than {MAX_TEXT} characters")
    return value


def integer(
    params: Mapping[str, Any], name: str, default: int | None, lo: int, hi: int
) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise BadRequest(f"parameter {name!r} must be an integer, not a boolean")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        raw = value.strip()
        if not re.fullmatch(r"[+-]?\d{1,19}", raw):
            raise BadRequest(f"parameter {name!r} must be an integer, got {value[:40]!r}")
        value = int(raw)
    if not isinstance(value, int):
        raise BadRequest(f"parameter {name!r} must be an integer, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise BadRequest(f"parameter {name!r} must be between {lo} and {hi}, got {value}")
    return value


def number(params: Mapping[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise BadRequest(f"parameter {name!r} must be a number, not a boolean")
    if isinstance(value, str):
        try:
            value = float(value.strip()) if len(value) <= 40 else math.nan
        except ValueError:
            raise BadRequest(f"parameter {name!r} must be a number, got {value!r}") from None
    if not isinstance(value, int | float):
        raise BadRequest(f"parameter {name!r} must be a number, not {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and lo <= v <= hi):
        raise BadRequest(f"parameter {name!r} must be a number between {lo:g} and {hi:g}")
    return v


def choice(params: Mapping[str, Any], name: str, options: tuple[str, ...], default: str) -> str:
    value = text(params, name, required=False)
    if value is None:
        return default
    if value not in options:
        raise BadRequest(f"parameter {name!r} must be one of {', '.join(options)}, got {value!r}")
    return value


def lang(params: Mapping[str, Any], default: str | None = "en") -> str | None:
    value = text(params, "lang", required=False)
    if value is None:
        return default
    if value not in LANGS:
        raise BadRequest(f"parameter 'lang' must be one of {', '.join(LANGS)}, got {value!r}")
    return value


def check_run(store: HistoryStore, params: Mapping[str, Any]) -> str:
    """The `run` parameter, which must name a run the store holds."""
    run = text(params, "run")
    assert run is not None
    if run not in store.runs():
        raise NotFound(f"unknown run {run!r}; GET /api/runs lists the runs")
    return run


def check_metric(reg: registry.Registry, value: str) -> registry.Metric:
    """A registry metric id (not a field of a metric family)."""
    if not reg.has_metric(value):
        raise NotFound(f"unknown metric {value!r}; GET /api/terms lists the metrics")
    return reg.metric(value)


def check_field(reg: registry.Registry, value: str) -> tuple[str, registry.Metric]:
    """A stored field: a metric id, or `<family>/<name>` of a metric declaring a name pattern."""
    metric = metric_of_field(reg, value)
    if metric is not None:
        return value, metric
    raise NotFound(f"unknown metric {value!r}; GET /api/terms lists the metrics")
