"""Run management over HTTP (`grafana/datasource/api_manage.py`) on a real embedded store: the
changes land in the store and in `/api/runs`; the bearer token is required when set; a request
from another site (Sec-Fetch-Site, Origin) or without a JSON Content-Type is refused; editing is
off unless configured; bad input gets a 4xx JSON naming what was wrong, never a 500."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from serve_process import Served

import exporter
import registry
from exporter.schema import NO_RANK
from exporter.store.outbox import Outbox
from grafana.datasource.app import create_app
from grafana.datasource.config import ConfigError, DatasourceConfig

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# what a browser sends with a fetch() from the server's own page (the test client's Host)
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    with Outbox(store / "outbox.sqlite") as box:
        for name in ("alpha", "beta"):
            box.claim_run(name)
            box.write(
                [(name, NO_RANK, s, "policy", "", "policy_kl", 0.1, 1.0) for s in range(5)],
                progress=[(name, NO_RANK, 4)],
            )
    return store


def _client(store: Path, reg: registry.Registry, **config: Any) -> FlaskClient:
    settings = {"store": store, "allow_edit": True, "token": TOKEN, **config}
    return create_app(DatasourceConfig(**settings), reg).test_client()


@pytest.fixture
def client(store: Path, reg: registry.Registry) -> FlaskClient:
    return _client(store, reg)


def _send(
    client: FlaskClient, method: str, path: str, body: Any, **headers: str
) -> tuple[int, Any]:
    sent = {**AUTH, **SAME_ORIGIN, "Content-Type": "application/json", **headers}
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    response = client.open(path, method=method, data=data, headers=sent)
    return response.status_code, response.get_json()


def _listed(client: FlaskClient) -> dict[str, Any]:
    body = client.get("/api/runs", headers=AUTH).get_json()
    return {r["run"]: r for r in body["runs"]}


def test_notes_tags_rename_and_delete_change_the_store_and_the_run_list(
    client: FlaskClient, store: Path
) -> None:
    assert _listed(client)["alpha"]["tags"] == [] and _listed(client)["alpha"]["notes"] == ""
    code, body = _send(client, "POST", "/api/run/notes", {"run": "alpha", "notes": "lr high"})
    assert (code, body["notes"]) == (200, "lr high")
    code, body = _send(client, "POST", "/api/run/tags", {"run": "alpha", "add": ["ppo", "cpu"]})
    assert (code, body["tags"]) == (200, ["cpu", "ppo"])
    code, body = _send(client, "POST", "/api/run/tags", {"run": "alpha", "remove": ["cpu"]})
    assert body["tags"] == ["ppo"]
    row = _listed(client)["alpha"]
    assert (row["tags"], row["notes"]) == (["ppo"], "lr high")
    code, body = _send(client, "POST", "/api/run/rename", {"run": "alpha", "to": "alpha-2"})
    assert (code, body["run"]) == (200, "alpha-2")
    assert set(_listed(client)) == {"alpha-2", "beta"}
    assert _listed(client)["alpha-2"]["tags"] == ["ppo"]
    code, body = _send(client, "DELETE", "/api/run", {"run": "alpha-2"})
    assert code == 200 and body["deleted"]["samples"] == 5
    assert set(_listed(client)) == {"beta"}
    with Outbox(store / "outbox.sqlite") as box:
        assert [r.run for r in box.runs()] == ["beta"]


def test_the_bearer_token_is_required(client: FlaskClient) -> None:
    response = client.post(
        "/api/run/notes",
        json={"run": "alpha", "notes": "x"},
        headers={**SAME_ORIGIN, "Authorization": "Bearer wrong"},
    )
    assert response.status_code == 401 and "bearer token" in response.get_json()["error"]


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({"Sec-Fetch-Site": "cross-site"}, 403, "cross-site request"),
        ({"Sec-Fetch-Site": "same-site"}, 403, "same-site request"),
        ({"Origin": "http://evil.example"}, 403, "Origin 'http://evil.example'"),
        ({"Origin": "http://localhost:9999"}, 403, "Origin"),
        ({"Content-Type": "text/plain"}, 415, "application/json"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"),
    ],
)
def test_a_request_from_another_site_or_not_json_is_refused(
    client: FlaskClient, store: Path, headers: dict[str, str], status: int, says: str
) -> None:
    for method, path in (("DELETE", "/api/run"), ("POST", "/api/run/rename")):
        code, body = _send(client, method, path, {"run": "alpha", "to": "x"}, **headers)
        assert code == status and says in body["error"], (method, body)
    assert set(_listed(client)) == {"alpha", "beta"}


def test_a_client_that_is_no_browser_needs_only_the_token(client: FlaskClient) -> None:
    response = client.post("/api/run/tags", json={"run": "beta", "add": ["x"]}, headers=AUTH)
    assert response.status_code == 200 and response.get_json()["tags"] == ["x"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("DELETE", "/api/run", "", 400, "request body is empty"),
        ("DELETE", "/api/run", "[1]", 400, "must be a JSON object"),
        ("DELETE", "/api/run", "{", 400, "not valid JSON"),
        ("DELETE", "/api/run", {}, 400, "field 'run' must be a string"),
        ("DELETE", "/api/run", {"run": ""}, 400, "field 'run' must not be empty"),
        ("DELETE", "/api/run", {"run": "alpah"}, 404, "did you mean 'alpha'?"),
        ("POST", "/api/run/rename", {"run": "alpha"}, 400, "field 'to' must be a string"),
        ("POST", "/api/run/rename", {"run": "alpha", "to": "beta"}, 409, "already in the store"),
        ("POST", "/api/run/rename", {"run": "alpha", "to": "a\nb"}, 400, "control character"),
        ("POST", "/api/run/notes", {"run": "alpha", "notes": 3}, 400, "'notes' must be a string"),
        ("POST", "/api/run/notes", {"run": "alpha", "notes": "x" * 10_001}, 400, "stop at"),
        ("POST", "/api/run/tags", {"run": "alpha", "add": "ppo"}, 400, "list of strings"),
        ("POST", "/api/run/tags", {"run": "alpha", "add": ["a b"]}, 400, "one word"),
        ("GET", "/api/run/rename", None, 405, "not allowed"),
    ],
)
def test_bad_input_is_a_4xx_naming_what_was_wrong(
    client: FlaskClient, method: str, path: str, body: Any, status: int, says: str
) -> None:
    code, answer = _send(client, method, path, "" if body is None else body)
    assert code == status and says in answer["error"], answer
    assert set(_listed(client)) == {"alpha", "beta"}


def test_a_run_a_live_process_writes_is_a_409_naming_it(
    tmp_path: Path, reg: registry.Registry
) -> None:
    store = tmp_path / "live"
    live = exporter.init("busy", registry=reg, settings=exporter.ExporterSettings(store=store))
    live.log(1, {"policy_kl": 0.1})
    assert live.flush()
    try:
        client = _client(store, reg)
        code, body = _send(client, "DELETE", "/api/run", {"run": "busy"})
        assert code == 409 and "Stop that process first" in body["error"]
        assert "pid " in body["error"]
    finally:
        live.finish()


def test_editing_is_off_unless_configured_and_on_a_server_reading_influxdb(
    store: Path, reg: registry.Registry
) -> None:
    for config in ({"allow_edit": None}, {"allow_edit": False}):
        client = _client(store, reg, **config)
        code, body = _send(client, "DELETE", "/api/run", {"run": "alpha"})
        assert code == 403 and "RLVITALS_DATASOURCE_EDIT=1" in body["error"]
        page = client.get("/", headers={**AUTH, "Accept": "text/html"}).get_data(as_text=True)
        assert "act-delete" not in page  # the page offers nothing it would refuse
    influx = _client(store, reg, influx_url="http://127.0.0.1:1")
    code, body = _send(influx, "POST", "/api/run/notes", {"run": "alpha", "notes": "x"})
    assert code == 403 and "reads InfluxDB" in body["error"]
    with Outbox(store / "outbox.sqlite") as box:
        assert {r.run for r in box.runs()} == {"alpha", "beta"}


def test_the_edit_setting_is_read_from_the_environment() -> None:
    assert DatasourceConfig.from_env({}).allow_edit is None
    assert DatasourceConfig.from_env({"RLVITALS_DATASOURCE_EDIT": "1"}).allow_edit is True
    assert DatasourceConfig.from_env({"RLVITALS_DATASOURCE_EDIT": "off"}).allow_edit is False
    with pytest.raises(ConfigError, match="RLVITALS_DATASOURCE_EDIT='maybe' must be 1 or 0"):
        DatasourceConfig.from_env({"RLVITALS_DATASOURCE_EDIT": "maybe"})


def _tag_over_http(served: Served) -> int:
    request = urllib.request.Request(
        f"{served.url}/api/run/tags",
        data=json.dumps({"run": "alpha", "add": ["x"]}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_rlvitals_serve_allows_edits_when_bound_to_loopback_only(store: Path) -> None:
    env = {"RLVITALS_STORE": str(store)}
    servers = []
    try:
        servers.append(Served(store.parent, "--host", "127.0.0.1", env=env))
        servers.append(Served(store.parent, "--host", "0.0.0.0", "--allow-no-token", env=env))
        assert _tag_over_http(servers[0]) == 200
        assert _tag_over_http(servers[1]) == 403
    finally:
        for served in servers:
            served.kill()
