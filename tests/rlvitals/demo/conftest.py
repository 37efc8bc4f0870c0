"""One store holding every demo scenario, logged once per session through the real exporter."""

from __future__ import annotations

from pathlib import Path

import pytest

import exporter
import registry
from rlvitals.demo import DemoOptions, DemoResult, run_demo

DEMO_STEPS = 2000


@pytest.fixture(scope="session")
def builtin() -> registry.Registry:
    return registry.load()


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-store")


@pytest.fixture(scope="session")
def demo_results(builtin: registry.Registry, demo_store: Path) -> dict[str, DemoResult]:
    settings = exporter.ExporterSettings(store=demo_store, policy="warn")
    results = run_demo(builtin, None, DemoOptions(steps=DEMO_STEPS, seed=0), settings)
    return {r.scenario.name: r for r in results}
