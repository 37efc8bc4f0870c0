"""Quote, semicolon and InfluxQL injection attempts in run or metric names fail safely against a
real InfluxDB loaded by the real exporter.

Unknown names never reach a query (404); known runs whose names are themselves hostile are
quoted so that each reads back exactly its own points; the database survives all of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from flask import Flask

import exporter
import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import (
    InfluxHistory,
    UnknownField,
    UnknownRun,
    UnsafeName,
    open_history,
    quote_ident,
    quote_string,
)

HOSTILE_RUNS = [
    "plain",
    "a' OR 'x'='x",
    'b\' OR "run" =~ /.*/ --',
    'c"; DROP DATABASE "victim',
    "d'; DROP MEASUREMENT \"policy\"; SELECT '",
    "e\\' OR 1=1 --",
    "f\\ x",
    "g\\\\'",
    "h /.*/ ;",
    "i 名字 ünïcode",
]
ATTACKS = [
    "' OR '1'='1",
    "plain' OR 'x'='x",
    'plain\'; DROP DATABASE "victim"; --',
    'plain"; DROP MEASUREMENT "policy',
    "plain\\' OR run =~ /.*/",
    "plain' --",
    "/.*/",
    "plain\n",
]
METRIC_ATTACKS = [
    'policy_entropy" FROM /.*/ --',
    'policy_entropy\'; DROP DATABASE "victim"',
    "policy_entropy,policy_kl",
    "*",
    "/.*/",
    'reward_component/x" FROM "policy',
    "reward_component/x'; DROP",
]


@dataclass(frozen=True)
class Target:
    app: Flask
    store: InfluxHistory
    database: str
    server: Any


@pytest.fixture(scope="module")
def target(
    reg: registry.Registry, influxd: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    db = "victim"
    influxd.post_query(f'CREATE DATABASE "{db}"')
    store_dir: Path = tmp_path_factory.mktemp("inj")
    settings = exporter.ExporterSettings(
        store=store_dir, influx_url=influxd.url, influx_database=db, policy="strict"
    )
    for index, name in enumerate(HOSTILE_RUNS):
        with exporter.init(name, registry=reg, settings=settings) as run:
            for step in range(20):
                run.log(step, {"policy_entropy": float(index), "raw_reward": float(index)})
            run.event(3, "checkpoint", text=f"ckpt of {name}")
            assert run.flush(30)
    config = DatasourceConfig(store=store_dir, influx_url=influxd.url, influx_database=db)
    store = open_history(config, reg)
    assert isinstance(store, InfluxHistory)
    yield Target(create_app(config, reg), store, db, influxd)


def _intact(t: Target) -> None:
    rows = t.server.query(t.database, 'SELECT count("policy_entropy") FROM "policy"')
    assert rows[0]["count"] == 20 * len(HOSTILE_RUNS)
    dbs = t.server.query(t.database, "SHOW DATABASES")
    assert t.database in {r["name"] for r in dbs}


def test_every_hostile_run_name_reads_back_only_its_own_points(target: Target) -> None:
    assert set(target.store.runs()) == set(HOSTILE_RUNS)
    for index, name in enumerate(HOSTILE_RUNS):
        p = target.store.series(name, "policy_entropy", None, None, 1000)
        assert p.steps.tolist() == list(range(20)), name
        assert set(p.values.tolist()) == {float(index)}, name
        w = target.store.window(name, "raw_reward", 5)
        assert set(w.values.tolist()) == {float(index)}, name
        assert [e.text for e in target.store.events(name, 10)] == [f"ckpt of {name}"]
    _intact(target)


def test_hostile_run_names_work_through_the_http_api(target: Target) -> None:
    client = target.app.test_client()
    for index, name in enumerate(HOSTILE_RUNS):
        query = urlencode({"run": name, "metric": "raw_reward", "points": 7})
        body = client.get(f"/api/series?{query}").get_json()
        assert {r["raw"] for r in body["rows"]} == {float(index)}, name
        assert len(body["rows"]) <= 7
    _intact(target)


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("path", ["/api/series", "/api/cards", "/api/events"])
def test_injected_run_names_are_rejected_before_any_query(
    target: Target, attack: str, path: str
) -> None:
    query = urlencode({"run": attack, "metric": "policy_entropy"})
    r = target.app.test_client().get(f"{path}?{query}")
    assert r.status_code == 404 and "unknown run" in r.get_json()["error"]
    with pytest.raises(UnknownRun):
        target.store.series(attack, "policy_entropy", None, None, 10)
    _intact(target)


@pytest.mark.parametrize("attack", METRIC_ATTACKS)
def test_injected_metric_names_are_rejected(target: Target, attack: str) -> None:
    client = target.app.test_client()
    for path in ("/api/series", "/api/cards"):
        r = client.get(f"{path}?{urlencode({'run': 'plain', 'metric': attack})}")
        assert r.status_code == 404 and "unknown metric" in r.get_json()["error"]
    body = {"targets": [{"target": "series", "payload": {"run": "plain", "metric": attack}}]}
    assert client.post("/query", json=body).status_code == 404
    with pytest.raises((UnknownField, UnsafeName)):
        target.store.series("plain", attack, None, None, 10)
    _intact(target)


def test_quoting_round_trips_through_influxdb(target: Target) -> None:
    for name in HOSTILE_RUNS:
        q = f"SELECT count({quote_ident('policy_entropy')}) FROM {quote_ident('policy')} WHERE {quote_ident('run')} = {quote_string(name)}"
        rows = target.server.query(target.database, q)
        assert rows[0]["count"] == 20, name


def test_control_characters_are_refused_by_the_quoting() -> None:
    for bad in ("a\nb", "a\rb", "a\x00b"):
        with pytest.raises(UnsafeName):
            quote_string(bad)
        with pytest.raises(UnsafeName):
            quote_ident(bad)
