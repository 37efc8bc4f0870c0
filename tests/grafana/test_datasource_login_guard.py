"""Wrong tokens are slowed and counted (issue 39: 1,640 guesses a second went unanswered by
anything but 401s). Per address: five wrong tokens cost nothing, then each further one holds the
address twice as long as the last, up to a minute, during which its token is not even checked
(429 with Retry-After); the right token afterwards clears it. In all: clients never seen with the
right token share 60 wrong tokens a minute. Bearer tokens on any route and `/api/login` count
alike; `/api/health` shows the counts. A clock the test moves stands in for waiting."""

from __future__ import annotations

import dataclasses
import http.client
import math
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from serve_process import Served

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import MemoryHistory
from grafana.datasource.login_guard import LoginGuard
from grafana.datasource.services import attach, services

TOKEN = "guard-token-0123456789abcdef"
RIGHT = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer not-the-token-at-all"}
FREE = 5  # wrong tokens an address may send before being held
MAX_HOLD = 60


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def app(reg: registry.Registry, memory_history: MemoryHistory, clock: _Clock) -> Flask:
    app = create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)
    with app.app_context():
        attach(app, dataclasses.replace(services(), logins=LoginGuard(clock)))
    return app


def _get(app: Flask, path: str, headers: dict[str, str], addr: str = "192.0.2.1") -> Any:
    return app.test_client().get(path, headers=headers, environ_base={"REMOTE_ADDR": addr})


def _login(app: Flask, token: str, addr: str = "192.0.2.1") -> Any:
    return app.test_client().post(
        "/api/login", json={"token": token}, environ_base={"REMOTE_ADDR": addr}
    )


def test_five_wrong_tokens_cost_nothing_then_the_address_is_held_unchecked(app: Flask) -> None:
    for _ in range(FREE + 1):
        assert _get(app, "/api/runs", WRONG).status_code == 401
    held = _get(app, "/api/runs", RIGHT)  # even the right token: it is not checked
    assert held.status_code == 429
    assert held.headers["Retry-After"] == "1"
    assert "too many wrong tokens from this address" in held.get_json()["error"]


def test_each_further_wrong_token_doubles_the_hold_up_to_a_minute(
    app: Flask, clock: _Clock
) -> None:
    for _ in range(FREE):
        _get(app, "/api/runs", WRONG)
    holds = []
    for _ in range(9):
        assert _get(app, "/api/runs", WRONG).status_code == 401  # checked, and wrong
        r = _get(app, "/api/runs", WRONG)
        assert r.status_code == 429
        holds.append(int(r.headers["Retry-After"]))
        clock.now += holds[-1]  # wait it out
    assert holds == [1, 2, 4, 8, 16, 32, MAX_HOLD, MAX_HOLD, MAX_HOLD]


def test_the_right_token_after_the_hold_is_let_in_and_clears_the_count(
    app: Flask, clock: _Clock
) -> None:
    for _ in range(FREE + 1):
        _get(app, "/api/runs", WRONG)
    clock.now += 1
    assert _get(app, "/api/runs", RIGHT).status_code == 200
    for _ in range(FREE):  # five free again
        assert _get(app, "/api/runs", WRONG).status_code == 401


def test_one_address_held_does_not_hold_another(app: Flask) -> None:
    for _ in range(FREE + 2):
        _get(app, "/api/runs", WRONG, addr="192.0.2.66")
    assert _get(app, "/api/runs", WRONG, addr="192.0.2.66").status_code == 429
    assert _get(app, "/api/runs", RIGHT, addr="192.0.2.7").status_code == 200
    assert _get(app, "/api/runs", WRONG, addr="192.0.2.8").status_code == 401


def test_ipv6_addresses_of_one_64_are_one_client(app: Flask) -> None:
    for i in range(FREE + 1):
        _get(app, "/api/runs", WRONG, addr=f"2001:db8::{i + 1:x}")
    assert _get(app, "/api/runs", RIGHT, addr="2001:db8::ffff").status_code == 429


def test_sign_in_guesses_count_with_bearer_guesses(app: Flask) -> None:
    for _ in range(3):
        assert _login(app, "wrong-guess").status_code == 401
    for _ in range(FREE - 3 + 1):
        _get(app, "/api/runs", WRONG)
    r = _login(app, TOKEN)
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert "Set-Cookie" not in r.headers


def test_many_addresses_share_sixty_wrong_tokens_a_minute(app: Flask, clock: _Clock) -> None:
    assert _get(app, "/api/runs", RIGHT, addr="10.0.0.1").status_code == 200  # Grafana, say
    for i in range(60):  # one wrong token each: no address reaches its own hold
        assert _get(app, "/api/runs", WRONG, addr=f"203.0.113.{i}").status_code == 401
    held = _get(app, "/api/runs", RIGHT, addr="203.0.113.200")
    assert held.status_code == 429
    assert "many addresses" in held.get_json()["error"]
    assert held.headers["Retry-After"] == "1"
    # a client the token was right for is still checked
    assert _get(app, "/api/runs", RIGHT, addr="10.0.0.1").status_code == 200
    clock.now += 1  # one more wrong token a second is let through
    assert _get(app, "/api/runs", RIGHT, addr="203.0.113.200").status_code == 200


def test_a_held_address_gets_the_open_answer_of_health_without_its_token_checked(
    app: Flask,
) -> None:
    for _ in range(FREE + 1):
        _get(app, "/api/health", WRONG)  # the detail it gives the token is an oracle too
    r = _get(app, "/api/health", RIGHT)
    assert r.status_code == 200
    assert set(r.get_json()) == {"status", "version"}  # as without a token: no detail


def test_health_counts_wrong_tokens_and_holds(app: Flask) -> None:
    for _ in range(FREE + 1):
        _get(app, "/api/runs", WRONG)
    for _ in range(3):
        _get(app, "/api/runs", WRONG)  # held, unchecked
    logins = _get(app, "/api/health", RIGHT, addr="192.0.2.9").get_json()["logins"]
    assert logins == {"wrong_tokens": FREE + 1, "held_unchecked": 3, "clients_held_now": 1}


# -- against a real `rlvitals serve` ------------------------------------------------------------


def test_a_guessing_loop_against_serve_gets_its_guesses_checked_a_handful_of_times(
    tmp_path: Path,
) -> None:
    env = {"RLVITALS_STORE": str(tmp_path), "RLVITALS_DATASOURCE_TOKEN": TOKEN}
    server = Served(tmp_path, env=env)
    statuses: list[int] = []
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/api/health")
        conn.getresponse().read()
        began = time.monotonic()
        for i in range(200):  # as fast as one connection goes
            conn.request("GET", "/api/runs", headers={"Authorization": f"Bearer guess-{i:04d}"})
            r = conn.getresponse()
            r.read()
            statuses.append(r.status)
        elapsed = time.monotonic() - began
        conn.close()
    finally:
        server.kill()
    err = server.stderr
    checked = statuses.count(401)
    assert statuses.count(429) == 200 - checked
    # after the sixth, one more check per hold passed: 1 s, then 2, 4, ... (2**k - 1 s in all)
    assert FREE + 1 <= checked <= FREE + 1 + math.ceil(math.log2(elapsed + 1))
    assert statuses[: FREE + 1] == [401] * (FREE + 1)
    assert err.count("wrong tokens from 127.0.0.1") == 1  # one log line, not one per guess
