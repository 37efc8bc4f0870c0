"""A small store with runs that exercise the report: healthy, a KL blow-up, a NaN loss, a resume."""

from __future__ import annotations

from pathlib import Path

import pytest

import exporter
import registry
from rlvitals.demo import DemoOptions, run_demo, scenario_named

REPORT_STEPS = 1200
REPORT_SCENARIOS = ("healthy", "kl_blowup", "nan_loss", "resume")


@pytest.fixture(scope="session")
def builtin_registry() -> registry.Registry:
    return registry.load()


@pytest.fixture(scope="session")
def report_store(
    tmp_path_factory: pytest.TempPathFactory, builtin_registry: registry.Registry
) -> Path:
    store = tmp_path_factory.mktemp("report-store")
    settings = exporter.ExporterSettings(store=store, policy="warn")
    scenarios = [scenario_named(n) for n in REPORT_SCENARIOS]
    run_demo(builtin_registry, scenarios, DemoOptions(steps=REPORT_STEPS, prefix="r"), settings)
    return store
