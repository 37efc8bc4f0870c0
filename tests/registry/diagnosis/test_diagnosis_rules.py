"""Rule evaluation: every statistic fires on its case and stays quiet on a healthy run."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import registry
from registry.diagnosis.rules import (
    STATS,
    RuleContext,
    acceleration,
    evaluate_rule,
    evaluate_rules,
    window_stat,
)
from registry.diagnosis.stats import Series, as_series
from registry.model import Rule

NAN = math.nan
STEPS = np.arange(100)
WithRules = Callable[..., registry.Registry]


def const(v: float, steps: npt.NDArray[Any] = STEPS) -> npt.NDArray[Any]:
    return np.full(steps.size, v, dtype=float)


def tail_set(base: float, tail: list[float]) -> npt.NDArray[Any]:
    out = const(base)
    out[-len(tail) :] = tail
    return out


# stat, metric, op, threshold, firing values, healthy values (over STEPS unless a tuple is given)
CASES = [
    ("last", "raw_reward", ">", 5.0, tail_set(1.0, [6.0]), tail_set(1.0, [4.0])),
    ("mean", "raw_reward", ">", 5.0, const(6.0), const(4.0)),
    ("min", "raw_reward", "<", 0.0, tail_set(1.0, [-1.0, 1.0, 1.0]), np.r_[-1.0, const(1.0)[1:]]),
    ("max", "grad_norm", ">", 10.0, tail_set(1.0, [50.0, 1.0]), const(1.0)),
    (
        "std",
        "raw_reward",
        ">",
        1.0,
        np.where(STEPS % 2 == 0, 0.0, 4.0),
        np.where(STEPS % 2 == 0, 0.9, 1.1),
    ),
    (
        "cv",
        "raw_reward",
        ">",
        0.5,
        np.where(STEPS % 2 == 0, 0.2, 1.8),
        np.where(STEPS % 2 == 0, 0.9, 1.1),
    ),
    ("slope_per_1k", "policy_entropy", "<", -10.0, 2.0 - 0.02 * STEPS, const(1.0)),
    ("change_pct", "shaped_reward", ">", 20.0, 1.0 + 0.02 * STEPS, 1.0 + 0.0001 * STEPS),
    ("abs_change_pct", "raw_reward", ">", 20.0, 3.0 - 0.02 * STEPS, const(3.0)),
    ("outside_band", "policy_entropy", "==", 1.0, const(0.5), const(1.0)),
]


@pytest.mark.parametrize(
    ("stat", "metric", "op", "value", "bad", "good"), CASES, ids=[c[0] for c in CASES]
)
def test_each_statistic_fires_on_its_case_and_is_quiet_on_a_healthy_run(
    make_rule: Callable[..., Rule],
    reg: registry.Registry,
    stat: str,
    metric: str,
    op: str,
    value: float,
    bad: npt.NDArray[Any],
    good: npt.NDArray[Any],
) -> None:
    rule = make_rule(f"r_{stat}", (metric, stat, op, value))
    ctx = RuleContext.of(reg)
    fired = evaluate_rule(rule, {metric: as_series((STEPS, bad))}, ctx)
    quiet = evaluate_rule(rule, {metric: as_series((STEPS, good))}, ctx)
    assert fired.fired, fired
    assert not quiet.fired, quiet
    (obs,) = fired.observations
    assert obs.metric == metric and obs.stat == stat and obs.observed is not None and obs.holds
    assert fired.to_dict()["observations"][0]["observed"] == obs.observed  # type: ignore[index]


def test_relative_to_early_compares_the_latest_value_with_the_early_stage_mean(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("lost_entropy", ("policy_entropy", "relative_to_early", "<", 0.5), window=200)
    steps = np.arange(0, 3000, 10)
    ctx = RuleContext.of(reg)
    collapsed = evaluate_rule(
        rule, {"policy_entropy": as_series((steps, np.where(steps < 2000, 1.0, 0.3)))}, ctx
    )
    kept = evaluate_rule(
        rule, {"policy_entropy": as_series((steps, np.where(steps < 2000, 1.0, 0.9)))}, ctx
    )
    assert collapsed.fired and collapsed.observations[0].observed == pytest.approx(0.3)
    assert not kept.fired


def test_every_schema_statistic_is_implemented(reg: registry.Registry) -> None:
    schema_stats = {"last", "mean", "min", "max", "std", "cv", "slope_per_1k", "change_pct", "abs_change_pct",
                    "outside_band", "relative_to_early", "abs_max", "fraction_of_scale",
                    "drop_from_best", "acceleration", "share_above", "since_start_abs_max",
                    "never_improved"}  # fmt: skip
    assert set(STATS) == schema_stats
    w = as_series((STEPS, 1.0 + 0.01 * STEPS))
    for stat in STATS:
        window_stat(stat, w, RuleContext.of(reg), "policy_entropy", 1.0)
    with pytest.raises(ValueError, match="unknown rule statistic"):
        window_stat("median", w, RuleContext.of(reg), "policy_entropy", 1.0)


def _accel(values: list[float], n: int) -> float | None:
    h = as_series((np.arange(len(values)), np.array(values, dtype=float)))
    return acceleration(h.tail(n), h)


def test_a_kl_climbing_out_of_zero_is_not_a_surge_but_a_jump_after_a_level_is() -> None:
    # The policy starts equal to its reference: KL is exactly 0, then climbs steadily.
    climb = [0.0] * 20 + [0.02 * i for i in range(40)]
    assert _accel(climb[:40], 20) is None  # the previous window sits at zero: nothing to surge from
    steady = _accel(climb, 20)
    assert steady is not None and steady < 2  # the same rise as before: a trend, not a surge
    jump = [0.5] * 40 + [0.5 + 0.05 * i for i in range(20)]
    surge = _accel(jump, 20)
    assert surge is not None and surge >= 2
    assert _accel([0.5] * 10, 8) is None  # no previous window of four points


def test_a_rule_fires_only_after_holding_for_its_for_steps(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("high", ("raw_reward", "last", ">", 5.0), for_steps=3)
    ctx = RuleContext.of(reg)
    two = evaluate_rule(rule, {"raw_reward": as_series((STEPS, tail_set(1.0, [6.0, 6.0])))}, ctx)
    three = evaluate_rule(
        rule, {"raw_reward": as_series((STEPS, tail_set(1.0, [6.0, 6.0, 6.0])))}, ctx
    )
    assert (two.consecutive, two.fired) == (2, False)
    assert (three.consecutive, three.fired) == (3, True)


def test_the_mini_registry_rule_fires_on_shaped_up_raw_down_and_not_on_a_healthy_run(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    steps = np.arange(300)
    up = 1.0 + 0.005 * steps + rng.normal(0, 0.01, 300)
    down = 1.0 - 0.002 * steps + rng.normal(0, 0.01, 300)
    hacked = {"shaped_reward": as_series((steps, up)), "raw_reward": as_series((steps, down))}
    healthy = {"shaped_reward": as_series((steps, up)), "raw_reward": as_series((steps, up - 0.1))}
    (res,) = evaluate_rules(reg, hacked)
    assert res.fired and res.rule.id == "shaped_up_raw_down" and res.step == 299
    obs = {o.metric: o.observed for o in res.observations}
    assert obs["shaped_reward"] is not None and obs["shaped_reward"] > 5
    assert obs["raw_reward"] is not None and obs["raw_reward"] < -5
    (quiet,) = evaluate_rules(reg, healthy)
    assert not quiet.fired


def test_too_few_points_in_the_window_never_fire_and_say_why(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("high", ("raw_reward", "mean", ">", 5.0), min_points=8)
    res = evaluate_rule(
        rule, {"raw_reward": as_series(([95, 96, 97, 98, 99], [9.0] * 5))}, RuleContext.of(reg)
    )
    assert not res.fired and res.reason is not None and "fewer than 8" in res.reason


def test_a_single_point_or_all_nan_never_fires(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("high", ("raw_reward", "last", ">", 5.0), min_points=2)
    ctx = RuleContext.of(reg)
    assert not evaluate_rule(rule, {"raw_reward": as_series(([1], [9.0]))}, ctx).fired
    assert not evaluate_rule(rule, {"raw_reward": as_series((STEPS, const(NAN)))}, ctx).fired


def test_a_missing_metric_is_reported_not_guessed(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("pair", ("raw_reward", "last", ">", 5.0), ("shaped_reward", "last", ">", 5.0))
    res = evaluate_rule(rule, {"raw_reward": as_series((STEPS, const(9.0)))}, RuleContext.of(reg))
    assert not res.fired and res.reason == "no data for shaped_reward"


def test_nan_gaps_inside_the_window_are_skipped(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("high", ("raw_reward", "mean", ">", 5.0))
    values = const(6.0)
    values[::3] = NAN
    res = evaluate_rule(rule, {"raw_reward": as_series((STEPS, values))}, RuleContext.of(reg))
    assert res.fired and res.observations[0].observed == pytest.approx(6.0)


def test_constant_series_leave_undefined_statistics_quiet(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    ctx = RuleContext.of(reg)
    zero: dict[str, Series] = {"raw_reward": as_series((STEPS, const(0.0)))}
    assert not evaluate_rule(make_rule("cv", ("raw_reward", "cv", ">", 0.0)), zero, ctx).fired
    assert not evaluate_rule(
        make_rule("chg", ("raw_reward", "change_pct", "<", 0.0)), zero, ctx
    ).fired
    flat = {"raw_reward": as_series((STEPS, const(2.0)))}
    res = evaluate_rule(make_rule("std", ("raw_reward", "std", "==", 0.0)), flat, ctx)
    assert res.fired  # zero variance that persists is evidence, and a rule can say so


def test_rules_can_be_filtered_to_the_ones_involving_a_metric(
    make_rule: Callable[..., Rule], with_rules: WithRules
) -> None:
    r = with_rules(
        make_rule("a", ("raw_reward", "last", ">", 0.0)),
        make_rule("b", ("policy_kl", "last", ">", 0.0)),
    )
    series = {"raw_reward": as_series((STEPS, const(1.0)))}
    assert [x.rule.id for x in evaluate_rules(r, series, metric_id="raw_reward")] == ["a"]
    assert [x.rule.id for x in evaluate_rules(r, series)] == ["a", "b"]


def test_outside_band_uses_run_config_bases_and_stage_overrides(
    make_rule: Callable[..., Rule], reg: registry.Registry
) -> None:
    rule = make_rule("out", ("policy_entropy", "outside_band", "==", 1.0))
    series = {"policy_entropy": as_series((STEPS, const(0.2)))}
    assert evaluate_rule(rule, series, RuleContext.of(reg)).fired  # early band [0.8, 2.5]
    late = RuleContext.of(reg, {"stage_boundaries": {"early_end": 10, "mid_end": 20}})
    assert not evaluate_rule(rule, series, late).fired  # late band [0.05, 0.4]
