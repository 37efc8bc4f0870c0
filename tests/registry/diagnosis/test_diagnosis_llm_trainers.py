"""Language-model trainers that take one gradient step per batch (TRL GRPO and RLOO with
num_iterations 1): their clip ratio and old-vs-new ratio are 0 by construction, so a collapse is
read on what they do log. Each rule is tested at its boundary, from the numbers in its reason
(registry/rules.yaml), not from the engine's output."""

from __future__ import annotations

import numpy as np
import pytest

import registry
from registry.diagnosis.rules import RuleContext, evaluate_rule
from registry.diagnosis.stats import Series, as_series

TRL = {"framework": "trl", "action_space": "token"}


def _rule(reg: registry.Registry, rule_id: str) -> registry.Rule:
    (rule,) = [r for r in reg.rules if r.id == rule_id]
    return rule


def _fires(reg: registry.Registry, rule_id: str, series: dict[str, Series], points: int) -> bool:
    ctx = RuleContext.of(reg, TRL, run_points=points)
    return evaluate_rule(_rule(reg, rule_id), series, ctx).fired


def _updates(n: int) -> np.ndarray:
    return np.arange(1, n + 1)


# ------------------------------------------------------------------ dead: no gradient at all


def _dead(entropy_end: float, grad_end: float) -> dict[str, Series]:
    """20 updates of a live policy (entropy 3.0, grad norm ~5), then 10 at the given levels."""
    steps = _updates(30)
    entropy = np.where(steps <= 20, 3.0, entropy_end)
    grad = np.where(steps <= 20, 5.0, grad_end)
    return {"policy_entropy": as_series((steps, entropy)), "grad_norm": as_series((steps, grad))}


def test_a_deterministic_policy_with_a_zero_gradient_is_dead(builtin: registry.Registry) -> None:
    # entropy 1% of its early level, gradient norm exactly 0 (and float dust below 1e-8)
    assert _fires(builtin, "dead_policy_zero_gradient", _dead(0.03, 0.0), 30)
    assert _fires(builtin, "dead_policy_zero_gradient", _dead(0.03, 5e-18), 30)


@pytest.mark.parametrize(
    ("entropy_end", "grad_end", "why"),
    [
        (0.03, 1e-6, "a gradient of 1e-6 still moves the policy"),
        (0.09, 0.0, "entropy at 3% of its scale is not deterministic (the rule's 2%)"),
    ],
)
def test_a_dead_policy_needs_both_exact_conditions(
    builtin: registry.Registry, entropy_end: float, grad_end: float, why: str
) -> None:
    assert not _fires(builtin, "dead_policy_zero_gradient", _dead(entropy_end, grad_end), 30), why


def test_a_dead_rloo_policy_is_dead_whatever_its_zero_std_fraction_reads(
    builtin: registry.Registry,
) -> None:
    """TRL's RLOO counts zero-variance groups after its KL penalty: float noise keeps the
    fraction at 0 on a dead policy half the time, so the group rule cannot hold it."""
    series = _dead(0.0, 0.0)
    series["zero_std_group_fraction"] = as_series((_updates(30), np.tile([0.0, 1.0], 15)))
    assert not _fires(builtin, "grpo_groups_dead", series, 30)
    assert _fires(builtin, "dead_policy_zero_gradient", series, 30)


# ------------------------------------------------------------------ entropy cliff, KL to the reference


def _cliff(fall: float, kl_growth: float, points: int = 200) -> dict[str, Series]:
    """Flat for most of the run, then within the last 12 updates the entropy falls by `fall`
    (a share of 3.0) and the reference KL grows by `kl_growth` (a share of 0.4)."""
    steps = _updates(points)
    ramp = np.clip((steps - (points - 12)) / 10, 0.0, 1.0)
    entropy = 3.0 * (1 - fall * ramp)
    kl = 0.4 * (1 + kl_growth * ramp)
    return {"policy_entropy": as_series((steps, entropy)), "ref_kl": as_series((steps, kl))}


def test_an_entropy_cliff_with_the_reference_kl_climbing_warns(builtin: registry.Registry) -> None:
    # a tenth of a 200-update run is the window: a 40% fall inside it, the KL up 150%
    assert _fires(builtin, "entropy_cliff_with_ref_kl_rising", _cliff(0.4, 1.5), 200)


@pytest.mark.parametrize(
    ("fall", "kl_growth", "why"),
    [
        (0.2, 1.5, "a 20% fall is the narrowing of fine-tuning, not the rule's 30% cliff"),
        (0.4, 0.2, "a KL up a fifth is no growth of the update size (the rule's 50%)"),
        (0.0, 1.5, "the KL alone says nothing about a collapse"),
    ],
)
def test_an_entropy_cliff_needs_both_gauges(
    builtin: registry.Registry, fall: float, kl_growth: float, why: str
) -> None:
    assert not _fires(builtin, "entropy_cliff_with_ref_kl_rising", _cliff(fall, kl_growth), 200), (
        why
    )


def test_a_slow_narrowing_over_the_whole_run_is_no_cliff(builtin: registry.Registry) -> None:
    """Entropy -40% and the KL up tenfold over 200 updates: the window is a tenth of the run,
    so a change spread over the whole run is its convergence."""
    steps = _updates(200)
    entropy = 3.0 * (1 - 0.4 * steps / 200)
    kl = 0.05 + 0.5 * steps / 200
    series = {"policy_entropy": as_series((steps, entropy)), "ref_kl": as_series((steps, kl))}
    assert not _fires(builtin, "entropy_cliff_with_ref_kl_rising", series, 200)
