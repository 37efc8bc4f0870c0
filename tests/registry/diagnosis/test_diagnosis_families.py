"""Each family's own vital signs (DESIGN.md, "Diagnosis principles"), on series built to the
shape each promise names: the context a family's logged metrics give, a critic against the
bound its returns allow, a Gaussian policy's spread both ways, the return against where it
started and a random policy, a converged control policy's low entropy, a reward whose gain is
its bonus, and throughput, which never sets a run's status."""

from __future__ import annotations

import math

import numpy as np
import pytest

import registry
from registry.diagnosis import build_card, diagnose, run_status
from registry.diagnosis.context import run_context
from registry.diagnosis.stats import as_series

SB3 = {"framework": "sb3"}


def _steps(n: int, every: int = 200, first: int = 200) -> np.ndarray:
    return first + every * np.arange(n)


def _kinds(card: object) -> dict[str, str]:
    return {e.kind: e.severity for e in card.evidence}  # type: ignore[attr-defined]


# ------------------------------------------------------------------ context per family


@pytest.mark.parametrize(
    ("logged", "algorithm", "family", "space"),
    [
        (("total_loss", "exploration_rate", "episodic_return"), "DQN", "off_policy", None),
        (("policy_loss", "value_loss", "episodic_return"), "TD3/DDPG", "off_policy", "continuous"),
        (("entropy_coef", "policy_loss", "value_loss"), "SAC", "off_policy", "continuous"),
        (("policy_entropy", "policy_kl", "clip_fraction"), "PPO", "on_policy", None),
        (("policy_entropy", "policy_loss", "value_loss"), "A2C", "on_policy", None),
    ],
)
def test_a_familys_logged_metrics_name_its_algorithm(
    logged: tuple[str, ...], algorithm: str, family: str, space: str | None
) -> None:
    series = {m: as_series((_steps(10), np.linspace(1.0, 2.0, 10))) for m in logged}
    ctx = run_context(SB3, series)
    assert (ctx.algorithm, ctx.family) == (algorithm, family)
    if space is not None:
        assert ctx.action_space == space


def test_an_off_policy_learner_starts_learning_at_its_first_update() -> None:
    """SB3 logs no update metric during learning_starts: the first one marks it."""
    returns = as_series((_steps(20, first=100), np.full(20, 20.0)))
    loss = as_series((_steps(10, first=1100), np.full(10, 0.1)))
    ctx = run_context(SB3, {"episodic_return": returns, "total_loss": loss})
    assert (ctx.algorithm, ctx.learning_starts, ctx.first_update) == ("DQN", 1100, 1100)
    assert "learning from step 1,100" in ctx.describe()


def test_epsilon_reaching_its_floor_ends_exploration() -> None:
    eps = as_series((_steps(10), [1.0, 0.8, 0.6, 0.4, 0.2, 0.05, 0.05, 0.05, 0.05, 0.05]))
    assert run_context(SB3, {"exploration_rate": eps}).exploration_end == 1200
    falling = as_series((_steps(5), [1.0, 0.8, 0.6, 0.4, 0.2]))
    assert run_context(SB3, {"exploration_rate": falling}).exploration_end is None


def test_a_metric_the_family_lacks_says_so(builtin: registry.Registry) -> None:
    series = {
        "total_loss": (_steps(10), np.full(10, 0.1)),
        "exploration_rate": (_steps(10), np.ones(10)),
    }
    card = build_card(builtin, "policy_kl", series, SB3)
    assert card.status == "no_data" and card.reason is not None
    assert card.reason.startswith("not logged: DQN has none")


# ------------------------------------------------------------------ value side


def _dqn(loss: list[float], ret: float = 20.0) -> dict[str, object]:
    n = len(loss)
    return {
        "total_loss": (_steps(n, first=1000), loss),
        "episodic_return": (_steps(n, first=1000), np.full(n, ret)),
        "exploration_rate": (_steps(n, first=1000), np.full(n, 0.05)),
    }


def test_a_td_loss_past_what_the_returns_allow_is_critical_from_its_first_points(
    builtin: registry.Registry,
) -> None:
    """|Q| <= R = 20 makes a TD error at most 2R and the loss at most 2R² = 800: a loss of 3e4
    twice is estimates outside any achievable range, however short its history."""
    card = build_card(builtin, "total_loss", _dqn([2.8e4, 7.5e5]), SB3)
    assert card.status == "critical" and _kinds(card)["value_scale"] == "critical"
    once = build_card(builtin, "total_loss", _dqn([0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 900.0]), SB3)
    assert _kinds(once)["value_scale"] == "warning"  # one point past it


