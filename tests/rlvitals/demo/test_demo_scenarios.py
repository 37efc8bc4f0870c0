"""Every injected failure is flagged by the expected rule / alert / event within the scenario's
declared number of steps, never before the injection; the healthy run ends with no warning or
critical card and never raises any of the failures' flags."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import registry
from exporter import Outbox
from registry.diagnosis import as_series, band_state
from rlvitals.demo import SCENARIOS, DemoResult, SimConfig, build, detect, simulate

FAILURES = [s for s in SCENARIOS if s.expect is not None]


@pytest.mark.parametrize("name", [s.name for s in FAILURES])
def test_failure_is_flagged_on_time(name: str, demo_results: dict[str, DemoResult]) -> None:
    result = demo_results[name]
    d = result.detection
    assert d is not None
    assert d.step is not None, f"{name}: {d.expect.label} never flagged"
    assert d.on_time, d.describe()
    assert result.injection is not None and d.step >= result.injection


def test_healthy_run_has_no_warning_or_critical_card(demo_results: dict[str, DemoResult]) -> None:
    healthy = demo_results["healthy"]
    assert healthy.cards, "no core metric card was built"
    bad = [
        (c.metric, c.status, c.reading)
        for c in healthy.cards
        if c.status in ("warning", "critical")
    ]
    assert not bad
    assert healthy.firing == ()


@pytest.mark.parametrize("name", [s.name for s in FAILURES])
def test_healthy_run_never_raises_the_failure_flags(
    name: str, builtin: registry.Registry, demo_store: Path, demo_results: dict[str, DemoResult]
) -> None:
    run = demo_results["healthy"].run
    sc = next(s for s in FAILURES if s.name == name)
    assert sc.expect is not None
    with Outbox(demo_store / "outbox.sqlite") as ob:
        series = {f: as_series(ob.series(run, f)) for f in ob.fields(run)}
        events = ob.events(run)
        rec = ob.run(run)
    assert rec is not None
    d = detect(builtin, sc.expect, None, sc.tolerance, series, events, dict(rec.config))
    assert d.step is None, f"healthy run raised {sc.expect.label} at step {d.step}"


def test_resume_replays_steps_idempotently(
    demo_store: Path, demo_results: dict[str, DemoResult]
) -> None:
    r = demo_results["resume"]
    with Outbox(demo_store / "outbox.sqlite") as ob:
        steps, _ = ob.series(r.run, "raw_reward")
        kinds = [e.kind for e in ob.events(r.run)]
    assert steps.size == r.steps and np.all(np.diff(steps) == 1)
    assert kinds.count("resume") == 1


def test_nan_loss_becomes_health_events_not_stored_nans(
    demo_store: Path, demo_results: dict[str, DemoResult]
) -> None:
    r = demo_results["nan_loss"]
    assert r.injection is not None
    with Outbox(demo_store / "outbox.sqlite") as ob:
        steps, values = ob.series(r.run, "value_loss")
        health = ob.events(r.run, "health")
    assert np.all(np.isfinite(values))
    assert steps.max() < r.injection
    assert health and health[0].step == r.injection


def test_every_scenario_declares_an_expectation_the_registry_knows(
    builtin: registry.Registry,
) -> None:
    for sc in FAILURES:
        assert sc.expect is not None
        if sc.expect.kind == "rule":
            builtin.rule(sc.expect.id)
        elif sc.expect.kind == "alert":
            assert any(
                a.severity == sc.expect.severity for a in builtin.metric(sc.expect.id).alerts
            )
        assert sc.min_steps <= 2000, f"{sc.name} does not fit the default demo length"


def test_healthy_levels_follow_the_registry_bands(builtin: registry.Registry) -> None:
    cfg = SimConfig(steps=1500, seed=3)
    tr = simulate(builtin, cfg)
    stages = builtin.stages_for(tr.config)
    for metric_id in ("policy_entropy", "clip_fraction", "policy_kl"):
        metric = builtin.metric(metric_id)
        # the bands as the diagnosis reads them for this run's config (its action space, ln n)
        states = [
            band_state(metric, s, float(v), stages, tr.config)
            for s, v in zip(tr.steps.tolist(), tr.values[metric_id].tolist(), strict=True)
        ]
        inside = [st.inside for st in states if st is not None and st.inside is not None]
        assert len(inside) >= 0.9 * len(states), f"{metric_id}'s bands were not judged"
        assert np.mean(inside) >= 0.99, f"{metric_id} leaves its bands too often"
    raw, shaped = tr.values["raw_reward"], tr.values["shaped_reward"]
    assert raw[-100:].mean() > raw[:100].mean()
    assert np.corrcoef(raw, shaped)[0, 1] > 0.9
    assert tr.values["value_loss"][-100:].mean() < tr.values["value_loss"][:100].mean()
    assert (
        tr.values["explained_variance"][-100:].mean() > tr.values["explained_variance"][:100].mean()
    )


def test_simulation_is_deterministic_per_seed(builtin: registry.Registry) -> None:
    sc = next(s for s in SCENARIOS if s.name == "kl_blowup")
    a = build(builtin, sc, SimConfig(steps=400, seed=7))
    b = build(builtin, sc, SimConfig(steps=400, seed=7))
    c = build(builtin, sc, SimConfig(steps=400, seed=8))
    for k in a.values:
        assert np.array_equal(a.values[k], b.values[k], equal_nan=True)
    assert not np.array_equal(a.values["raw_reward"], c.values["raw_reward"])
    assert math.isfinite(float(a.values["policy_kl"][-1]))
