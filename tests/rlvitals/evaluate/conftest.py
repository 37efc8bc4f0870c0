"""The calibration corpus replayed once per test session: `load_run` (each run imported as
`rlvitals import` would) and its `timeline` (every card at every logged step) are the slow part,
shared by the verdict tests and the replay-vs-live tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import registry
from rlvitals.evaluate.replay import LoadedRun, StepStatus, load_run, timeline

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"

Replayed = Callable[[str], tuple[LoadedRun, list[StepStatus]]]


@pytest.fixture(scope="session")
def replayed(builtin: registry.Registry) -> Replayed:
    cache: dict[str, tuple[LoadedRun, list[StepStatus]]] = {}

    def get(name: str) -> tuple[LoadedRun, list[StepStatus]]:
        if name not in cache:
            run = load_run(RUNS / name, builtin)
            cache[name] = (run, timeline(builtin, run))
        return cache[name]

    return get