def test_a_healthy_critic_grows_with_its_q_values_inside_the_bound(
    builtin: registry.Registry,
) -> None:
    """A DQN on Acrobot: the TD loss grows 700x as |Q| grows, still far under 2R² (R = 500)."""
    loss = list(np.geomspace(5e-4, 0.35, 40))
    card = build_card(builtin, "total_loss", _dqn(loss, ret=-500.0), SB3)
    assert _kinds(card)["value_scale"] == "ok" and card.status in ("ok", "watch")


def test_a_policy_gradient_total_loss_is_not_a_td_loss(builtin: registry.Registry) -> None:
    series = {
        "total_loss": (np.arange(1, 41), np.full(40, 5.0)),
        "raw_reward": (np.arange(1, 41), np.full(40, 0.3)),
        "zero_std_group_fraction": (np.arange(1, 41), np.full(40, 0.1)),
    }
    card = build_card(builtin, "total_loss", series, {"framework": "trl"})
    assert "value_scale" not in _kinds(card)


# ------------------------------------------------------------------ a Gaussian policy's spread


def _ppo_std(stds: list[float]) -> dict[str, object]:
    n = len(stds)
    steps = _steps(n, every=1024, first=2048)
    return {
        "action_std": (steps, stds),
        "policy_entropy": (steps, [1.42 + math.log(s) for s in stds]),
        "clip_fraction": (steps, np.full(n, 0.1)),
    }


@pytest.mark.parametrize(
    ("stds", "severity"),
    [
        ([1.0, 1.2, 1.5, 2.0, 2.5, 3.2, 3.5], "warning"),  # tripled: paid to be random
        ([1.0, 1.5, 2.5, 4.0, 7.0, 11.0, 12.0], "critical"),  # tenfold
        ([1.0, 0.1, 0.01, 1e-3, 5e-4, 4e-4, 3e-4], "warning"),  # a thousandth: no exploration left
        ([1.0, 0.8, 0.6, 0.4, 0.2, 0.12, 0.09], "ok"),  # a healthy narrowing by one order
    ],
)
def test_a_gaussian_policys_spread_is_judged_both_ways(
    builtin: registry.Registry, stds: list[float], severity: str
) -> None:
    card = build_card(builtin, "action_std", _ppo_std(stds), {**SB3, "action_space": "continuous"})
    assert _kinds(card)["entropy_spread"] == severity


# ------------------------------------------------------------------ the return's references


def _returns(values: list[float], **cfg: object) -> tuple[dict[str, object], dict[str, object]]:
    n = len(values)
    steps = _steps(n, every=1000, first=1000)
    series = {
        "episodic_return": (steps, values),
        "policy_entropy": (steps, np.full(n, 0.6)),
        "policy_loss": (steps, np.full(n, 0.01)),
    }
    return series, {**SB3, **cfg}


def test_a_return_that_never_rose_is_a_finding_past_the_horizon(
    builtin: registry.Registry,
) -> None:
    rng = np.random.default_rng(0)
    flat = list(-480.0 + rng.normal(0, 3, 30))
    series, cfg = _returns(flat)
    card = build_card(builtin, "episodic_return", series, cfg)
    ref = next(e for e in card.evidence if e.kind == "return_reference")
    assert ref.severity == "warning" and "never_improved" in ref.data["findings"]
    early, _ = _returns(flat[:12])  # too early to call
    card = build_card(builtin, "episodic_return", early, cfg)
    ref = next(e for e in card.evidence if e.kind == "return_reference")
    assert ref.data["findings"] == []


def test_a_return_below_a_random_policys_is_a_finding(builtin: registry.Registry) -> None:
    """CartPole-v1's random policy scores 23.68 (registry/random_returns.yaml); a run sitting at
    the constant-action floor (~9.4) is below it."""
    values = [22.0, 21.0, 23.0, 22.0, 21.0, 20.0, 15.0, 12.0, 10.0, 9.5, 9.4, 9.3, 9.4]
    series, cfg = _returns(values, env="CartPole-v1")
    series["total_loss"] = (_steps(len(values), every=1000, first=1000), np.full(len(values), 0.1))
    card = build_card(builtin, "episodic_return", series, cfg)
    ref = next(e for e in card.evidence if e.kind == "return_reference")
    assert {"below_random", "worse_than_start"} <= set(ref.data["findings"])
    assert ref.data["random"] == pytest.approx(23.68)


