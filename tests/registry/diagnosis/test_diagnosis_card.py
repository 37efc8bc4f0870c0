"""Diagnosis cards: status from evidence, readings with numbers, actions from the registry."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import registry
from registry.diagnosis import RunMean
from registry.diagnosis.card import Card, build_card
from registry.model import Rule

NAN = math.nan
STEPS = np.arange(0, 5000, 10)  # mid stage at the end: entropy band [0.3, 1.2]
Data = dict[str, tuple[Any, Any]]
REQUIRED = {"metric", "step", "value", "mean", "deviation_pct", "cv", "trend", "band", "status", "reading",
            "actions", "related"}  # fmt: skip


def healthy(rng: np.random.Generator) -> Data:
    n = STEPS.size
    return {
        "policy_entropy": (STEPS, 2.0 - 0.00024 * STEPS + rng.normal(0, 0.02, n)),
        "policy_kl": (STEPS, np.abs(rng.normal(0.02, 0.005, n))),
        "clip_fraction": (STEPS, np.abs(rng.normal(0.1, 0.02, n))),
    }


def with_tail(data: Data, metric: str, tail: list[float]) -> Data:
    steps, values = data[metric]
    values = values.copy()
    values[-len(tail) :] = tail
    return {**data, metric: (steps, values)}


# These synthetic runs are drawn against explicit stage boundaries (the registry's step defaults);
# without them the stages follow the run's cadence (tests/registry/diagnosis/test_run_context.py).
STAGES = {"stage_boundaries": {"early_end": 2000, "mid_end": 20000}}


def card(reg: registry.Registry, metric: str, data: Data, **kw: Any) -> Card:
    kw["config"] = {**STAGES, **(kw.get("config") or {})}
    return build_card(reg, metric, data, **kw)


def kinds(c: Card) -> dict[str, str]:
    return {e.kind: e.severity for e in c.evidence}


def test_a_healthy_run_is_ok_with_numbers_and_no_actions(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_entropy", healthy(rng))
    assert c.status == "ok", c.reading
    assert c.step == 4990 and c.value is not None and c.mean is not None and c.cv is not None
    assert c.band is not None and c.band.stage == "mid" and c.band.inside
    assert c.trend is not None and c.trend.direction == "down"
    assert kinds(c)["entropy_shape"] == "ok"
    assert c.actions == ()
    assert f"{c.value:.4g}" in c.reading and "4,990" in c.reading


def test_the_card_is_json_ready_and_carries_the_contract_fields(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = with_tail(healthy(rng), "policy_entropy", [NAN])
    d = card(reg, "policy_entropy", data).to_dict()
    assert set(d) >= REQUIRED
    json.dumps(d, allow_nan=False)
    assert set(d["band"]) >= {"low", "high", "stage"}
    assert d["trend"]["direction"] in ("up", "down", "flat")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({}, "no points logged"),
        ({"policy_entropy": ([], [])}, "no points logged"),
        ({"policy_entropy": ([5], [1.0])}, "only 1 finite point"),
        ({"policy_entropy": ([1, 2], [1.0] * 2)}, "only 2 finite point"),
    ],
)
def test_too_little_data_is_no_data_with_the_reason(
    reg: registry.Registry, data: Data, why: str
) -> None:
    c = card(reg, "policy_entropy", data)
    assert c.status == "no_data" and c.reason is not None and why in c.reason
    assert why in c.reading
    json.dumps(c.to_dict(), allow_nan=False)


def test_every_value_non_finite_is_critical_not_no_data(reg: registry.Registry) -> None:
    """DESIGN.md: "Every value non-finite" is critical, never no data."""
    c = card(reg, "policy_entropy", {"policy_entropy": ([1, 2, 3, 4, 5, 6], [NAN] * 6)})
    assert c.status == "critical"
    assert "all 6 logged values are NaN or infinite" in c.reading
    assert "every one of the 6 logged value(s)" in c.reading
    json.dumps(c.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("values", "status"),
    [([1.0, 1.0, NAN], "warning"), ([1.0, NAN, NAN], "critical"), ([NAN], "critical")],
)
def test_non_finite_latest_values_are_judged_from_the_first_point(
    reg: registry.Registry, values: list[float], status: str
) -> None:
    """Physical facts need no history: fewer points than a card needs, still judged."""
    c = card(reg, "policy_entropy", {"policy_entropy": (list(range(len(values))), values)})
    assert c.status == status


def test_no_data_reason_in_chinese(reg: registry.Registry) -> None:
    c = card(reg, "policy_entropy", {"policy_entropy": ([5], [1.0])}, lang="zh")
    assert c.status == "no_data" and "只有 1 个有效数据点" in c.reading


def test_one_excursion_outside_the_band_is_watch(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_entropy", with_tail(healthy(rng), "policy_entropy", [0.25]))
    assert c.status == "watch", c.reading
    assert c.band is not None and c.band.inside is False
    assert "0.25 is outside the mid-stage band [0.3, 1.2]" in c.reading
    assert c.actions  # the registry's failure scenarios: what to check and change


def test_a_sustained_critical_alert_without_corroboration_is_warning(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_entropy", with_tail(healthy(rng), "policy_entropy", [0.03] * 12))
    assert c.status == "warning", c.reading
    alerts = [e for e in c.evidence if e.kind == "alert"]
    assert any("< 0.05 (critical threshold) for 12 consecutive point(s)" in e.text for e in alerts)
    assert any("no related metric or critical rule corroborates it" in e.text for e in alerts)


def test_a_sustained_critical_alert_corroborated_by_a_related_metric_is_critical(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = with_tail(healthy(rng), "policy_entropy", list(np.linspace(0.8, 0.03, 20)) + [0.03] * 10)
    entropy = data["policy_entropy"][1]
    data["policy_kl"] = (
        STEPS,
        0.3 - 0.25 * entropy + rng.normal(0, 0.001, STEPS.size),
    )  # KL up as entropy falls
    c = card(reg, "policy_entropy", data)
    assert c.status == "critical", c.reading
    assert [r.metric for r in c.related] == ["policy_kl"] and c.related[0].r < -0.7
    assert "corroborated by policy_kl r=-" in c.reading


def test_warm_up_is_never_an_alarm(reg: registry.Registry) -> None:
    steps = np.arange(0, 150)
    c = card(reg, "policy_entropy", {"policy_entropy": (steps, np.full(150, 0.04))})
    assert c.status == "ok"
    assert c.reason is not None and "warm-up: step 149 < 200" in c.reason
    assert {"alert", "band", "warmup"} <= set(kinds(c))
    late = card(
        reg,
        "policy_entropy",
        {"policy_entropy": (steps, np.full(150, 0.04))},
        config={"warmup_steps": 10},
    )
    assert late.status != "ok"


def test_exact_zeros_after_nonzero_kl_are_a_warning_silence(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_kl", with_tail(healthy(rng), "policy_kl", [0.0] * 15))
    assert c.status == "warning", c.reading
    assert kinds(c)["silence"] == "warning"
    assert "exactly 0 for the last 15 points after 485 non-zero point(s)" in c.reading
    quiet = card(reg, "policy_kl", healthy(rng))
    assert quiet.status == "ok" and "silence" not in kinds(quiet)


def test_silence_is_judged_only_for_normally_nonzero_metrics(reg: registry.Registry) -> None:
    rewards = np.r_[np.ones(50), np.zeros(50)]
    c = card(reg, "raw_reward", {"raw_reward": (np.arange(100) + 1000, rewards)})
    assert "silence" not in kinds(c)


def test_kl_near_clip_epsilon_for_three_points_is_danger(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = with_tail(healthy(rng), "policy_kl", [0.018, 0.018, 0.019])
    c = card(reg, "policy_kl", data, config={"clip_epsilon": 0.02})
    assert kinds(c)["kl_zone"] == "warning" and c.status == "warning"
    assert "0.019 / 0.02 = 0.95: danger zone" in c.reading
    assert "kl_zone" not in kinds(card(reg, "policy_kl", data))  # no clip epsilon: no zone
    safe = card(reg, "policy_kl", healthy(rng), config={"clip_epsilon": 0.2})
    assert kinds(safe)["kl_zone"] == "ok" and safe.status == "ok"


def test_a_firing_critical_rule_makes_its_metrics_critical(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    steps = np.arange(1000, 1300)
    data = {
        "shaped_reward": (steps, 1.0 + 0.005 * (steps - 1000) + rng.normal(0, 0.01, 300)),
        "raw_reward": (steps, 1.0 - 0.002 * (steps - 1000) + rng.normal(0, 0.01, 300)),
    }
    c = card(reg, "shaped_reward", data)
    assert c.status == "critical", c.reading
    assert (
        "rule shaped_up_raw_down (critical): Shaped reward rose while raw reward fell." in c.reading
    )
    assert "shaped_reward change_pct = " in c.reading and "held 3 evaluation point(s)" in c.reading
    assert c.actions[0] == "Inspect the shaping terms."
    assert kinds(c)["fingerprint"] == "ok"
    assert "sentinel" not in kinds(c)  # the registry's rule covers this pattern
    zh = card(reg, "shaped_reward", data, lang="zh")
    assert zh.actions[0] == "检查塑形项。" and "状态：严重" in zh.reading


def test_without_a_rule_the_reward_hacking_sentinel_speaks(
    reg: registry.Registry, rng: np.random.Generator, with_rules: Callable[..., registry.Registry]
) -> None:
    steps = np.arange(1000, 1300)
    data = {
        "shaped_reward": (steps, 1.0 + 0.005 * (steps - 1000) + rng.normal(0, 0.01, 300)),
        "raw_reward": (steps, 1.0 - 0.002 * (steps - 1000) + rng.normal(0, 0.01, 300)),
    }
    c = card(with_rules(), "raw_reward", data)
    assert kinds(c)["sentinel"] == "warning" and c.status == "warning"
    assert "sentinel reward_hacking" in c.reading


def test_a_staircase_entropy_is_a_warning(reg: registry.Registry, rng: np.random.Generator) -> None:
    data = healthy(rng)
    values = np.repeat([1.1, 0.8, 0.5], [200, 150, 150]) + rng.normal(0, 0.005, STEPS.size)
    c = card(reg, "policy_entropy", {**data, "policy_entropy": (STEPS, values)})
    assert kinds(c)["entropy_shape"] == "warning" and c.status == "warning"
    assert "staircase_collapse" in c.reading


def test_a_sawtooth_entropy_is_watch(reg: registry.Registry, rng: np.random.Generator) -> None:
    values = 0.8 + 0.15 * np.sin(2 * np.pi * STEPS / 250) + rng.normal(0, 0.01, STEPS.size)
    c = card(reg, "policy_entropy", {"policy_entropy": (STEPS, values)})
    assert kinds(c)["entropy_shape"] == "watch" and c.status == "watch"
    assert "sawtooth, period ~250 steps" in c.reading


def test_a_non_finite_latest_value_is_a_warning(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_entropy", with_tail(healthy(rng), "policy_entropy", [NAN]))
    assert c.status == "warning" and kinds(c)["nonfinite"] == "warning"
    assert c.step == 4980  # the last finite point is judged
    assert "the last 1 logged value(s) (since step 4,990) are NaN or infinite" in c.reading


def test_a_value_outside_physical_limits_is_a_warning(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "clip_fraction", with_tail(healthy(rng), "clip_fraction", [1.5]))
    assert kinds(c)["limits"] == "warning" and "outside the physical limits [0, 1]" in c.reading


def test_a_constant_series_is_ok_with_zero_deviation(reg: registry.Registry) -> None:
    c = card(reg, "policy_entropy", {"policy_entropy": (STEPS, np.full(STEPS.size, 0.9))})
    assert c.status == "ok" and c.deviation_pct == 0.0 and c.cv == 0.0
    assert kinds(c)["entropy_shape"] == "ok" and "plateau" in c.reading


def test_nan_gaps_do_not_disturb_a_healthy_card(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = healthy(rng)
    values = data["policy_entropy"][1].copy()
    values[::9] = NAN
    c = card(reg, "policy_entropy", {**data, "policy_entropy": (STEPS, values)})
    assert c.status == "ok", c.reading


def test_the_chinese_reading_names_the_same_numbers(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = with_tail(healthy(rng), "policy_entropy", [0.25])
    en = card(reg, "policy_entropy", data)
    zh = card(reg, "policy_entropy", data, lang="zh")
    assert zh.status == en.status == "watch"
    assert "0.25 超出中期阶段健康区间 [0.3, 1.2]" in zh.reading and "第 4,990 步" in zh.reading
    assert zh.title == "策略熵" and any(
        "检查" in a or "提高" in a or "梯度" in a for a in zh.actions
    )


def test_the_chinese_reading_has_no_english_words_of_its_own(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    # An entropy collapse touches every word the reading names: stage, alert severity, the
    # entropy's shape, the status and the run context ("read as: ...").
    data = healthy(rng)
    steps, values = data["policy_entropy"]
    values = values.copy()
    values[len(values) // 2 :] = np.linspace(0.2, 0.01, len(values) - len(values) // 2)
    zh = card(reg, "policy_entropy", {**data, "policy_entropy": (steps, values)}, lang="zh")
    assert zh.status in ("warning", "critical"), zh.reading
    ids = {"policy_entropy", "policy_kl", "clip_fraction", "entropy_gradient", "kl_clip_ratio"}
    text = zh.reading
    for word in ids | {"PPO", "SB3", "CleanRL", "TRL", "GRPO", "KL", "nats", "R²", "n/a"}:
        text = text.replace(word, "")
    assert not re.findall(r"[A-Za-z_]{3,}", text), zh.reading
    assert "解读依据" in zh.reading


def test_smoothing_and_its_lag_are_reported(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    c = card(reg, "policy_entropy", healthy(rng))
    assert c.smoothed is not None and c.smoothing == 0.6
    assert c.smoothing_lag_steps == pytest.approx(15.0)  # 1.5 points x 10 steps


def test_an_unknown_metric_is_refused(reg: registry.Registry) -> None:
    with pytest.raises(registry.UnknownName):
        build_card(reg, "nope", {})


def test_a_band_relative_to_an_unknown_basis_is_not_judged(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    from registry.model import Band, Bands

    metrics = tuple(
        dataclasses.replace(m, bands=Bands("max_entropy", mid=Band(0.1, 0.5, "of ln n")))
        if m.id == "policy_entropy" else m
        for m in reg.metrics
    )  # fmt: skip
    r = dataclasses.replace(reg, metrics=metrics)
    data = healthy(rng)
    unknown = card(r, "policy_entropy", data)
    assert unknown.band is not None and unknown.band.inside is None and unknown.status == "ok"
    known = card(r, "policy_entropy", data, config={"n_actions": 4})
    assert known.band is not None and known.band.high == pytest.approx(0.5 * math.log(4))


def test_firing_rules_of_other_metrics_do_not_leak_into_a_card(
    make_rule: Callable[..., Rule],
    with_rules: Callable[..., registry.Registry],
    rng: np.random.Generator,
) -> None:
    r = with_rules(
        make_rule("grad_big", ("grad_norm", "last", ">", 0.0), severity="critical", window=400)
    )
    data = {**healthy(rng), "grad_norm": (STEPS, np.ones(STEPS.size))}
    assert card(r, "policy_entropy", data).status == "ok"
    assert card(r, "grad_norm", data).status == "critical"


def test_a_falling_entropy_card_names_the_gradient_and_time_to_zero(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    values = 2.0 - 0.00024 * STEPS + rng.normal(0, 0.02, STEPS.size)
    values[-20:] = values[-21] - 0.03 * np.arange(1, 21)  # falling 3 per 1k steps
    c = card(reg, "policy_entropy", {"policy_entropy": (STEPS, values)})
    assert kinds(c)["entropy_gradient"] == "watch"
    assert "entropy gradient -3" in c.reading and "steps at this rate" in c.reading
    zh = card(reg, "policy_entropy", {"policy_entropy": (STEPS, values)}, lang="zh")
    assert "步后归零" in zh.reading


def test_whole_run_mean_given_with_a_window_sets_mean_and_deviation(
    reg: registry.Registry, rng: np.random.Generator
) -> None:
    data = healthy(rng)
    window = card(reg, "policy_entropy", data)
    whole = card(reg, "policy_entropy", data, whole_run=RunMean(1_000_000, 1.6))
    assert window.mean == window.window_mean and window.mean_points == STEPS.size
    assert (whole.mean, whole.mean_points) == (1.6, 1_000_000)
    assert whole.window_mean == window.window_mean and whole.window_points == STEPS.size
    assert whole.value is not None
    assert whole.deviation_pct == pytest.approx((whole.value - 1.6) / 1.6 * 100)
    assert "1,000,000 points" in whole.reading


@pytest.mark.parametrize(("spikes", "alarmed"), [(1, False), (2, True)])
def test_a_pre_clip_gradient_norm_spike_alarms_only_when_it_holds(
    builtin: registry.Registry, rng: np.random.Generator, spikes: int, alarmed: bool
) -> None:
    # grad_norm is logged before clipping, which trainers apply by default: one batch 150x its
    # early level has its update cut to the clip norm (registry: grad_norm's critical alert,
    # two points). One point is the card out of its band; two in a row are the alert.
    norm = np.abs(rng.normal(0.2, 0.02, STEPS.size))
    norm[-spikes:] = 30.0
    c = card(builtin, "grad_norm", {"grad_norm": (STEPS, norm)})
    alerts = [e for e in c.evidence if e.kind == "alert" and e.severity in ("warning", "critical")]
    if alarmed:
        assert c.status in ("warning", "critical"), c.reading
        assert any("(critical threshold) for 2 consecutive point(s)" in e.text for e in alerts)
    else:
        assert c.status == "watch", c.reading
        assert not alerts, c.reading
