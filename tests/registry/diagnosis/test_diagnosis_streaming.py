"""The incremental engine agrees with batch evaluation, step by step, in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import registry
from registry.diagnosis.rules import RuleContext, evaluate_rule
from registry.diagnosis.stats import as_series
from registry.diagnosis.streaming import StreamingDiagnosis
from registry.model import Rule

WithRules = Callable[..., registry.Registry]
N = 400


def _rules(make_rule: Callable[..., Rule]) -> list[Rule]:
    """Windows are in points (the scenario logs every 10 steps; entropy every 20, KL every 30)."""
    return [
        make_rule(
            "last_high", ("raw_reward", "last", ">", 1.2), for_steps=3, window=10, min_points=2
        ),
        make_rule("mean_low", ("raw_reward", "mean", "<", 0.8), window=30),
        make_rule("min_neg", ("raw_reward", "min", "<", 0.0), window=20, min_points=4),
        make_rule("kl_max", ("policy_kl", "max", ">", 0.05), window=5, min_points=3, for_steps=2),
        make_rule(
            "kl_silent", ("policy_kl", "std", "==", 0.0), window=13, min_points=10, for_steps=5
        ),
        make_rule("cv_high", ("grad_norm", "cv", ">", 0.3), window=30),
        make_rule(
            "ent_slope", ("policy_entropy", "slope_per_1k", "<", -2.0), window=30, for_steps=4
        ),
        make_rule(
            "hack",
            ("shaped_reward", "change_pct", ">", 5.0),
            ("raw_reward", "change_pct", "<", -5.0),
            window=50,
            min_points=10,
            for_steps=3,
            severity="critical",
        ),
        make_rule("abs_chg", ("grad_norm", "abs_change_pct", ">", 50.0), window=30),
        make_rule(
            "ent_out",
            ("policy_entropy", "outside_band", "==", 1.0),
            window=5,
            min_points=1,
            for_steps=5,
        ),
        make_rule(
            "ent_rel", ("policy_entropy", "relative_to_early", "<", 0.6), window=5, min_points=1
        ),
    ]


def _scenario(rng: np.random.Generator) -> list[tuple[int, dict[str, float]]]:
    """A run with regime changes, NaNs, and metrics logged at different cadences."""
    updates = []
    for i in range(N):
        step = i * 10  # logged every 10 steps: stages change at step 2000
        phase = i // 50
        values: dict[str, float] = {}
        raw = 1.0 + (0.4 if phase % 3 == 1 else 0.0) - (0.01 * (i - 200) if 200 <= i < 260 else 0.0)
        values["raw_reward"] = raw + rng.normal(0, 0.05)
        values["shaped_reward"] = 1.0 + 0.004 * i + rng.normal(0, 0.02)
        if i % 2 == 0:
            drop = 0.03 * (min(i, 130) - 100) if i >= 100 else 0.0
            values["policy_entropy"] = max(0.0, 1.5 - 0.002 * i - drop + rng.normal(0, 0.02))
        if i % 3 == 0:
            values["policy_kl"] = 0.0 if 300 <= i < 360 else abs(rng.normal(0.03, 0.02))
        if i % 4 != 1:
            values["grad_norm"] = abs(rng.normal(1.0, 0.2 if phase % 2 else 0.6))
        if i in (120, 121):
            values["raw_reward"] = -1.0
        if i % 37 == 5:
            values["raw_reward"] = math.nan
        if i % 53 == 7:
            values["policy_entropy"] = math.inf
        values["learning_rate"] = 3e-4  # in no rule: ignored
        updates.append((step, values))
    return updates


def _history(
    updates: list[tuple[int, dict[str, float]]],
) -> dict[str, tuple[list[int], list[float]]]:
    hist: dict[str, tuple[list[int], list[float]]] = {}
    for step, values in updates:
        for k, v in values.items():
            hist.setdefault(k, ([], []))
            hist[k][0].append(step)
            hist[k][1].append(v)
    return hist


def _batch(
    reg: registry.Registry, updates: list[tuple[int, dict[str, float]]], end: int
) -> dict[str, bool]:
    series = {k: as_series(v) for k, v in _history(updates).items()}
    ctx = RuleContext.of(reg)
    return {r.id: evaluate_rule(r, series, ctx, end=end).fired for r in reg.rules}


def test_streaming_states_equal_batch_evaluation_at_every_step(
    make_rule: Callable[..., Rule], with_rules: WithRules, rng: np.random.Generator
) -> None:
    reg = with_rules(*_rules(make_rule))
    updates = _scenario(rng)
    engine = StreamingDiagnosis(reg)
    ever: dict[str, set[bool]] = {r.id: set() for r in reg.rules}
    for i, (step, values) in enumerate(updates):
        live = engine.update(step, values)
        assert live == _batch(reg, updates[: i + 1], step), f"disagree at step {step}"
        for k, v in live.items():
            ever[k].add(v)
    never = {k: v for k, v in ever.items() if v != {True, False}}
    assert not never, never  # every rule both fired and was quiet


def test_streaming_results_carry_the_batch_evidence(
    make_rule: Callable[..., Rule], with_rules: WithRules, rng: np.random.Generator
) -> None:
    reg = with_rules(*_rules(make_rule))
    updates = _scenario(rng)
    engine = StreamingDiagnosis(reg)
    for step, values in updates:
        engine.update(step, values)
    series = {k: as_series(v) for k, v in _history(updates).items()}
    ctx = RuleContext.of(reg)
    for live in engine.results():
        batch = evaluate_rule(live.rule, series, ctx)
        assert live.step == batch.step
        assert min(live.consecutive, live.rule.for_steps) == batch.consecutive
        assert [o.observed for o in live.observations] == pytest.approx(
            [o.observed for o in batch.observations]
        )


def test_memory_is_bounded_by_the_longest_rule_window(
    make_rule: Callable[..., Rule], with_rules: WithRules
) -> None:
    reg = with_rules(*_rules(make_rule))
    engine = StreamingDiagnosis(reg)
    for step in range(2500):
        engine.update(step, {"raw_reward": 1.0, "grad_norm": 1.0, "policy_entropy": 1.0})
    buffers = engine._buffers  # white-box: the point of this test
    assert len(buffers["raw_reward"].points) == 50  # longest window (in points) using raw_reward
    assert len(buffers["grad_norm"].points) == 30
    assert len(buffers["policy_entropy"].early) == 2000  # early-stage values, capped by early_end
    assert all(len(h) <= r.for_steps for r in reg.rules for h in [engine._holds[r.id]])


def test_values_logged_in_two_calls_for_one_step_merge(
    make_rule: Callable[..., Rule], with_rules: WithRules
) -> None:
    reg = with_rules(*_rules(make_rule))
    one, two = StreamingDiagnosis(reg), StreamingDiagnosis(reg)
    for i in range(200):
        shaped, raw = 1.0 + 0.01 * i, 2.0 - 0.01 * i
        one.update(i, {"shaped_reward": shaped, "raw_reward": raw})
        two.update(i, {"shaped_reward": shaped})
        two.update(i, {"raw_reward": raw})
        assert one.states() == two.states()
    assert one.states()["hack"]


def test_a_resume_from_an_earlier_step_rewinds_and_then_agrees_with_the_rewritten_history(
    make_rule: Callable[..., Rule], with_rules: WithRules, rng: np.random.Generator
) -> None:
    reg = with_rules(*_rules(make_rule))
    updates = _scenario(rng)
    engine = StreamingDiagnosis(reg)
    for step, values in updates[:300]:
        engine.update(step, values)
    resumed = updates[:250] + [
        (s, {k: v * 0.5 for k, v in vals.items()}) for s, vals in updates[250:]
    ]
    for i in range(250, N):
        step, values = resumed[i]
        live = engine.update(step, values)
        if i >= 250 + 60:  # one longest window (in points) after the resume
            assert live == _batch(reg, resumed[: i + 1], step)


def test_unknown_fields_and_non_numbers_are_harmless(
    make_rule: Callable[..., Rule], with_rules: WithRules
) -> None:
    reg = with_rules(make_rule("last_high", ("raw_reward", "last", ">", 1.2), min_points=1))
    engine = StreamingDiagnosis(reg)
    assert engine.update(1, {"not_a_metric": 5.0}) == {"last_high": False}
    assert engine.update(2, {"raw_reward": None}) == {"last_high": False}
    assert engine.update(3, {"raw_reward": 2.0}) == {"last_high": True}
    (res,) = engine.results()
    assert res.fired and res.observations[0].observed == 2.0


def test_a_rule_not_yet_evaluated_says_so(
    make_rule: Callable[..., Rule], with_rules: WithRules
) -> None:
    engine = StreamingDiagnosis(with_rules(make_rule("a", ("raw_reward", "last", ">", 0.0))))
    (res,) = engine.results()
    assert not res.fired and res.reason == "not evaluated yet"


def test_the_mini_registry_streams(reg: registry.Registry) -> None:
    engine = StreamingDiagnosis(reg)
    states = {}
    for i in range(100):
        states = engine.update(i, {"shaped_reward": 1.0 + 0.01 * i, "raw_reward": 1.0 - 0.005 * i})
    assert states == {"shaped_up_raw_down": True}
