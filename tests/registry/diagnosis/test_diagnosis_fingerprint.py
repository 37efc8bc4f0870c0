"""Reward fingerprint and the reward-hacking sentinels: each fires on its case, stays quiet otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from registry.diagnosis.fingerprint import (
    length_rising_reward_flat,
    refusal_rising_with_reward,
    reward_fingerprint,
    rm_rising_eval_not,
    shaped_up_raw_down,
)
from registry.diagnosis.stats import Series, as_series

STEPS = np.arange(200)


def ramp(start: float, end: float, rng: np.random.Generator, noise: float = 0.01) -> Series:
    return as_series(
        (STEPS, np.linspace(start, end, STEPS.size) + rng.normal(0, noise, STEPS.size))
    )


def test_density_is_the_share_of_nonzero_rewards(rng: np.random.Generator) -> None:
    values = np.zeros(100)
    values[::10] = 1.0
    fp = reward_fingerprint(as_series((np.arange(100), values)))
    assert fp is not None and fp.points == 50 and fp.density == pytest.approx(0.1)
    assert fp.variance == pytest.approx(0.09)


def test_consistency_is_high_for_a_smooth_reward_and_near_zero_for_noise(
    rng: np.random.Generator,
) -> None:
    smooth = reward_fingerprint(as_series((np.arange(100), np.sin(np.arange(100) / 10))))
    noise = reward_fingerprint(as_series((np.arange(100), rng.normal(0, 1, 100))))
    assert smooth is not None and smooth.consistency is not None and smooth.consistency > 0.8
    assert noise is not None and noise.consistency is not None and abs(noise.consistency) < 0.35


def test_a_constant_reward_has_no_consistency_and_too_few_points_no_fingerprint() -> None:
    fp = reward_fingerprint(as_series((np.arange(20), np.full(20, 1.0))))
    assert fp is not None and fp.consistency is None and fp.variance == 0.0 and fp.density == 1.0
    assert reward_fingerprint(as_series(([1, 2], [1.0, 2.0]))) is None


def test_shaped_up_while_raw_down_fires(rng: np.random.Generator) -> None:
    res = shaped_up_raw_down(ramp(1.0, 2.0, rng), ramp(1.0, 0.6, rng))
    assert res.fired and res.name == "reward_hacking"
    assert res.observed["shaped_change_pct"] is not None and res.observed["shaped_change_pct"] > 50
    assert res.observed["raw_change_pct"] is not None and res.observed["raw_change_pct"] < -20


def test_shaped_and_raw_rising_together_is_quiet(rng: np.random.Generator) -> None:
    assert not shaped_up_raw_down(ramp(1.0, 2.0, rng), ramp(1.0, 1.8, rng)).fired


def test_length_rising_while_reward_flat_fires_and_rising_reward_is_quiet(
    rng: np.random.Generator,
) -> None:
    length = ramp(200, 600, rng, noise=5)
    assert length_rising_reward_flat(length, ramp(1.0, 1.01, rng)).fired
    assert not length_rising_reward_flat(length, ramp(1.0, 2.0, rng)).fired
    assert not length_rising_reward_flat(ramp(200, 205, rng), ramp(1.0, 1.01, rng)).fired


def test_refusal_rising_with_reward_fires_and_falling_refusal_is_quiet(
    rng: np.random.Generator,
) -> None:
    assert refusal_rising_with_reward(ramp(0.05, 0.3, rng, 0.002), ramp(1.0, 1.5, rng)).fired
    assert not refusal_rising_with_reward(ramp(0.3, 0.05, rng, 0.002), ramp(1.0, 1.5, rng)).fired


def test_rm_score_rising_while_eval_does_not_fires_on_sparse_evals(
    rng: np.random.Generator,
) -> None:
    rm = as_series((np.arange(0, 5000, 10), np.linspace(0.0, 1.0, 500) + 1.0))
    eval_steps = np.arange(0, 5000, 500)  # ten evaluations
    flat_eval = as_series((eval_steps, 0.6 + rng.normal(0, 0.001, eval_steps.size)))
    rising_eval = as_series((eval_steps, np.linspace(0.5, 0.8, eval_steps.size)))
    assert rm_rising_eval_not(rm, flat_eval).fired
    assert not rm_rising_eval_not(rm, rising_eval).fired


def test_sentinels_stay_quiet_with_too_little_data(rng: np.random.Generator) -> None:
    short = as_series(([1, 2, 3], [1.0, 2.0, 3.0]))
    res = shaped_up_raw_down(short, ramp(1.0, 0.5, rng))
    assert not res.fired and res.reason is not None and "shaped" in res.reason
    empty = shaped_up_raw_down(as_series(([], [])), short)
    assert not empty.fired and empty.reason == "no data"
