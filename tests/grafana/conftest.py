"""Fixtures for datasource tests: an in-memory history with a healthy and a collapsing run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import Event, MemoryHistory

STEPS = 3000


def _runs() -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    rng = np.random.default_rng(7)
    steps = list(range(STEPS))
    x = np.arange(STEPS, dtype=np.float64)
    healthy = {
        "raw_reward": (steps, (x / STEPS + rng.normal(0, 0.05, STEPS)).tolist()),
        "shaped_reward": (steps, (x / STEPS + 0.1 + rng.normal(0, 0.05, STEPS)).tolist()),
        "policy_entropy": (steps, (1.5 - x / STEPS + rng.normal(0, 0.02, STEPS)).tolist()),
        "policy_kl": (steps, np.abs(rng.normal(0.01, 0.003, STEPS)).tolist()),
        "clip_fraction": (steps, np.abs(rng.normal(0.1, 0.02, STEPS)).tolist()),
        "reward_component/format": (steps, rng.normal(0.5, 0.1, STEPS).tolist()),
    }
    entropy = np.where(x < 2000, 1.2, 0.01) + rng.normal(0, 0.005, STEPS)
    collapsing = {
        "policy_entropy": (steps, entropy.tolist()),
        "policy_kl": (steps, np.where(x < 2000, 0.02, 0.0).tolist()),
        "raw_reward": ([0, 1, 2], [1.0, math.nan, 2.0]),
    }
    return {"healthy": healthy, "collapse": collapsing, "empty": {}}


@pytest.fixture(scope="session")
def memory_history() -> MemoryHistory:
    events = {
        "healthy": [Event(100, "checkpoint", "saved ckpt-100"), Event(2500, "resume", "<b>x</b>")]
    }
    return MemoryHistory(_runs(), {"healthy": {"clip_epsilon": 0.2}}, events)


@pytest.fixture(scope="session")
def app(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(), reg, history=memory_history)
