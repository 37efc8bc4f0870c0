"""A browser has no way to send the bearer token, so a dashboard started with
RLVITALS_DATASOURCE_TOKEN signs it in once at /login: the token checked, a session cookie set
that carries an HMAC of the token (never the token), and pages asked for without it redirected
there. Clients that do not ask for HTML (Grafana, curl) still get the 401 JSON."""

from __future__ import annotations

import pytest
from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.config import SESSION_COOKIE
from grafana.datasource.history import MemoryHistory

TOKEN = "s3cret-token-0123456789"
HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture
def locked(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)


def _cookie(client: object) -> str | None:
    got = client.get_cookie(SESSION_COOKIE)  # type: ignore[attr-defined]
    return None if got is None else got.value


def test_a_browser_asking_for_a_page_without_the_token_is_sent_to_sign_in_and_back(
    locked: Flask,
) -> None:
    r = locked.test_client().get("/run?run=healthy&lang=zh", headers=HTML)
    assert r.status_code == 303
    assert r.headers["Location"] == "/login?next=%2Frun%3Frun%3Dhealthy%26lang%3Dzh"
    page = locked.test_client().get(r.headers["Location"], headers=HTML)
    assert page.status_code == 200
    assert 'data-next="/run?run=healthy&amp;lang=zh"' in page.get_data(as_text=True)
    assert "Content-Security-Policy" in page.headers


def test_the_sign_in_page_and_its_files_open_without_the_token(locked: Flask) -> None:
    client = locked.test_client()
    for path in ("/login", "/live/static/login.js", "/live/static/live.css", "/live/report.css"):
        assert client.get(path).status_code == 200, path


def test_the_right_token_sets_a_session_cookie_that_opens_pages_and_api(locked: Flask) -> None:
    client = locked.test_client()
    r = client.post("/api/login", json={"token": TOKEN})
    assert r.status_code == 204
    set_cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/" in set_cookie
    value = _cookie(client)
    assert value and TOKEN not in value  # the cookie is no bearer token
    assert client.get("/api/runs").status_code == 200
    assert client.get("/run?run=healthy", headers=HTML).status_code == 200
    assert client.get("/", headers=HTML).status_code == 200


def test_the_session_cookie_is_not_accepted_as_a_bearer_token(locked: Flask) -> None:
    client = locked.test_client()
    client.post("/api/login", json={"token": TOKEN})
    value = _cookie(client)
    r = locked.test_client().get("/api/runs", headers={"Authorization": f"Bearer {value}"})
    assert r.status_code == 401


@pytest.mark.parametrize("body", [{"token": "wrong"}, {"token": TOKEN + "x"}, {"token": ""}])
def test_a_wrong_token_is_refused_and_sets_no_cookie(locked: Flask, body: dict[str, str]) -> None:
    client = locked.test_client()
    r = client.post("/api/login", json=body)
    assert r.status_code == 401
    assert "RLVITALS_DATASOURCE_TOKEN" in r.get_json()["error"]
    assert _cookie(client) is None
    assert client.get("/api/runs").status_code == 401


@pytest.mark.parametrize("body", [[], {"tok": TOKEN}, {"token": 3}, "s3cret-token"])
def test_a_malformed_sign_in_body_is_a_400_naming_the_shape(locked: Flask, body: object) -> None:
    r = locked.test_client().post("/api/login", json=body)
    assert r.status_code == 400
    assert '{"token":' in r.get_json()["error"]


def test_a_forged_or_stale_cookie_opens_nothing(
    reg: registry.Registry, memory_history: MemoryHistory, locked: Flask
) -> None:
    client = locked.test_client()
    client.set_cookie(SESSION_COOKIE, "0" * 64)
    assert client.get("/api/runs").status_code == 401
    # a cookie of the old token after the token was changed
    old = locked.test_client()
    old.post("/api/login", json={"token": TOKEN})
    value = _cookie(old)
    assert value is not None
    rotated = create_app(
        DatasourceConfig(token="rotated-token-9876543210"), reg, history=memory_history
    )
    fresh = rotated.test_client()
    fresh.set_cookie(SESSION_COOKIE, value)
    assert fresh.get("/api/runs").status_code == 401


def test_sign_out_clears_the_cookie(locked: Flask) -> None:
    client = locked.test_client()
    client.post("/api/login", json={"token": TOKEN})
    assert client.post("/api/logout", json={}).status_code == 204
    assert _cookie(client) is None
    assert client.get("/api/runs").status_code == 401


@pytest.mark.parametrize(
    "nxt", ["//evil.example/", "https://evil.example/", "/\\evil.example", "evil", "/a\r\nb"]
)
def test_sign_in_never_sends_the_browser_off_this_server(locked: Flask, nxt: str) -> None:
    page = locked.test_client().get("/login", query_string={"next": nxt}).get_data(as_text=True)
    assert 'data-next="/"' in page


def test_clients_that_do_not_ask_for_html_still_get_the_401_json(locked: Flask) -> None:
    for accept in (None, "application/json", "*/*", "application/json, text/plain, */*"):
        headers = {} if accept is None else {"Accept": accept}
        r = locked.test_client().get("/api/runs", headers=headers)
        assert r.status_code == 401, accept
        assert "/login" in r.get_json()["error"]


def test_without_a_token_sign_in_is_a_no_op(
    reg: registry.Registry, memory_history: MemoryHistory
) -> None:
    app = create_app(DatasourceConfig(), reg, history=memory_history)
    client = app.test_client()
    assert client.post("/api/login", json={"token": "anything"}).status_code == 204
    assert _cookie(client) is None
