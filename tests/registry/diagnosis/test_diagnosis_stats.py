"""Statistics of one step series: history, variation, trend and the TensorBoard EMA."""

from __future__ import annotations

import math

import numpy as np
import pytest

from registry.diagnosis.stats import (
    as_series,
    change_pct,
    cv,
    deviation_pct,
    ema,
    ema_lag_points,
    ema_lag_steps,
    latest,
    mean,
    median,
    slope_per_1k,
    summarize,
    trend,
)

NAN = math.nan


def tensorboard_ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's classicSmoothing, transcribed point by point (reference/anchors.md §2.1)."""
    if not values:
        return []
    if all(v == values[0] for v in values):
        return list(values)
    s = min(max(weight, 0.0), 1.0)
    last, n, out = 0.0, 0, []
    for y in values:
        if not math.isfinite(y):
            out.append(y)
            continue
        last = s * last + (1 - s) * y
        n += 1
        out.append(last if s == 1 else last / (1 - s**n))
    return out


def test_a_relogged_step_keeps_its_last_value_and_steps_are_sorted() -> None:
    s = as_series(([3, 1, 2, 1], [30.0, 10.0, 20.0, 11.0]))
    assert s.steps.tolist() == [1, 2, 3]
    assert s.values.tolist() == [11.0, 20.0, 30.0]


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        as_series(([1, 2], [1.0]))


def test_current_value_is_the_latest_finite_point() -> None:
    s = as_series(([1, 2, 3, 4], [1.0, 2.0, NAN, math.inf]))
    point = latest(s)
    assert point is not None and (point.step, point.value) == (2, 2.0)


def test_mean_and_median_skip_nan_gaps_and_say_none_without_data() -> None:
    s = as_series(([1, 2, 3, 4, 5], [1.0, NAN, 3.0, NAN, 8.0]))
    assert mean(s) == pytest.approx(4.0)
    assert median(s) == 3.0
    empty = as_series(([1, 2], [NAN, NAN]))
    assert mean(empty) is None and median(empty) is None and latest(empty) is None


def test_deviation_is_percent_of_the_absolute_reference() -> None:
    assert deviation_pct(12.0, 10.0) == pytest.approx(20.0)
    assert deviation_pct(-12.0, -10.0) == pytest.approx(-20.0)
    assert deviation_pct(1.0, 0.0) is None
    assert deviation_pct(None, 1.0) is None


def test_cv_is_std_over_absolute_mean_and_undefined_at_zero_mean() -> None:
    s = as_series(([1, 2, 3, 4], [1.0, 3.0, 1.0, 3.0]))
    assert cv(s) == pytest.approx(0.5)
    assert cv(as_series(([1, 2], [-1.0, 1.0]))) is None
    assert cv(as_series(([1], [5.0]))) is None


def test_cv_in_the_summary_covers_only_the_last_100_steps() -> None:
    steps = np.arange(0, 300)
    values = np.where(steps < 200, np.where(steps % 2 == 0, 1.0, 100.0), 10.0)
    summary = summarize(as_series((steps, values)))
    assert summary.cv == 0.0
    assert summary.cv_steps == 100


def test_slope_per_1k_is_exact_on_a_line_with_uneven_steps() -> None:
    steps = np.array([0, 10, 15, 40, 100])
    s = as_series((steps, 2.0 + 0.003 * steps))
    assert slope_per_1k(s) == pytest.approx(3.0)
    t = trend(s)
    assert t is not None and t.direction == "up" and t.slope_per_1k == pytest.approx(3.0)


def test_trend_sign_is_down_up_or_flat(rng: np.random.Generator) -> None:
    steps = np.arange(500)
    down = trend(as_series((steps, 5.0 - 0.004 * steps + rng.normal(0, 0.05, 500))))
    assert down is not None and down.direction == "down"
    flat = trend(as_series((steps, 5.0 + rng.normal(0, 0.05, 500))))
    assert flat is not None and flat.direction == "flat"
    constant = trend(as_series((steps, np.full(500, 2.0))))
    assert constant is not None and constant.direction == "flat" and constant.slope_per_1k == 0.0


