"""The token-policy rules (registry/rules.yaml, "language-model collapse"), each at its boundary,
from the numbers in its reason: the reward halved (beyond three standard errors of one point)
with the entropy tripled, with half the answers cut at the length limit, with the reference KL
tenfold; the reward under a tenth of its start with nine in ten groups without variance; the
entropy halved with half the answers at the limit; nine in ten answers cut with nine in ten
groups alike; the loss climbing with the KL while the reward is flat. Published runs motivated
them (calibration/llm_corpus); these series are shapes, the expectations the rules' stated
thresholds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import registry
from registry.diagnosis.rules import RuleContext, evaluate_rule
from registry.diagnosis.stats import Series, as_series

# a 200-update run logged every 5 updates (40 points): its early level is its first points'
TRL = {"framework": "trl", "action_space": "token", "planned_steps": 200}
STEADY = 12  # logged points before the change


def _fires(
    reg: registry.Registry, rule_id: str, series: dict[str, Series], points: int = 40
) -> bool:
    """`points`: the run's length in logged points (a window spans at most a tenth of it)."""
    (rule,) = [r for r in reg.rules if r.id == rule_id]
    ctx = RuleContext.of(reg, TRL, reg.stages_for(TRL, planned_steps=200), run_points=points)
    return evaluate_rule(rule, series, ctx).fired


def _series(before: float, after: float, *, wobble: float = 0.02, n: int = 3) -> Series:
    """`STEADY` points near `before` (alternating +-wobble), then `n` points at `after`."""
    values = [before + (wobble if i % 2 else -wobble) for i in range(STEADY)] + [after] * n
    return as_series((np.arange(1, len(values) + 1) * 5, np.array(values, dtype=float)))


# ------------------------------------------------------------------ the reward halved


@pytest.mark.parametrize(
    ("after", "fires"),
    [(0.40, True), (0.45, False)],  # 0.40 / 0.85 = 0.47 <= 0.5; 0.45 / 0.85 = 0.53
)
def test_the_task_reward_halved_for_two_points_warns(
    builtin: registry.Registry, after: float, fires: bool
) -> None:
    assert _fires(builtin, "task_reward_halved", {"raw_reward": _series(0.85, after)}) is fires


def test_a_halving_within_the_rewards_own_swing_is_not_judged(
    builtin: registry.Registry,
) -> None:
    # a batch of a few prompts: the reward swings 0.1-0.6 around 0.35; 0.1 for two points is
    # within three standard errors of one point
    steps = np.arange(1, 17) * 5
    swing = np.array([0.35, 0.6, 0.1, 0.5, 0.25, 0.6, 0.1, 0.35, 0.5, 0.2, 0.6, 0.3, 0.1, 0.1, 0.1])
    reward = as_series((steps[: swing.size], swing))
    assert not _fires(builtin, "task_reward_halved", {"raw_reward": reward})


def test_one_halved_point_is_not_two(builtin: registry.Registry) -> None:
    assert not _fires(builtin, "task_reward_halved", {"raw_reward": _series(0.85, 0.1, n=1)})


@pytest.mark.parametrize(
    ("entropy_after", "fires"),
    [(0.45, True), (0.40, False)],  # early 0.15: x3 = 0.45
)
def test_entropy_tripled_with_the_reward_halved_warns(
    builtin: registry.Registry, entropy_after: float, fires: bool
) -> None:
    series = {
        "raw_reward": _series(0.85, 0.2),
        "policy_entropy": _series(0.15, entropy_after, wobble=0.005),
    }
    assert _fires(builtin, "token_entropy_surge_with_reward_collapse", series) is fires


def test_entropy_tripled_while_the_reward_holds_is_not_a_collapse(
    builtin: registry.Registry,
) -> None:
    # a published healthy run's token entropy went x5 for a few points with the reward at 0.875
    series = {
        "raw_reward": _series(0.85, 0.85),
        "policy_entropy": _series(0.15, 0.8, wobble=0.005),
    }
    assert not _fires(builtin, "token_entropy_surge_with_reward_collapse", series)


@pytest.mark.parametrize(("truncated", "fires"), [(0.5, True), (0.45, False)])
def test_answers_at_the_limit_with_the_reward_halved_warn(
    builtin: registry.Registry, truncated: float, fires: bool
) -> None:
    series = {
        "raw_reward": _series(0.85, 0.2),
        "truncation_rate": _series(0.02, truncated, wobble=0.01),
    }
    assert _fires(builtin, "length_limit_with_reward_collapse", series) is fires


