"""Family-free dead runs (issue 35): a policy no update moves, a learning rate of exactly 0, and
either with a return that never improved. The rules' own levels build the cases, so they sit just
under and just over what the registry states; the return's "never improved" is the return
references' finding (`return_refs`), read by the rules as the return's card reads it."""

from __future__ import annotations

import numpy as np
import pytest

import registry
from registry.diagnosis.rules import RuleContext, RuleResult, evaluate_rule
from registry.diagnosis.stats import Series
from registry.model import Rule

UNMOVED, LR_ZERO = "policy_unmoved_since_start", "learning_rate_zero_since_start"
DEAD_KL, DEAD_LR = "no_learning_policy_unmoved", "no_learning_learning_rate_zero"
STEP = 2048
POINTS = 30


def _rule(reg: registry.Registry, rule_id: str) -> Rule:
    (found,) = [r for r in reg.rules if r.id == rule_id]
    return found


def _level(rule: Rule, metric: str) -> float:
    (cond,) = [c for c in rule.conditions if c.metric == metric]
    assert cond.op == "<="
    return float(cond.value)


def _series(values: list[float] | np.ndarray) -> Series:
    v = np.asarray(values, dtype=float)
    return Series(np.arange(1, v.size + 1) * STEP, v)


def _fired(reg: registry.Registry, rule: Rule, series: dict[str, Series]) -> bool:
    ctx = RuleContext.of(reg, {"first_update": STEP}, run_points=POINTS)
    return evaluate_rule(rule, series, ctx).fired


def _flat_return() -> Series:
    # a random policy's return: noise around its start, no trend
    rng = np.random.default_rng(0)
    return _series(22 + rng.normal(0, 2, POINTS))


def _learning_return() -> Series:
    rng = np.random.default_rng(0)
    return _series(np.linspace(22, 400, POINTS) + rng.normal(0, 5, POINTS))


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_kl_at_the_stated_zero_since_the_start_warns_twice_it_does_not(
    builtin: registry.Registry, scale: float
) -> None:
    rule = _rule(builtin, UNMOVED)
    kl = _level(rule, "policy_kl") * scale
    fired = _fired(builtin, rule, {"policy_kl": _series([kl] * 5)})
    assert fired is (scale == 1.0)


def test_a_policy_that_moved_before_its_updates_faded_is_not_unmoved(
    builtin: registry.Registry,
) -> None:
    rule = _rule(builtin, UNMOVED)
    zero = _level(rule, "policy_kl")
    # an annealed run: real updates first, then KL at "zero" for the rest of the run
    kl = [0.01] * 10 + [zero / 10] * 20
    assert not _fired(builtin, rule, {"policy_kl": _series(kl)})


def test_a_warm_up_from_zero_is_not_a_zero_learning_rate(builtin: registry.Registry) -> None:
    rule = _rule(builtin, LR_ZERO)
    assert not _fired(builtin, rule, {"learning_rate": _series([0.0, 1e-5, 2e-5, 3e-5, 3e-5])})
    assert _fired(builtin, rule, {"learning_rate": _series([0.0] * 5)})


@pytest.mark.parametrize(
    ("rule_id", "metric", "zero"),
    [(DEAD_KL, "policy_kl", 1e-8), (DEAD_LR, "learning_rate", 0.0)],
)
def test_no_update_and_a_return_that_never_improved_is_critical(
    builtin: registry.Registry, rule_id: str, metric: str, zero: float
) -> None:
    rule = _rule(builtin, rule_id)
    assert rule.severity == "critical"
    dead = {metric: _series([zero] * POINTS), "episodic_return": _flat_return()}
    assert _fired(builtin, rule, dead)


@pytest.mark.parametrize(
    ("rule_id", "metric", "zero"),
    [(DEAD_KL, "policy_kl", 1e-8), (DEAD_LR, "learning_rate", 0.0)],
)
def test_no_update_after_the_return_improved_is_not_dead(
    builtin: registry.Registry, rule_id: str, metric: str, zero: float
) -> None:
    # a schedule annealed to 0 after the run learned: nothing moves, but something was learned
    rule = _rule(builtin, rule_id)
    done = {metric: _series([zero] * POINTS), "episodic_return": _learning_return()}
    assert not _fired(builtin, rule, done)


def test_a_flat_return_with_a_moving_policy_is_not_dead(builtin: registry.Registry) -> None:
    # a sparse-reward run that has not improved yet but whose policy still moves may learn late
    rule = _rule(builtin, DEAD_KL)
    alive = {"policy_kl": _series([0.01] * POINTS), "episodic_return": _flat_return()}
    assert not _fired(builtin, rule, alive)


def test_too_short_a_return_to_judge_is_not_dead(builtin: registry.Registry) -> None:
    # "never improved" needs a start and a present that do not overlap: unknown, never an alarm
    rule = _rule(builtin, DEAD_KL)
    short = {"policy_kl": _series([1e-8] * 4), "episodic_return": _series([22, 23, 21, 22])}
    assert not _fired(builtin, rule, short)


def _unmoved_on_zero_kl(builtin: registry.Registry, **setup: int | None) -> RuleResult:
    """ "No update has moved the policy" over a KL logged as exactly 0 at every point, in a run
    whose config holds `setup` (a key given as None is left out)."""
    config: dict[str, int] = {"first_update": STEP}
    config.update({k: v for k, v in setup.items() if v is not None})
    ctx = RuleContext.of(builtin, config, run_points=POINTS)
    return evaluate_rule(_rule(builtin, UNMOVED), {"policy_kl": _series([0.0] * POINTS)}, ctx)


@pytest.mark.parametrize(("updates", "fires"), [(1, False), (2, True), (None, True)])
def test_a_kl_measured_before_the_only_update_of_each_batch_is_not_a_policy_unmoved(
    builtin: registry.Registry, updates: int | None, fires: bool
) -> None:
    # verl with one PPO epoch over one mini-batch logs actor/ppo_kl before its only update on
    # the batch: 0 at every step although the policy moves (round 3's held-out verl GRPO run);
    # with two updates or an unknown setup, a KL of exactly 0 is still no update moving it
    result = _unmoved_on_zero_kl(builtin, updates_per_batch=updates)
    assert result.fired is fires
    if not fires:
        assert result.reason is not None and "by construction" in result.reason


@pytest.mark.parametrize(("decimals", "fires"), [(3, False), (7, True), (None, True)])
def test_a_kl_printed_as_zero_to_three_decimals_is_not_a_policy_unmoved(
    builtin: registry.Registry, decimals: int | None, fires: bool
) -> None:
    # verl up to v0.4 prints actor/ppo_kl:0.000 for any KL under 0.0005 (published verl PPO
    # runs that learned): "at most 1e-6" cannot be told from it; printed to 7 decimals, it can
    result = _unmoved_on_zero_kl(builtin, value_decimals=decimals)
    assert result.fired is fires
    if not fires:
        assert result.reason is not None and "printed" in result.reason


def test_a_learning_rate_printed_as_zero_to_three_decimals_is_not_a_zero_learning_rate(
    builtin: registry.Registry,
) -> None:
    # 1e-6 printed with 3 decimals is 0.000: a typical LLM learning rate, not a frozen run
    rule = _rule(builtin, LR_ZERO)
    ctx = RuleContext.of(builtin, {"first_update": STEP, "value_decimals": 3}, run_points=POINTS)
    assert not evaluate_rule(rule, {"learning_rate": _series([0.0] * POINTS)}, ctx).fired