def test_trend_and_slope_need_two_distinct_steps() -> None:
    assert slope_per_1k(as_series(([5], [1.0]))) is None
    assert trend(as_series(([5, 6], [1.0, NAN]))) is None


def test_change_pct_compares_the_last_quarter_with_the_first() -> None:
    s = as_series((np.arange(8), [1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 2.0, 2.0]))
    assert change_pct(s) == pytest.approx(100.0)
    assert change_pct(as_series(([1, 2, 3], [1.0, 2.0, 3.0]))) is None
    assert change_pct(as_series((np.arange(8), [0.0] * 2 + [1.0] * 6))) is None


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.9, 0.99, 0.999])
def test_ema_matches_the_tensorboard_loop_with_nan_gaps(
    weight: float, rng: np.random.Generator
) -> None:
    values = rng.normal(3.0, 1.0, 400)
    values[[5, 6, 50, 399]] = NAN
    values[[100]] = math.inf
    values[[101]] = -math.inf
    got = ema(values, weight)
    want = tensorboard_ema(values.tolist(), weight)
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    assert got[100] == math.inf and got[101] == -math.inf


def test_ema_passes_a_constant_series_through_unchanged() -> None:
    np.testing.assert_array_equal(ema([2.5] * 10, 0.9), [2.5] * 10)


def test_ema_of_a_step_is_debiased_from_the_first_point() -> None:
    out = ema([10.0, 10.0, 20.0], 0.5)
    assert out[0] == pytest.approx(10.0)  # no pull toward the zero initial state
    assert out[2] == pytest.approx((0.25 * 10 + 0.5 * 20 + 0.125 * 10) / (1 - 0.125))


def test_ema_of_empty_and_all_nan_series() -> None:
    assert ema([], 0.6).size == 0
    assert np.isnan(ema([NAN, NAN], 0.6)).all()


def test_ema_lag_is_s_over_one_minus_s_points_times_the_step_spacing() -> None:
    assert ema_lag_points(0.6) == pytest.approx(1.5)
    assert ema_lag_points(0.9) == pytest.approx(9.0)
    assert ema_lag_points(0.99) == pytest.approx(99.0)
    assert ema_lag_steps(0.9, [0, 10, 20, 30]) == pytest.approx(90.0)
    assert ema_lag_steps(0.9, [0]) is None


def test_summary_of_a_single_point_has_value_but_no_variation_or_trend() -> None:
    s = summarize(as_series(([7], [0.5])))
    assert (s.step, s.value, s.mean, s.deviation_pct) == (7, 0.5, 0.5, 0.0)
    assert s.cv is None and s.trend is None


def test_summary_of_a_constant_series_has_zero_deviation_and_cv() -> None:
    s = summarize(as_series((np.arange(50), np.full(50, 3.0))))
    assert s.deviation_pct == 0.0 and s.cv == 0.0
    assert s.trend is not None and s.trend.direction == "flat"


def test_summary_marks_a_nan_latest_point_and_reports_the_last_finite_one() -> None:
    s = summarize(as_series(([1, 2, 3, 4], [1.0, 2.0, 3.0, NAN])))
    assert not s.latest_is_finite
    assert (s.step, s.value, s.points, s.finite_points) == (3, 3.0, 4, 3)
    assert s.deviation_pct == pytest.approx(50.0)


def test_recent_mean_and_median_cover_only_the_recent_window() -> None:
    steps = np.arange(0, 3000)
    values = np.where(steps < 2000, 1.0, 5.0)
    s = summarize(as_series((steps, values)), recent_steps=1000)
    assert s.recent_mean == 5.0 and s.recent_median == 5.0
    assert s.mean == pytest.approx((2000 + 5000) / 3000)
