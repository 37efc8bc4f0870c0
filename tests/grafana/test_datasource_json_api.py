"""The Infinity-friendly JSON API answers with the documented shapes and bounds."""

from __future__ import annotations

import numpy as np
import pytest
from flask import Flask

import registry
from registry.diagnosis.stats import ema

CARD_FIELDS = {
    "metric",
    "step",
    "value",
    "mean",
    "deviation_pct",
    "cv",
    "trend",
    "band",
    "status",
    "reading",
    "actions",
    "related",
}


def test_health_reports_store_and_registry(app: Flask) -> None:
    body = app.test_client().get("/api/health").get_json()
    assert body["status"] == "ok"
    assert body["store"] == {"kind": "memory", "ok": True, "runs": 3}


def test_runs_lists_every_run_with_its_last_step(app: Flask) -> None:
    runs = app.test_client().get("/api/runs").get_json()["runs"]
    assert {r["run"]: r["last_step"] for r in runs} == {
        "collapse": 2999,
        "empty": None,
        "healthy": 2999,
    }


def test_cards_default_to_every_core_metric(app: Flask, reg: registry.Registry) -> None:
    body = app.test_client().get("/api/cards?run=healthy").get_json()
    assert [c["metric"] for c in body["cards"]] == [m.id for m in reg.core_metrics()]
    for card in body["cards"]:
        assert card.keys() >= CARD_FIELDS


def test_card_of_collapsed_entropy_is_not_ok_and_speaks_chinese(app: Flask) -> None:
    body = app.test_client().get("/api/cards?run=collapse&metric=policy_entropy&lang=zh").get_json()
    (card,) = body["cards"]
    assert card["status"] in ("warning", "critical")
    assert card["lang"] == "zh" and card["title"] == "策略熵"


def test_card_with_too_little_data_is_no_data(app: Flask) -> None:
    (card,) = app.test_client().get("/api/cards?run=empty&metric=raw_reward").get_json()["cards"]
    assert card["status"] == "no_data"


@pytest.mark.parametrize("points", [2, 3, 7, 100, 2999, 3000, 10000])
def test_series_never_exceeds_requested_points(app: Flask, points: int) -> None:
    url = f"/api/series?run=healthy&metric=policy_entropy&points={points}"
    body = app.test_client().get(url).get_json()
    assert 0 < len(body["rows"]) <= points
    steps = [r["step"] for r in body["rows"]]
    assert steps == sorted(set(steps))
    if points >= 3000:
        assert body["bucket_steps"] == 1 and len(steps) == 3000


def test_series_smoothing_is_tensorboard_ema_of_the_returned_raw(app: Flask) -> None:
    url = "/api/series?run=healthy&metric=raw_reward&points=300&smoothing=0.9"
    rows = app.test_client().get(url).get_json()["rows"]
    raw = np.array([r["raw"] for r in rows])
    np.testing.assert_allclose([r["smooth"] for r in rows], ema(raw, 0.9))


def test_series_band_edges_follow_the_stage(app: Flask, reg: registry.Registry) -> None:
    rows = app.test_client().get("/api/series?run=healthy&metric=policy_entropy").get_json()["rows"]
    bands = reg.metric("policy_entropy").bands
    assert bands is not None and bands.early is not None and bands.mid is not None
    assert bands.late is not None
    # the run logs every step and plans no length: its cards count stages in logged points
    # (the registry's timing), and the chart's band follows the same stages
    t = reg.timing
    early = [r for r in rows if r["step"] < t.early_points]
    mid = [r for r in rows if t.early_points <= r["step"] < t.mid_points]
    late = [r for r in rows if r["step"] >= t.mid_points]
    assert {(r["band_low"], r["band_high"]) for r in early} == {(bands.early.low, bands.early.high)}
    assert {(r["band_low"], r["band_high"]) for r in mid} == {(bands.mid.low, bands.mid.high)}
    assert {(r["band_low"], r["band_high"]) for r in late} == {(bands.late.low, bands.late.high)}


def test_series_range_is_inclusive_in_steps(app: Flask) -> None:
    url = "/api/series?run=healthy&metric=clip_fraction&from=100&to=199"
    rows = app.test_client().get(url).get_json()["rows"]
    assert [r["step"] for r in rows] == list(range(100, 200))


def test_series_of_a_metric_family_member(app: Flask) -> None:
    url = "/api/series?run=healthy&metric=reward_component/format&points=10"
    assert len(app.test_client().get(url).get_json()["rows"]) == 10


def test_nan_in_history_is_null_not_invalid_json(app: Flask) -> None:
    r = app.test_client().get("/api/series?run=collapse&metric=raw_reward")
    assert b"NaN" not in r.data
    assert [row["raw"] for row in r.get_json()["rows"]] == [1.0, None, 2.0]


def test_events_come_back_ascending(app: Flask) -> None:
    events = app.test_client().get("/api/events?run=healthy").get_json()["events"]
    assert [(e["step"], e["kind"]) for e in events] == [(100, "checkpoint"), (2500, "resume")]


def test_terms_in_one_language_or_both(app: Flask, reg: registry.Registry) -> None:
    client = app.test_client()
    both = client.get("/api/terms").get_json()["terms"]
    zh = client.get("/api/terms?lang=zh").get_json()["terms"]
    assert len(both) == len(zh) == len(reg.terms) + len(reg.metrics)
    entropy = next(t for t in zh if t["id"] == "policy_entropy")
    assert entropy["title"] == "策略熵"
    one = client.get("/api/terms/reward_shaping").get_json()
    assert one["title"] == {"en": "Reward shaping", "zh": "奖励塑形"}


@pytest.mark.parametrize(
    ("url", "status", "needle"),
    [
        ("/api/cards", 400, "'run'"),
        ("/api/cards?run=nope", 404, "unknown run"),
        ("/api/cards?run=healthy&metric=nope", 404, "unknown metric"),
        ("/api/cards?run=healthy&lang=fr", 400, "'lang'"),
        ("/api/series?run=healthy", 400, "'metric'"),
        ("/api/series?run=healthy&metric=raw_reward&points=0", 400, "'points'"),
        ("/api/series?run=healthy&metric=raw_reward&points=abc", 400, "'points'"),
        ("/api/series?run=healthy&metric=raw_reward&smoothing=1", 400, "'smoothing'"),
        ("/api/series?run=healthy&metric=raw_reward&smoothing=nan", 400, "'smoothing'"),
        ("/api/series?run=healthy&metric=raw_reward&from=9&to=1", 400, "'from'"),
        ("/api/series?run=healthy&metric=reward_component/x;y", 404, "unknown metric"),
        ("/api/terms/nope", 404, "no term"),
        ("/api/terms?lang=xx", 400, "'lang'"),
        ("/terms/nope", 404, "no term"),
        ("/nowhere", 404, "no such route"),
    ],
)
def test_bad_requests_get_a_json_error_naming_the_problem(
    app: Flask, url: str, status: int, needle: str
) -> None:
    r = app.test_client().get(url)
    assert r.status_code == status
    assert needle in r.get_json()["error"]


def test_wrong_method_is_405_json(app: Flask) -> None:
    r = app.test_client().delete("/api/runs")
    assert r.status_code == 405 and "not allowed" in r.get_json()["error"]