def test_answers_at_the_limit_while_the_reward_holds_are_long_reasoning(
    builtin: registry.Registry,
) -> None:
    series = {
        "raw_reward": _series(0.85, 0.9),
        "truncation_rate": _series(0.02, 0.95, wobble=0.01),
    }
    assert not _fires(builtin, "length_limit_with_reward_collapse", series)


@pytest.mark.parametrize(("kl_after", "fires"), [(0.05, True), (0.045, False)])  # early 0.005
def test_the_reference_kl_tenfold_with_the_reward_halved_warns(
    builtin: registry.Registry, kl_after: float, fires: bool
) -> None:
    series = {
        "raw_reward": _series(0.85, 0.2),
        "ref_kl": _series(0.005, kl_after, wobble=0.0005),
    }
    assert _fires(builtin, "ref_kl_surge_with_reward_collapse", series) is fires


# ------------------------------------------------------------------ no learning signal left


@pytest.mark.parametrize(
    ("reward_after", "zero_std", "fires"),
    [
        (0.08, 0.9, True),  # under a tenth of 0.85, nine in ten groups without variance
        (0.09, 0.9, False),  # 0.09 / 0.85 = 0.106: over a tenth
        (0.0, 0.85, False),  # groups with variance left: a signal remains
    ],
)
def test_the_reward_gone_with_the_groups_variance_is_critical(
    builtin: registry.Registry, reward_after: float, zero_std: float, fires: bool
) -> None:
    series = {
        "raw_reward": _series(0.85, reward_after, n=6),
        "zero_std_group_fraction": _series(0.3, zero_std, wobble=0.05, n=6),
    }
    assert _fires(builtin, "reward_gone_groups_without_variance", series) is fires
    (rule,) = [r for r in builtin.rules if r.id == "reward_gone_groups_without_variance"]
    assert rule.severity == "critical"


def test_groups_without_variance_because_every_answer_is_right_are_not_dead(
    builtin: registry.Registry,
) -> None:
    # a model that solves most prompts: 90-100% of its groups all right, the reward at 0.95
    series = {
        "raw_reward": _series(0.9, 0.95, n=6),
        "zero_std_group_fraction": _series(0.9, 1.0, wobble=0.05, n=6),
    }
    assert not _fires(builtin, "reward_gone_groups_without_variance", series)


# ------------------------------------------------------------------ repetition loops


@pytest.mark.parametrize(
    ("entropy_after", "truncated", "fires"),
    [(0.49, 0.5, True), (0.55, 0.5, False), (0.49, 0.45, False)],  # early entropy ~1.0
)
def test_entropy_halved_with_answers_at_the_limit_warns(
    builtin: registry.Registry, entropy_after: float, truncated: float, fires: bool
) -> None:
    series = {
        "policy_entropy": _series(1.0, entropy_after, wobble=0.01),
        "truncation_rate": _series(0.02, truncated, wobble=0.01),
    }
    assert _fires(builtin, "token_entropy_cliff_with_answers_at_limit", series) is fires


# ------------------------------------------------------------------ answers cut, groups alike


def _from_the_start(values: list[float]) -> Series:
    """A run judged from its first logged point: no earlier level to compare with."""
    return as_series((np.arange(1, len(values) + 1) * 10, np.array(values, dtype=float)))


@pytest.mark.parametrize(
    ("truncated", "alike", "fires"),
    [
        # a rule is judged from a run's second point and must hold at two: the third point
        ([0.975, 1.0, 1.0], [0.975, 1.0, 1.0], True),  # broken from the first point
        ([0.2, 0.9, 0.9], [0.2, 0.9, 0.9], True),  # nine in ten of both: at the boundary
        ([0.2, 0.85, 0.9], [0.2, 0.9, 0.9], False),  # answers that still end: something to score
        ([0.2, 0.9, 0.9], [0.2, 0.85, 0.9], False),  # groups that still differ: a signal left
        ([0.2, 0.2, 0.95, 0.2], [0.5, 0.5, 1.0, 0.5], False),  # one point of a passing transient
    ],
)
def test_answers_cut_with_groups_alike_warn_without_an_earlier_level(
    builtin: registry.Registry, truncated: list[float], alike: list[float], fires: bool
) -> None:
    series = {
        "truncation_rate": _from_the_start(truncated),
        "zero_std_group_fraction": _from_the_start(alike),
    }
    assert _fires(builtin, "answers_cut_and_groups_alike", series) is fires


