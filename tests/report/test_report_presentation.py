"""Card and chart presentation: numbers that mean something at a sparse cadence, the Chinese view
in Chinese, distinct axis ticks and a visible one-point chart."""

from __future__ import annotations

import re

import numpy as np

import registry
from grafana.datasource.card_words import labelled
from grafana.datasource.history.memory import MemoryHistory
from grafana.report import render_report
from grafana.report.svg import Scale, nice_ticks, path_d, tick_labels

SB3_STEPS = list(range(2048, 2048 * 41, 2048))  # one point per 2048 env steps, as SB3 logs


def _sb3_store() -> MemoryHistory:
    rng = np.random.default_rng(0)
    n = len(SB3_STEPS)
    # an advantage-like value that crosses zero: its run mean is near zero
    policy_loss = (rng.normal(0, 0.01, n) - np.mean(rng.normal(0, 0.01, n))).tolist()
    policy_loss[-1] = 0.05
    return MemoryHistory(
        {
            "PPO_1": {
                "policy_entropy": (SB3_STEPS, np.linspace(0.69, 0.55, n).tolist()),
                "policy_loss": (SB3_STEPS, policy_loss),
                "raw_reward": (SB3_STEPS, np.linspace(10, 200, n).tolist()),
            }
        }
    )


def test_chinese_report_shows_status_and_trend_words_in_chinese(
    builtin_registry: registry.Registry,
) -> None:
    html = render_report(_sb3_store(), builtin_registry, "PPO_1", lang="zh")
    badges = re.findall(r'<span class="status st-[a-z_]+">([^<]*)</span>', html)
    assert badges and not {"ok", "watch", "warning", "critical", "no data"} & set(badges)
    assert "状态：ok" not in html and "（flat）" not in html and "（up）" not in html
    assert "状态：" in html


def test_sparse_cadence_cards_say_why_instead_of_printing_n_a(
    builtin_registry: registry.Registry,
) -> None:
    html = render_report(_sb3_store(), builtin_registry, "PPO_1", lang="en")
    assert "CV n/a" not in html
    assert "<dt>trend</dt><dd>–</dd>" not in html  # the trend row says why it has no number
    assert "<dt>band</dt><dd>–</dd>" not in html and "no band declared" in html
    # one point per 2048 steps: the trend and CV windows widen to span enough logged points
    # (registry stages.timing trend_points / cv_points) instead of holding none
    assert re.search(r"<dt>trend</dt><dd>-?[\d.,]+ per 1k steps \((up|down|flat)\)</dd>", html)
    assert "over the last 40,960 steps" in html and "over the last 20,480 steps" in html


def test_deviation_from_a_near_zero_mean_is_shown_as_a_difference(
    builtin_registry: registry.Registry,
) -> None:
    html = render_report(_sb3_store(), builtin_registry, "PPO_1", lang="en")
    assert not re.search(r"[+−-]\d{4,}(\.\d)?%", html)  # no "−142590 %"
    assert "vs the run mean" in html
    card = labelled({"value": 0.05, "mean": 0.00001, "deviation_pct": 499900.0}, "zh")
    assert card["deviation_label"].endswith("相对全程均值") and "%" not in card["deviation_label"]
    assert (
        labelled({"value": 1.1, "mean": 1.0, "deviation_pct": 10.0}, "en")["deviation_label"]
        == "+10.0%"
    )


def test_card_json_carries_labels_in_its_language() -> None:
    card = {
        "status": "watch",
        "trend": {"direction": "flat", "slope_per_1k": 0.0},
        "evidence": [{"severity": "ok", "text": "x"}],
    }
    zh = labelled(card, "zh")
    assert zh["status_label"] == "关注" and zh["trend"]["direction_label"] == "平稳"
    assert zh["evidence"][0]["severity_label"] == "正常"
    assert card["trend"] == {"direction": "flat", "slope_per_1k": 0.0}  # the input is untouched


def test_axis_ticks_of_a_narrow_range_are_all_different() -> None:
    ticks = nice_ticks(3.78505, 3.78525)
    assert len(ticks) >= 3
    labels = tick_labels(ticks)
    assert len(set(labels)) == len(labels)
    steps = nice_ticks(1_000_000, 1_200_000, 6)
    assert len(set(tick_labels(steps))) == len(steps)
    assert tick_labels([0.0, 0.5, 1.0]) == ["0", "0.5", "1"]  # unchanged when already distinct


def test_a_one_point_series_draws_a_dot() -> None:
    x, y = Scale(0, 10, 0, 100), Scale(0, 1, 100, 0)
    one = path_d(x, y, np.array([5]), np.array([0.5]))
    assert re.fullmatch(r"M50\.0,50\.0 h0\.01", one)
    gap = path_d(x, y, np.array([1, 2, 3, 4]), np.array([0.1, np.nan, 0.3, 0.4]))
    assert gap == "M10.0,90.0 h0.01 M30.0,70.0 L40.0,60.0"


def test_one_point_chart_in_the_report_has_a_visible_mark(
    builtin_registry: registry.Registry,
) -> None:
    store = MemoryHistory({"one": {"raw_reward": ([2048], [12.0])}})
    html = render_report(store, builtin_registry, "one", lang="en")
    paths = re.findall(r'<path class="smooth" data-metric="raw_reward"[^>]* d="([^"]*)"', html)
    assert paths and "h0.01" in paths[0]
