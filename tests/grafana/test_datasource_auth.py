"""With RLVITALS_DATASOURCE_TOKEN set, every route but /api/health needs the bearer token."""

from __future__ import annotations

import pytest
from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import MemoryHistory

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def locked(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)


ROUTES = [
    ("GET", "/"),
    ("GET", "/api/runs"),
    ("GET", "/api/cards?run=healthy"),
    ("GET", "/api/series?run=healthy&metric=raw_reward"),
    ("GET", "/api/events?run=healthy"),
    ("GET", "/api/terms"),
    ("GET", "/api/terms/policy_entropy"),
    ("GET", "/terms/policy_entropy"),
    ("POST", "/metrics"),
    ("POST", "/query"),
    ("POST", "/variable"),
    ("GET", "/nowhere"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "]
)
def test_requests_without_the_right_token_get_401(
    locked: Flask, method: str, path: str, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    r = locked.test_client().open(path, method=method, headers=headers, json={})
    assert r.status_code == 401
    assert "bearer token" in r.get_json()["error"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_health_stays_open(locked: Flask) -> None:
    assert locked.test_client().get("/api/health").status_code == 200


def test_the_right_token_is_let_in(locked: Flask) -> None:
    r = locked.test_client().get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


def test_token_never_shows_in_the_config_repr() -> None:
    assert TOKEN not in repr(DatasourceConfig(token=TOKEN, influx_password="pw"))