@pytest.mark.parametrize(
    ("alike", "fires"),
    [
        ([0.5] * 5 + [1.0] * 5, True),  # every group alike at five points in a row
        ([0.5] * 6 + [1.0] * 4, False),  # four: a few prompts a step do that by chance
        ([0.5] * 5 + [1.0, 1.0, 0.97, 1.0, 1.0], False),  # a group that differed: a signal
    ],
)
def test_every_group_alike_for_five_points_is_a_watch(
    builtin: registry.Registry, alike: list[float], fires: bool
) -> None:
    series = {"zero_std_group_fraction": _from_the_start(alike)}
    # a run of 100 logged points: its window is not narrowed to a tenth of a shorter run
    assert _fires(builtin, "groups_alike_no_signal", series, points=100) is fires
    (rule,) = [r for r in builtin.rules if r.id == "groups_alike_no_signal"]
    assert rule.severity == "watch"  # a solved batch looks the same: no alarm


# ------------------------------------------------------------------ drift without gain


def _rising(start: float, end: float, n: int = 20) -> Series:
    return as_series((np.arange(1, n + 1) * 5, np.linspace(start, end, n)))


def test_the_loss_climbing_with_the_kl_while_the_reward_is_flat_warns(
    builtin: registry.Registry,
) -> None:
    # a run logged at every one of its 200 updates: a twenty-point window
    flat = as_series((np.arange(1, 21) * 5, np.full(20, 0.6)))
    series = {"total_loss": _rising(0.01, 0.05), "ref_kl": _rising(0.01, 0.08), "raw_reward": flat}
    assert _fires(builtin, "loss_rising_with_ref_kl_reward_flat", series, points=200)
    rising = {**series, "raw_reward": _rising(0.4, 0.8)}
    assert not _fires(builtin, "loss_rising_with_ref_kl_reward_flat", rising, points=200)


# ------------------------------------------------------------------ reward parts moving apart


def _parts(task_end: float, bonus_end: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """40 points: the accuracy part 0.5 then falling to `task_end`, the format part 0.3 then
    rising to `bonus_end`, over the last half; a little noise on each."""
    steps = np.arange(1, 41) * 5
    rng = np.random.default_rng(0)
    acc = np.concatenate([np.full(20, 0.5), np.linspace(0.5, task_end, 20)]) + rng.normal(
        0, 0.02, 40
    )
    fmt = np.concatenate([np.full(20, 0.3), np.linspace(0.3, bonus_end, 20)]) + rng.normal(
        0, 0.02, 40
    )
    return {
        "raw_reward": (steps, acc + fmt),
        "reward_component/accuracy_reward": (steps, acc),
        "reward_component/format_reward": (steps, fmt),
    }


def _parts_card(reg: registry.Registry, series: dict[str, Any], **cfg: Any) -> Any:
    from registry.diagnosis.card import build_card

    return build_card(
        reg, "raw_reward", series, {"framework": "trl", "action_space": "token", **cfg}
    )


def test_the_task_part_falling_while_another_rises_is_reward_hacking(
    builtin: registry.Registry,
) -> None:
    # what open-r1's users reported: accuracy reward towards 0 while the format reward rises
    card = _parts_card(builtin, _parts(0.05, 0.95), task_reward="accuracy_reward")
    apart = [e for e in card.evidence if e.kind == "sentinel" and "parts moving apart" in e.text]
    assert card.status == "warning" and len(apart) == 1 and apart[0].severity == "warning"
    assert "accuracy_reward" in apart[0].text and "reward hacking" in apart[0].text


def test_parts_moving_apart_with_no_task_part_named_are_watched_and_say_how_to_name_it(
    builtin: registry.Registry,
) -> None:
    card = _parts_card(builtin, _parts(0.05, 0.95))
    (sentinel,) = [e for e in card.evidence if e.kind == "sentinel"]
    assert sentinel.severity == "watch" and "task_reward=NAME" in sentinel.text


def test_parts_that_rise_together_are_not_moving_apart(builtin: registry.Registry) -> None:
    card = _parts_card(builtin, _parts(0.9, 0.95), task_reward="accuracy_reward")
    assert not [e for e in card.evidence if e.kind == "sentinel"]
