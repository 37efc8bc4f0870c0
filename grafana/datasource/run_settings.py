"""A run's settings as the run page's config table shows them: hyperparameters first, then the
context the diagnosis reads, each with where it came from.

- Hyperparameters: the registry's hyperparameter metrics (learning rate, clip range, KL and
  entropy coefficients, ...) in registry order, from the run config when it holds them, else as
  the run logged them (one value when constant, first → last when it moved); then every other
  config key that is no context key, by name.
- Context: framework, algorithm, action space, planned length, ... (`CONTEXT`).

Each row's `source`: `config` (given: `--config`, `--set`, `init(config=...)`), `logs` (read from
the logs' own words: a trainer's arguments, a hyperparameter table), `inferred` (from which names
the logs hold, `exporter.schema.CONFIG_SOURCES`) or `logged` (a metric's values). Everything is a
function of the stored config and the logged values, so identically configured runs get identical
tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

import registry
from exporter.schema import CONFIG_SOURCES

from .history import HistoryStore

__all__ = ["CONTEXT", "HYPERPARAMETER", "run_settings"]

HYPERPARAMETER = "hyperparameter"
CONTEXT_KIND = "context"
CONTEXT = (
    "framework",
    "algorithm",
    "step_unit",
    "action_space",
    "n_actions",
    "action_dims",
    "vocab_size",
    "planned_steps",
    "env",
    "env_id",
    "random_return",
    "task_reward",
    "stage_boundaries",
    "step_source",
)
"""Config keys that describe the run's setting (what the diagnosis reads to judge it), shown
after the hyperparameters."""

_SAMPLES = 256
"""Bucket means read to tell a logged hyperparameter constant from one that moved."""


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return str(value)


def _number(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}".replace("e-0", "e-").replace("e+0", "e")


def _logged(store: HistoryStore, run: str, field: str) -> str | None:
    """A logged hyperparameter as read off its chart: its value, or first → last."""
    p = store.series(run, field, None, None, _SAMPLES)
    values = p.values[np.isfinite(p.values)]
    if not values.size:
        return None
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-9 * max(abs(lo), abs(hi)):
        return _number(float(values[0]))
    last = store.window(run, field, 1).values
    end = float(last[-1]) if last.size and math.isfinite(float(last[-1])) else float(values[-1])
    return f"{_number(float(values[0]))} → {_number(end)}"


def run_settings(reg: registry.Registry, store: HistoryStore, run: str) -> list[dict[str, str]]:
    """Rows `{key, value, kind, source}`: hyperparameters, then context (see the module)."""
    config = dict(store.run_config(run))
    told = config.pop(CONFIG_SOURCES, None)
    sources = told if isinstance(told, Mapping) else {}
    logged = store.logged_fields(run)

    def row(key: str, value: str, kind: str, source: str) -> dict[str, str]:
        return {"key": key, "value": value, "kind": kind, "source": source}

    def source_of(key: str) -> str:
        said = sources.get(key)
        return said if said in ("logs", "inferred") else "config"

    rows = []
    hyper = [m.id for m in reg.metrics if m.kind == "hyperparameter"]
    for key in hyper:
        if key in config:
            rows.append(row(key, _text(config[key]), HYPERPARAMETER, source_of(key)))
        elif key in logged:
            value = _logged(store, run, key)
            if value is not None:
                rows.append(row(key, value, HYPERPARAMETER, "logged"))
    others = sorted(k for k in config if k not in CONTEXT and k not in hyper)
    rows += [row(k, _text(config[k]), HYPERPARAMETER, source_of(k)) for k in others]
    rows += [row(k, _text(config[k]), CONTEXT_KIND, source_of(k)) for k in CONTEXT if k in config]
    return rows