# ------------------------------------------------------------------ converged, or collapsed


def _low_entropy(space: str) -> tuple[dict[str, object], dict[str, object]]:
    n = 40
    steps = _steps(n, every=1600, first=1600)
    entropy = np.concatenate([np.linspace(1.09, 0.3, n - 4), [0.12, 0.1, 0.09, 0.09]])
    ret = np.concatenate([np.linspace(-400, -90, n - 10), np.full(10, -88.0)])
    return (
        {"policy_entropy": (steps, entropy), "episodic_return": (steps, ret)},
        {**SB3, "action_space": space, "n_actions": 3},
    )


def test_a_control_policy_that_learned_may_be_nearly_deterministic(
    builtin: registry.Registry,
) -> None:
    series, cfg = _low_entropy("discrete")
    card = build_card(builtin, "policy_entropy", series, cfg)
    assert card.status == "watch" and "converged" in _kinds(card)


def test_a_language_models_entropy_collapse_is_not_excused_by_its_reward(
    builtin: registry.Registry,
) -> None:
    steps = np.arange(1, 61)
    entropy = np.concatenate([np.full(50, 3.1), np.linspace(3.1, 1.2, 10)])
    series = {
        "policy_entropy": (steps, entropy),
        "raw_reward": (steps, np.concatenate([np.linspace(1.2, 2.0, 30), np.full(30, 2.0)])),
    }
    card = build_card(
        builtin, "policy_entropy", series, {"framework": "trl", "action_space": "token"}
    )
    assert card.status in ("warning", "critical") and "converged" not in _kinds(card)


# ------------------------------------------------------------------ a reward whose gain is its bonus


def test_a_reward_rising_through_its_bonus_is_reward_hacking(builtin: registry.Registry) -> None:
    steps = np.arange(1, 61)
    rng = np.random.default_rng(1)
    task = 1.55 + rng.normal(0, 0.05, 60)
    bonus = np.linspace(0.5, 3.0, 60)
    series = {
        "raw_reward": (steps, task + bonus),
        "reward_component/reward": (steps, task),
        "reward_component/length_bonus": (steps, bonus),
    }
    cfg = {"framework": "trl", "algorithm": "GRPO", "task_reward": "reward"}
    (card,) = diagnose(builtin, series, cfg, ["raw_reward"])
    assert card.status == "warning"
    sentinel = next(e for e in card.evidence if e.kind == "sentinel")
    assert sentinel.data["name"] == "shaping_gain"
    assert sentinel.data["observed"]["task_share"] < 0.25


# ------------------------------------------------------------------ throughput


def test_throughput_before_the_first_update_and_throughput_alone_never_warn(
    builtin: registry.Registry,
) -> None:
    """SB3's time/fps is cumulative; during learning_starts (random actions, no gradient) it is
    10-100x the learning rate. The rate before the first update is not the training's, and a
    slowdown is a resource reading: it never makes the run's status."""
    steps = _steps(40, every=250, first=250)
    elapsed = np.where(steps <= 1000, steps / 6000.0, 1000 / 6000.0 + (steps - 1000) / 800.0)
    fps = steps / elapsed
    loss_steps = steps[steps > 1000]
    series = {
        "samples_per_second": (steps, fps),
        "total_loss": (loss_steps, np.full(loss_steps.size, 0.1)),
        "episodic_return": (steps, np.linspace(20, 60, steps.size)),
    }
    cards = diagnose(builtin, series, SB3, ["samples_per_second", "total_loss", "episodic_return"])
    by = {c.metric: c for c in cards}
    assert by["samples_per_second"].status in ("ok", "watch", "no_data")
    slow = dict(series)
    slow["samples_per_second"] = (steps, np.where(steps > 5000, fps * 0.1, fps))
    cards = diagnose(builtin, slow, SB3, ["samples_per_second", "total_loss", "episodic_return"])
    _status, worst = run_status(builtin, cards)
    assert all(c.metric != "samples_per_second" for c in worst)
