"""Both history stores, loaded by the real exporter, read back what was written and agree.

One exporter run writes to the outbox (the embedded store) and forwards to a real InfluxDB 1.x;
the datasource then reads the same run from each and must return the same series, cards and
events, one point per step after a resume, and never more points than asked.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask

import exporter
import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import EmbeddedHistory, HistoryStore, InfluxHistory, open_history

N = 2400


@dataclass(frozen=True)
class Loaded:
    embedded: EmbeddedHistory
    influx: InfluxHistory
    embedded_app: Flask
    influx_app: Flask


def _values(step: int) -> dict[str, float]:
    x = step / N
    return {
        "policy_entropy": 1.5 - x + 0.01 * math.sin(step),
        "policy_kl": 0.01 + 0.002 * math.cos(step),
        "raw_reward": x + 0.05 * math.sin(step / 7),
        "shaped_reward": x + 0.1,
        "clip_fraction": 0.1 + 0.01 * math.sin(step / 3),
    }


@pytest.fixture(scope="module")
def loaded(
    reg: registry.Registry, influxd: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loaded]:
    db = f"stores_{id(reg) % 100000}"
    influxd.post_query(f'CREATE DATABASE "{db}"')
    store = tmp_path_factory.mktemp("store")
    settings = exporter.ExporterSettings(
        store=store, influx_url=influxd.url, influx_database=db, policy="strict"
    )
    with exporter.init("ppo", registry=reg, settings=settings, config={"clip_epsilon": 0.2}) as run:
        for step in range(N // 2):
            run.log(step, _values(step))
        run.event(500, "checkpoint", text="saved ckpt-500")
        # resumed from a checkpoint at step 1000: steps 1000..1199 are logged twice
        for step in range(1000, N):
            run.log(step, _values(step))
        run.log(N, {"reward_component/format": 0.5})
        assert run.flush(60)
    reg_config = DatasourceConfig(store=store)
    influx_config = DatasourceConfig(store=store, influx_url=influxd.url, influx_database=db)
    embedded = open_history(reg_config, reg)
    influx = open_history(influx_config, reg)
    assert isinstance(embedded, EmbeddedHistory) and isinstance(influx, InfluxHistory)
    yield Loaded(
        embedded,
        influx,
        create_app(reg_config, reg),
        create_app(influx_config, reg),
    )


def _stores(loaded: Loaded) -> list[HistoryStore]:
    return [loaded.embedded, loaded.influx]


def test_runs_and_config_read_back(loaded: Loaded) -> None:
    for store in _stores(loaded):
        assert store.runs() == ("ppo",), store.kind
        assert store.run_config("ppo")["clip_epsilon"] == 0.2, store.kind
        assert store.latest("ppo").step == N, store.kind


def test_raw_series_match_what_was_logged_once_per_step(loaded: Loaded) -> None:
    expected = np.array([_values(s)["raw_reward"] for s in range(N)])
    for store in _stores(loaded):
        p = store.series("ppo", "raw_reward", None, None, 10_000)
        assert p.bucket == 1
        assert p.steps.tolist() == list(range(N)), store.kind
        np.testing.assert_allclose(p.values, expected, err_msg=store.kind)


@pytest.mark.parametrize("points", [2, 3, 10, 333, 2399])
def test_downsampled_series_agree_and_stay_within_points(loaded: Loaded, points: int) -> None:
    e = loaded.embedded.series("ppo", "policy_entropy", None, None, points)
    i = loaded.influx.series("ppo", "policy_entropy", None, None, points)
    assert 0 < len(e) <= points and 0 < len(i) <= points
    assert e.bucket == i.bucket
    assert e.steps.tolist() == i.steps.tolist()
    np.testing.assert_allclose(e.values, i.values)


def test_downsampled_range_agrees(loaded: Loaded) -> None:
    e = loaded.embedded.series("ppo", "clip_fraction", 101, 1999, 50)
    i = loaded.influx.series("ppo", "clip_fraction", 101, 1999, 50)
    assert len(e) <= 50 and e.steps.tolist() == i.steps.tolist()
    assert e.steps[0] >= 101 and e.steps[-1] <= 1999
    np.testing.assert_allclose(e.values, i.values)


def test_windows_and_cards_agree(loaded: Loaded) -> None:
    e = loaded.embedded_app.test_client().get("/api/cards?run=ppo").get_json()["cards"]
    i = loaded.influx_app.test_client().get("/api/cards?run=ppo").get_json()["cards"]
    assert [c["metric"] for c in e] == [c["metric"] for c in i]
    for a, b in zip(e, i, strict=True):
        assert (a["status"], a["step"]) == (b["status"], b["step"])
        assert a["value"] == pytest.approx(b["value"])
        assert a["mean"] == pytest.approx(b["mean"])


@pytest.mark.parametrize("metric", ["raw_reward", "policy_entropy"])
def test_card_mean_is_the_whole_run_mean_on_both_stores(loaded: Loaded, metric: str) -> None:
    logged = np.array([_values(s)[metric] for s in range(N)])
    window = DatasourceConfig().card_window
    assert window < N  # the card reads a window; its mean must still cover the whole run
    for app in (loaded.embedded_app, loaded.influx_app):
        url = f"/api/cards?run=ppo&metric={metric}"
        (card,) = app.test_client().get(url).get_json()["cards"]
        assert card["mean"] == pytest.approx(logged.mean(), rel=1e-9)
        assert card["mean_points"] == N
        assert card["window_mean"] == pytest.approx(logged[-window:].mean(), rel=1e-9)
        assert card["window_points"] == window
        assert card["recent_mean"] == pytest.approx(logged[-1000:].mean(), rel=1e-9)
        expected_dev = (card["value"] - logged.mean()) / abs(logged.mean()) * 100
        assert card["deviation_pct"] == pytest.approx(expected_dev, rel=1e-9)


def test_whole_run_stats_agree_between_stores(loaded: Loaded) -> None:
    fields = ["raw_reward", "policy_kl", "clip_fraction", "reward_component/format"]
    e = loaded.embedded.stats("ppo", fields)
    i = loaded.influx.stats("ppo", fields)
    for name in fields:
        assert e[name].count == i[name].count, name
        assert e[name].mean == pytest.approx(i[name].mean, rel=1e-9), name
    assert e["reward_component/format"] == i["reward_component/format"]


def test_events_include_checkpoint_and_resume(loaded: Loaded) -> None:
    for app in (loaded.embedded_app, loaded.influx_app):
        events = app.test_client().get("/api/events?run=ppo").get_json()["events"]
        kinds = {(e["step"], e["kind"]) for e in events}
        assert (500, "checkpoint") in kinds
        assert (1000, "resume") in kinds


def test_metric_family_field_is_served(loaded: Loaded) -> None:
    for app in (loaded.embedded_app, loaded.influx_app):
        url = "/api/series?run=ppo&metric=reward_component/format"
        rows = app.test_client().get(url).get_json()["rows"]
        assert [(r["step"], r["raw"]) for r in rows] == [(N, 0.5)]


def test_series_endpoint_never_exceeds_points_on_either_store(loaded: Loaded) -> None:
    for app in (loaded.embedded_app, loaded.influx_app):
        for points in (2, 5, 64, 1000):
            url = f"/api/series?run=ppo&metric=policy_kl&points={points}&smoothing=0.9"
            body = app.test_client().get(url).get_json()
            assert 0 < len(body["rows"]) <= points


def test_embedded_store_missing_file_is_an_empty_store(tmp_path: Path) -> None:
    store = EmbeddedHistory(tmp_path / "none" / "outbox.sqlite")
    assert store.runs() == ()
    assert len(store.series("x", "raw_reward", None, None, 10)) == 0
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("made", ["empty file", "journal mode set, no tables yet"])
def test_a_store_file_being_created_reads_as_an_empty_store(
    tmp_path: Path, reg: registry.Registry, made: str
) -> None:
    """An Outbox makes the file before it writes its tables; a reader in between (the
    health check while `serve LOGDIR` opens the store) sees an empty store, not a failure."""
    path = tmp_path / "store" / "outbox.sqlite"
    path.parent.mkdir()
    if made == "empty file":
        path.touch()
    else:
        with closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA journal_mode=WAL")
    store = EmbeddedHistory(path)
    assert store.runs() == () and store.fields("x") == ()
    assert len(store.series("x", "raw_reward", None, None, 10)) == 0
    client = create_app(DatasourceConfig(store=path.parent), reg).test_client()
    health = client.get("/api/health")
    assert health.status_code == 200, health.get_json()
    assert client.get("/api/runs").get_json()["runs"] == []


def test_unreachable_influx_is_503_json(reg: registry.Registry) -> None:
    config = DatasourceConfig(influx_url="http://127.0.0.1:9", influx_timeout=2)
    app = create_app(config, reg)
    r = app.test_client().get("/api/runs")
    assert r.status_code == 503 and "InfluxDB" in r.get_json()["error"]
    assert app.test_client().get("/api/health").get_json()["status"] == "degraded"
