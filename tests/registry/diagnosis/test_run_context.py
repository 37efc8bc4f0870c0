"""The run context: read from config and series, shown on cards, and the judgements it changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import registry
from registry.diagnosis import build_card
from registry.diagnosis.context import run_context
from registry.diagnosis.stats import as_series

STEPS = np.arange(512, 512 * 61, 512)  # an SB3-like run: one point per rollout of 512 env steps


@pytest.fixture(scope="module")
def shipped() -> registry.Registry:
    return registry.load()


def test_a_uniform_first_entropy_names_the_discrete_action_count() -> None:
    ent = as_series((STEPS, np.linspace(math.log(4) * 0.995, 0.8, STEPS.size)))
    ctx = run_context({"framework": "sb3"}, {"policy_entropy": ent})
    assert (ctx.action_space, ctx.n_actions, ctx.step_unit, ctx.cadence) == (
        "discrete",
        4,
        "env_steps",
        512.0,
    )
    assert "ln 4" in ctx.sources["n_actions"]
    assert ctx.describe().startswith(
        "read as: SB3, 4 discrete actions, one point per 512 env steps"
    )


def test_config_wins_over_inference() -> None:
    ent = as_series((STEPS, np.full(STEPS.size, math.log(2))))
    ctx = run_context(
        {"framework": "sb3", "n_actions": 3, "clip_epsilon": 0.1}, {"policy_entropy": ent}
    )
    assert (ctx.n_actions, ctx.clip_epsilon, ctx.sources["n_actions"]) == (3, 0.1, "config")


def test_every_card_carries_the_context(shipped: registry.Registry) -> None:
    data = {"policy_entropy": (STEPS, np.linspace(0.69, 0.4, STEPS.size))}
    card = build_card(shipped, "policy_entropy", data, {"framework": "sb3", "algorithm": "PPO"})
    ctx = card.to_dict()["context"]
    assert ctx["text"] == "read as: SB3 PPO, 2 discrete actions, one point per 512 env steps"
    assert ctx["text"] in card.reading


def test_grpo_with_one_iteration_has_a_zero_clip_ratio_by_construction(
    shipped: registry.Registry,
) -> None:
    steps = np.arange(1, 201)
    data = {"clip_fraction": (steps, np.zeros(steps.size))}
    cfg = {"framework": "trl", "algorithm": "GRPO", "num_iterations": 1}
    card = build_card(shipped, "clip_fraction", data, cfg)
    assert card.status == "ok" and any(e.kind == "mechanics" for e in card.evidence)
    two = build_card(shipped, "clip_fraction", data, {**cfg, "num_iterations": 2})
    assert two.status == "watch"  # with two iterations a clip ratio of 0 is outside its band


def test_a_learning_rate_annealed_to_zero_is_not_silence(shipped: registry.Registry) -> None:
    clip = np.where(STEPS < 20000, 0.1, 0.0)
    lr = np.linspace(1e-3, 1e-7, STEPS.size)
    data = {"clip_fraction": (STEPS, clip), "learning_rate": (STEPS, lr)}
    annealed = build_card(shipped, "clip_fraction", data, {"framework": "sb3"})
    assert annealed.status == "ok" and "annealed" in annealed.reading
    constant = {**data, "learning_rate": (STEPS, np.full(STEPS.size, 1e-3))}
    silent = build_card(shipped, "clip_fraction", constant, {"framework": "sb3"})
    assert silent.status == "warning" and any(e.kind == "silence" for e in silent.evidence)


def test_sb3_cumulative_fps_is_judged_as_a_rate_from_the_first_update(
    shipped: registry.Registry,
) -> None:
    # SAC-like: 8000 steps/s before learning_starts, 120 steps/s of training after it; SB3's
    # time/fps is steps since start / seconds since start, so it keeps sinking towards 120
    steps = np.arange(200, 6001, 200)
    elapsed = np.where(steps <= 600, steps / 8000.0, 600 / 8000.0 + (steps - 600) / 120.0)
    fps = steps / elapsed
    train = steps[steps >= 800]
    data = {
        "samples_per_second": (steps, fps),
        "policy_loss": (train, np.linspace(10, 60, train.size)),
    }
    card = build_card(shipped, "samples_per_second", data, {"framework": "sb3"})
    assert card.status in ("ok", "watch"), card.reading
    assert card.value == pytest.approx(120.0)


def test_negative_entropy_is_healthy_for_continuous_and_a_sign_error_for_discrete(
    shipped: registry.Registry,
) -> None:
    data = {"policy_entropy": (STEPS, np.linspace(1.4, -0.5, STEPS.size))}
    cont = build_card(
        shipped, "policy_entropy", data, {"framework": "sb3", "action_space": "continuous"}
    )
    assert not any(e.kind == "limits" for e in cont.evidence), cont.reading
    disc = build_card(shipped, "policy_entropy", data, {"framework": "sb3", "n_actions": 4})
    assert any(e.kind == "limits" and e.severity == "warning" for e in disc.evidence)


def test_a_collapsed_discrete_entropy_is_judged_against_ln_n(shipped: registry.Registry) -> None:
    ent = np.concatenate([np.full(10, 0.69), np.full(STEPS.size - 10, 0.01)])
    card = build_card(
        shipped, "policy_entropy", {"policy_entropy": (STEPS, ent)}, {"framework": "sb3"}
    )
    assert card.status in ("warning", "critical")
    assert "0.01386" in card.reading  # 2 % of ln 2, the critical threshold


def test_advice_follows_the_side_of_the_band(shipped: registry.Registry) -> None:
    # a band the run gives (with no action space the registry's entropy band is not judged)
    cfg = {
        "stage_boundaries": {"early_end": 2000, "mid_end": 20000},
        "bands": {"policy_entropy": {"mid": [0.3, 1.2]}},
    }
    steps = np.arange(0, 5000, 10)
    high = build_card(
        shipped, "policy_entropy", {"policy_entropy": (steps, np.full(steps.size, 2.0))}, cfg
    )
    low = build_card(
        shipped, "policy_entropy", {"policy_entropy": (steps, np.full(steps.size, 0.2))}, cfg
    )
    assert high.band is not None and high.band.value > (high.band.high or 0)
    assert low.band is not None and low.band.value < (low.band.low or 0)
    cliff_advice = "Raise the entropy coefficient or lower the learning rate; roll back to the last checkpoint before the cliff."
    assert cliff_advice in low.actions and cliff_advice not in high.actions
    assert any("Lower the entropy coefficient" in a for a in high.actions)


def test_a_nan_count_is_critical_without_corroboration(shipped: registry.Registry) -> None:
    steps = np.arange(1, 40)
    counts = np.where(steps >= 30, 1.0, 0.0)
    card = build_card(
        shipped, "nonfinite_count", {"nonfinite_count": (steps, counts)}, {"framework": "trl"}
    )
    assert card.status == "critical", card.reading


def test_reward_regression_is_measured_from_the_running_best_and_clears_on_recovery() -> None:
    from registry.diagnosis.rules import drop_from_best

    rng = np.random.default_rng(0)
    learn = np.linspace(0.0, 100.0, 40)
    fallen = np.concatenate([learn, np.full(20, 20.0)]) + rng.normal(0, 2.0, 60)
    steps = np.arange(fallen.size)
    lost = drop_from_best(as_series((steps, fallen)))
    assert lost is not None and 0.7 < lost < 0.9  # about 80 of the 100 gained
    recovered = np.concatenate([fallen, np.full(30, 101.0)])
    assert drop_from_best(as_series((np.arange(recovered.size), recovered))) == 0.0
    noise = rng.normal(10.0, 3.0, 60)  # no gain beyond noise: not judged
    assert drop_from_best(as_series((steps, noise))) is None


def test_the_default_update_metrics_are_the_registrys(builtin: registry.Registry) -> None:
    """`run_context` without a registry reads the update metrics the built-in registry declares."""
    from registry.diagnosis.context import DEFAULT_UPDATE_METRICS

    assert builtin.update_metrics() == DEFAULT_UPDATE_METRICS
