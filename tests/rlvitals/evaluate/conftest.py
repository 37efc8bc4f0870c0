"""The calibration corpus replayed once per test session: `load_run` (each run imported as
`rlvitals import` would) and its `timeline` (every card at every logged step) are the slow part,
shared by the verdict tests and the replay-vs-live tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import registry
from rlvitals.evaluate.expected import given, read_expected
from rlvitals.evaluate.replay import LoadedRun, StepStatus, load_run, timeline

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"

Replayed = Callable[[str], tuple[LoadedRun, list[StepStatus]]]
"""A corpus run's replay by name; `registry_of(name)` is the registry it was read with."""


@pytest.fixture(scope="session")
def replayed(builtin: registry.Registry) -> Replayed:
    cache: dict[str, tuple[LoadedRun, list[StepStatus]]] = {}
    entries = read_expected(RUNS / "expected.yaml")

    def get(name: str) -> tuple[LoadedRun, list[StepStatus]]:
        if name not in cache:
            # with what the run's user passes for it (its --map / --set, `given:`)
            reg, config = given(builtin, {}, entries.get(name))
            run = load_run(RUNS / name, reg, config=config)
            cache[name] = (run, timeline(reg, run, keep=True))  # kept: --leave-one-family-out
        return cache[name]

    return get


@pytest.fixture(scope="session")
def registry_of(builtin: registry.Registry) -> Callable[[str], registry.Registry]:
    """The registry a corpus run is read with: the built-in one with its user's --map."""
    entries = read_expected(RUNS / "expected.yaml")
    return lambda name: given(builtin, {}, entries.get(name))[0]
