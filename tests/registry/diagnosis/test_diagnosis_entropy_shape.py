"""Entropy trajectory shapes and the entropy gradient early warning."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from registry.diagnosis.entropy_shape import classify_entropy, entropy_gradient
from registry.diagnosis.stats import as_series

X = np.arange(300)


def shape_of(values: npt.NDArray[Any]) -> str:
    return classify_entropy(as_series((X, values))).kind


def test_repeated_drops_of_similar_size_between_flat_segments_are_a_staircase_collapse(
    rng: np.random.Generator,
) -> None:
    values = np.repeat([0.5, 0.3, 0.1], 100) + rng.normal(
        0, 0.005, 300
    )  # the seed's 0.5 -> 0.3 -> 0.1
    shape = classify_entropy(as_series((X, values)))
    assert shape.kind == "staircase_collapse" and shape.collapse and not shape.healthy
    assert [d.step for d in shape.drops] == [100, 200]
    assert all(d.size == pytest.approx(0.2, abs=0.03) for d in shape.drops)


def test_drops_spread_over_a_few_steps_still_count_as_one_stair() -> None:
    level = np.repeat([1.2, 0.8, 0.4, 0.0], 75).astype(float)
    for edge in (75, 150, 225):
        level[edge : edge + 3] = np.linspace(level[edge - 1], level[edge + 3], 5)[1:4]
    assert shape_of(level) == "staircase_collapse"


def test_a_single_cliff_is_collapse_but_not_a_staircase(rng: np.random.Generator) -> None:
    shape = classify_entropy(as_series((X, np.where(X < 150, 1.2, 0.1) + rng.normal(0, 0.01, 300))))
    assert shape.kind == "cliff" and shape.collapse and len(shape.drops) == 1


def test_periodic_swings_are_a_sawtooth_with_their_period(rng: np.random.Generator) -> None:
    values = (
        1.0 + 0.2 * np.sin(2 * np.pi * X / 25) + rng.normal(0, 0.02, 300)
    )  # the seed's 0.8-1.2, ~25 steps
    shape = classify_entropy(as_series((X, values)))
    assert shape.kind == "sawtooth"
    assert shape.period_steps == pytest.approx(25, abs=2)
    assert shape.acf_peak is not None and shape.acf_peak >= 0.4


def test_a_ramp_and_reset_wave_is_a_sawtooth_not_a_staircase(rng: np.random.Generator) -> None:
    assert shape_of(1.0 + 0.2 * ((X % 25) / 25) + rng.normal(0, 0.01, 300)) == "sawtooth"


@pytest.mark.parametrize("seed", range(10))
def test_steady_decline_with_small_noise_is_healthy_gradual_decay(seed: int) -> None:
    r = np.random.default_rng(seed)
    linear = classify_entropy(as_series((X, 1.5 - 0.003 * X + r.normal(0, 0.03, 300))))
    assert linear.kind == "gradual_decay" and linear.healthy
    assert linear.slope_per_1k == pytest.approx(-3.0, abs=0.3)
    assert shape_of(0.3 + 1.2 * np.exp(-X / 150) + r.normal(0, 0.03, 300)) == "gradual_decay"


@pytest.mark.parametrize("seed", range(10))
def test_a_flat_noisy_trajectory_is_a_plateau(seed: int) -> None:
    r = np.random.default_rng(seed)
    assert shape_of(0.45 + r.normal(0, 0.01, 300)) == "plateau"


def test_a_constant_series_is_a_plateau() -> None:
    assert shape_of(np.full(300, 0.45)) == "plateau"


def test_rising_entropy_is_neither_decay_nor_plateau(rng: np.random.Generator) -> None:
    assert shape_of(0.5 + 0.002 * X + rng.normal(0, 0.01, 300)) == "rising"


def test_too_few_points_are_insufficient_not_a_guess() -> None:
    assert classify_entropy(as_series(([1], [0.5]))).kind == "insufficient"
    assert (
        classify_entropy(as_series((np.arange(11), np.linspace(1, 0, 11)))).kind == "insufficient"
    )


def test_nan_gaps_do_not_change_the_shape(rng: np.random.Generator) -> None:
    values = np.repeat([0.5, 0.3, 0.1], 100) + rng.normal(0, 0.005, 300)
    values[::7] = math.nan
    assert shape_of(values) == "staircase_collapse"


def test_the_gradient_warns_before_a_collapse_and_estimates_steps_to_zero(
    rng: np.random.Generator,
) -> None:
    steps = np.arange(200)
    values = 1.0 - 0.0005 * steps + rng.normal(0, 0.005, 200)
    values[180:] = values[179] - 0.02 * np.arange(1, 21)  # a sharp fall in the last 20 steps
    grad = entropy_gradient(as_series((steps, values)))
    assert grad is not None and grad.warning
    assert grad.per_step == pytest.approx(-0.02, rel=0.05)
    assert grad.steps_to_zero is not None and 10 < grad.steps_to_zero < 40


@pytest.mark.parametrize("seed", range(5))
def test_the_gradient_stays_quiet_on_a_gradual_decay(seed: int) -> None:
    r = np.random.default_rng(seed)
    steps = np.arange(300)
    grad = entropy_gradient(as_series((steps, 1.5 - 0.003 * steps + r.normal(0, 0.03, 300))))
    assert grad is not None and not grad.warning


def test_the_gradient_needs_history_to_compare_with() -> None:
    steps = np.arange(25)
    grad = entropy_gradient(as_series((steps, 1.0 - 0.03 * steps)))
    assert grad is not None and not grad.warning and grad.baseline_per_step is None
    assert entropy_gradient(as_series(([1], [1.0]))) is None
