"""With RLVITALS_DATASOURCE_TOKEN set, run data needs the bearer token; health and the registry's
public text (term pages, glossary, runbook links opened from a browser) do not."""

from __future__ import annotations

import itertools

import pytest
from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import MemoryHistory

TOKEN = "s3cret-token-0123456789"
_ADDRESSES = itertools.count(1)


@pytest.fixture(scope="module")
def locked(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)


ROUTES = [
    ("GET", "/"),
    ("GET", "/api/runs"),
    ("GET", "/api/cards?run=healthy"),
    ("GET", "/api/series?run=healthy&metric=raw_reward"),
    ("GET", "/api/events?run=healthy"),
    ("GET", "/report?run=healthy"),
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
    # each from an address of its own: five wrong tokens from one address and the next is held
    # unchecked (429, tests/grafana/test_datasource_login_guard.py)
    client = {"REMOTE_ADDR": f"198.51.100.{next(_ADDRESSES)}"}
    r = locked.test_client().open(
        path, method=method, headers=headers, json={}, environ_base=client
    )
    assert r.status_code == 401
    assert "bearer token" in r.get_json()["error"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_health_stays_open(locked: Flask) -> None:
    assert locked.test_client().get("/api/health").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/terms/policy_entropy",
        "/terms/policy_entropy?lang=zh",
        "/terms/",
        "/api/terms",
        "/api/terms?lang=zh",
        "/api/terms/policy_entropy",
    ],
)
def test_term_glossary_and_runbook_pages_open_without_a_token(locked: Flask, path: str) -> None:
    r = locked.test_client().get(path)
    assert r.status_code == 200, (path, r.status_code)


def test_every_runbook_link_of_the_alert_rules_opens_without_a_token(
    locked: Flask, reg: registry.Registry
) -> None:
    from grafana.dashboards_gen.alerts import alert_rule_groups
    from grafana.dashboards_gen.sources import PUBLIC_API_URL

    links = [
        r["annotations"]["runbook_url"]
        for g in alert_rule_groups(reg)["groups"]
        for r in g["rules"]
        if r["annotations"].get("runbook_url")
    ]
    assert links
    for url in links:
        r = locked.test_client().get(url.removeprefix(PUBLIC_API_URL))
        assert r.status_code == 200, url


def test_the_right_token_is_let_in(locked: Flask) -> None:
    r = locked.test_client().get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


def test_token_never_shows_in_the_config_repr() -> None:
    assert TOKEN not in repr(DatasourceConfig(token=TOKEN, influx_password="pw"))
