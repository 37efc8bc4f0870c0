"""`rlvitals serve` answers only requests addressed to it (the Host allowlist defeats DNS
rebinding), reads POST bodies only when sent as application/json (so no web page can fire queries
with a CORS "simple" request), and its open /api/health tells the status without disclosing where
the history store lives."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from influx_server import refused_port
from serve_process import Served, ServeExited
from werkzeug.routing import Rule

import registry
from grafana.datasource import ConfigError, DatasourceConfig, create_app
from grafana.datasource.config import HOSTS_SETTING
from grafana.datasource.history import HistoryUnavailable, MemoryHistory

FOREIGN = "attacker-rebind.example"
TOKEN = "h4rden-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
# one body every POST route of the simpod protocol accepts
GOOD_BODY = {"targets": [], "payload": {"target": "runs"}, "key": "run", "name": "run"}
# a plausible value for each path variable of the routes; a new variable needs one here
PATH_VALUES = {"entry_id": "policy_entropy", "name": "run.js"}


@pytest.fixture(scope="module")
def locked(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)


def _routes(app: Flask) -> list[tuple[str, str]]:
    """(method, path) for every method of every rule of the app, path variables filled."""
    adapter = app.url_map.bind("localhost")
    out = []
    for rule in app.url_map.iter_rules():
        missing = set(rule.arguments) - set(PATH_VALUES)
        assert not missing, f"add a sample value for {missing} of {rule.rule} to PATH_VALUES"
        values = {a: PATH_VALUES[a] for a in rule.arguments}
        path = adapter.build(rule.endpoint, values)
        out.extend((method, path) for method in sorted(rule.methods or ()))
    return out


def _open(app: Flask, method: str, path: str, host: str, **kw: Any) -> Any:
    headers = {"Host": host, **BEARER, **kw.pop("headers", {})}
    body = kw.pop("json", GOOD_BODY if method == "POST" else None)
    return app.test_client().open(path, method=method, headers=headers, json=body, **kw)


def _refused_for_host(response: Any) -> bool:
    if response.status_code != 400:
        return False
    if response.request.method == "HEAD":  # no body to read
        return True
    error = response.get_json()["error"]
    return "is not an allowed host" in error and HOSTS_SETTING in error


# -- (a) a foreign Host gets 400 on every route ------------------------------------------------


def test_every_route_of_the_app_is_enumerated(locked: Flask) -> None:
    routes = _routes(locked)
    methods = {m for m, _ in routes}
    assert {"GET", "HEAD", "OPTIONS", "POST"} <= methods
    paths = {p for _, p in routes}
    assert {"/api/health", "/terms/", "/", "/live/static/run.js", "/query"} <= paths
    assert len({r.rule for r in locked.url_map.iter_rules()}) >= 20


def test_a_foreign_host_is_refused_on_every_route_and_method(locked: Flask) -> None:
    extra = [("GET", "/nowhere"), ("POST", "/nowhere"), ("GET", "/terms"), ("DELETE", "/query")]
    for method, path in [*_routes(locked), *extra]:
        r = _open(locked, method, path, FOREIGN)
        assert _refused_for_host(r), (method, path, r.status_code, r.data[:200])
        assert "Location" not in r.headers, (method, path)
        if method != "HEAD":
            assert f"Host '{FOREIGN}'" in r.get_json()["error"]


def test_the_same_requests_addressed_to_localhost_pass_the_host_check(locked: Flask) -> None:
    for method, path in [*_routes(locked), ("GET", "/nowhere")]:
        if method == "HEAD":  # no body to tell a refusal from a missing parameter; GET tells
            continue
        r = _open(locked, method, path, "localhost:8686")
        assert not _refused_for_host(r), (method, path, r.data[:200])


def test_no_file_of_the_working_directory_is_served(
    reg: registry.Registry,
    memory_history: MemoryHistory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Flask's default static route would serve ./static of wherever `serve` was started
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "secret.txt").write_text("not for the web")
    monkeypatch.chdir(tmp_path)
    app = create_app(DatasourceConfig(), reg, history=memory_history)
    r = app.test_client().get("/static/secret.txt")
    assert r.status_code == 404 and b"not for the web" not in r.data


def test_a_foreign_host_is_refused_before_the_token_is_asked_for(locked: Flask) -> None:
    r = locked.test_client().get("/api/runs", headers={"Host": FOREIGN})
    assert r.status_code == 400 and "WWW-Authenticate" not in r.headers


# -- (b) loopback, configured names and `*` are served -----------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8686",
        "LocalHost",
        "localhost.",
        "127.0.0.1",
        "127.0.0.1:1",
        "[::1]",
        "[::1]:8686",
        "[0:0:0:0:0:0:0:1]:8686",
    ],
)
def test_loopback_hosts_are_served_on_any_port(app: Flask, host: str) -> None:
    r = app.test_client().get("/api/runs", headers={"Host": host})
    assert r.status_code == 200, r.data[:200]


@pytest.mark.parametrize(
    "host",
    [
        FOREIGN,
        "",
        "localhost.attacker-rebind.example",
        "127.0.0.1.nip.io",
        "127.0.0.2",
        "[::2]",
        "[::1",
        "localhost:port",
        "localhost@attacker-rebind.example",
        "datasource",
    ],
)
def test_names_that_are_not_loopback_nor_configured_are_refused(app: Flask, host: str) -> None:
    r = app.test_client().get("/api/runs", headers={"Host": host})
    assert _refused_for_host(r), (host, r.status_code)


@pytest.fixture(scope="module")
def compose_like(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    config = DatasourceConfig.from_env({HOSTS_SETTING: "datasource, grafana.example.org"})
    return create_app(config, reg, history=memory_history)


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("datasource:8686", True),
        ("DATASOURCE", True),
        ("grafana.example.org", True),
        ("localhost:8686", True),
        ("datasource.attacker-rebind.example", False),
        ("evil-datasource", False),
        ("example.org", False),
        (FOREIGN, False),
    ],
)
def test_configured_host_names_are_served_and_only_those(
    compose_like: Flask, host: str, served: bool
) -> None:
    r = compose_like.test_client().get("/api/runs", headers={"Host": host})
    assert (r.status_code == 200) is served, (host, r.status_code)
    assert _refused_for_host(r) is not served


def test_star_answers_any_host(reg: registry.Registry, memory_history: MemoryHistory) -> None:
    app = create_app(DatasourceConfig(allowed_hosts=("*",)), reg, history=memory_history)
    for host in (FOREIGN, "10.1.2.3:8686", "[fe80::1]", "localhost"):
        r = app.test_client().get("/api/runs", headers={"Host": host})
        assert r.status_code == 200, host


# -- (a, b) against a real `rlvitals serve` under waitress -------------------------------------


def _raw_get(port: int, path: str, host: str | None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        # a Host among the headers replaces the one http.client would send
        conn.request("GET", path, headers={} if host is None else {"Host": host})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a real `rlvitals serve` under waitress."""
    env = {
        "RLVITALS_STORE": str(tmp_path_factory.mktemp("store")),
        HOSTS_SETTING: "grafana.example.org",
    }
    server = Served(Path.cwd(), "--allow-host", "lab-box.example", env=env, clean=True)
    try:
        yield server.port
    finally:
        server.kill()


@pytest.mark.parametrize("path", ["/api/runs", "/terms", "/terms/", "/nowhere"])
def test_waitress_refuses_a_rebinding_host_without_redirecting_to_it(
    served: int, path: str
) -> None:
    status, headers, body = _raw_get(served, path, FOREIGN)
    assert status == 400
    assert "location" not in headers
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert FOREIGN in error and HOSTS_SETTING in error and "--allow-host" in error


def test_waitress_refuses_a_request_without_a_host_header(
    served: int,
) -> None:
    with socket.create_connection(("127.0.0.1", served), timeout=10) as s:
        s.sendall(b"GET /api/runs HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400") or reply.startswith(b"HTTP/1.0 400"), reply[:100]


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "grafana.example.org", "lab-box.example"]
)
def test_waitress_serves_loopback_the_env_names_and_the_flag_names(served: int, host: str) -> None:
    port = served
    status, _, body = _raw_get(port, "/api/runs", f"{host}:{port}")
    assert (status, body) == (200, b'{"runs":[]}\n')


# -- (c) POST bodies only as application/json ------------------------------------------------


def _post_paths(app: Flask) -> list[str]:
    rules: list[Rule] = [r for r in app.url_map.iter_rules() if "POST" in (r.methods or ())]
    return sorted(r.rule for r in rules)


SIMPOD_POSTS = [
    "/metric-payload-options",
    "/metrics",
    "/query",
    "/tag-keys",
    "/tag-values",
    "/variable",
]
# Besides the simpod protocol: signing a browser in and out, Grafana's alert webhook, and run
# management (api_manage: answered where editing is on; tests/grafana/test_datasource_manage.py).
OWN_POSTS = ["/api/alert-notifications", "/api/login", "/api/logout"]
MANAGE_POSTS = ["/api/run/notes", "/api/run/rename", "/api/run/tags"]


def test_the_post_routes_are_simpod_sign_in_the_alert_receiver_and_run_management(
    app: Flask,
) -> None:
    assert _post_paths(app) == sorted(SIMPOD_POSTS + OWN_POSTS + MANAGE_POSTS)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "application/jsonx",
        "text/plain; x=application/json",
        None,
    ],
)
def test_posts_not_sent_as_json_are_415_on_every_post_route(
    app: Flask, content_type: str | None
) -> None:
    for path in _post_paths(app):
        r = app.test_client().post(path, data=json.dumps(GOOD_BODY), content_type=content_type)
        assert r.status_code == 415, (path, content_type, r.status_code)
        error = r.get_json()["error"]
        assert "application/json" in error
        if content_type is None:
            assert "no Content-Type" in error
        else:
            assert repr(content_type) in error


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
def test_posts_sent_as_json_are_answered(app: Flask, content_type: str) -> None:
    for path in SIMPOD_POSTS:
        r = app.test_client().post(path, data=json.dumps(GOOD_BODY), content_type=content_type)
        assert r.status_code == 200, (path, r.data[:200])


def test_a_post_to_a_get_route_keeps_its_405(app: Flask) -> None:
    r = app.test_client().post("/api/runs", data="x", content_type="text/plain")
    assert r.status_code == 405 and "not allowed" in r.get_json()["error"]


# -- (d) /api/health tells without disclosing --------------------------------------------------

INFLUX_DETAIL = "cannot query InfluxDB at http://influx-internal.example:8086 (db secretdb)"


class _DownStore:
    """A history store whose every read fails as InfluxDB's does when it is unreachable."""

    kind = "influxdb"

    def runs(self) -> tuple[str, ...]:
        raise HistoryUnavailable(INFLUX_DETAIL)


def _health(app: Flask, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    r = app.test_client().get("/api/health", headers=headers or {})
    return r.status_code, r.get_json()


def test_degraded_health_without_the_token_names_no_address(reg: registry.Registry) -> None:
    app = create_app(DatasourceConfig(token=TOKEN), reg, history=_DownStore())
    status, body = _health(app)
    assert status == 503
    assert set(body) == {"status", "version", "reason"}
    assert body["status"] == "degraded" and body["reason"] == "history store unavailable"
    text = json.dumps(body)
    for leak in ("influx", "8086", "http", "secretdb", "example"):
        assert leak not in text.lower(), leak


def test_degraded_health_with_the_token_gives_the_detail(reg: registry.Registry) -> None:
    app = create_app(DatasourceConfig(token=TOKEN), reg, history=_DownStore())
    status, body = _health(app, BEARER)
    assert status == 503 and body["status"] == "degraded"
    assert body["store"] == {"kind": "influxdb", "ok": False, "error": INFLUX_DETAIL}
    assert body["auth"] is True


def test_health_with_a_wrong_token_is_the_short_answer(reg: registry.Registry) -> None:
    app = create_app(DatasourceConfig(token=TOKEN), reg, history=_DownStore())
    status, body = _health(app, {"Authorization": f"Bearer {TOKEN}x"})
    assert (status, set(body)) == (503, {"status", "version", "reason"})


def test_healthy_health_without_the_token_is_status_and_version(locked: Flask) -> None:
    status, body = _health(locked)
    assert status == 200 and set(body) == {"status", "version"} and body["status"] == "ok"
    status, body = _health(locked, BEARER)
    assert status == 200 and body["store"]["ok"] is True and body["auth"] is True


def test_unreachable_influxdb_is_not_disclosed_by_open_health(reg: registry.Registry) -> None:
    with refused_port() as port:  # bound, never listened on: connecting is refused at once
        config = DatasourceConfig(
            influx_url=f"http://127.0.0.1:{port}",
            influx_database="secretdb",
            influx_timeout=2,
            token=TOKEN,
        )
        app = create_app(config, reg)
        status, body = _health(app)
        assert status == 503 and set(body) == {"status", "version", "reason"}
        text = json.dumps(body)
        assert "127.0.0.1" not in text and str(port) not in text and "secretdb" not in text
        status, body = _health(app, BEARER)
        assert status == 503 and f"127.0.0.1:{port}" in body["store"]["error"]


def test_without_a_token_configured_health_gives_the_detail(reg: registry.Registry) -> None:
    # every route is open then, run data included, so the detail protects nothing extra
    app = create_app(DatasourceConfig(), reg, history=_DownStore())
    status, body = _health(app)
    assert status == 503 and body["store"]["error"] == INFLUX_DETAIL and body["auth"] is False


# -- (e) the settings are checked ------------------------------------------------------------


def test_allowed_hosts_come_from_the_environment_in_canonical_form() -> None:
    config = DatasourceConfig.from_env({HOSTS_SETTING: " Datasource, [::1] ,grafana.example.org."})
    assert config.allowed_hosts == ("datasource", "::1", "grafana.example.org")
    assert DatasourceConfig.from_env({}).allowed_hosts == ()
    assert DatasourceConfig.from_env({HOSTS_SETTING: "*"}).allowed_hosts == ("*",)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("datasource,,grafana", "empty host name"),
        ("datasource,", "empty host name"),
        ("http://datasource:8686", "e.g. 'datasource'"),
        ("https://grafana.example.org/", "is a URL"),
        ("datasource/api", "is a URL"),
        ("datasource:8686", "give the name alone: 'datasource'"),
        ("[::1]:8686", "has a port"),
        ("bad name", "is not a host name"),
        ("*.example.org", "is not a host name"),
        ("[::1", "is not a host name"),
    ],
)
def test_bad_host_names_are_refused_naming_the_setting(value: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=HOSTS_SETTING) as caught:
        DatasourceConfig.from_env({HOSTS_SETTING: value})
    assert needle in str(caught.value) and "--allow-host" in str(caught.value)


def test_bad_host_names_given_directly_are_refused_too() -> None:
    with pytest.raises(ConfigError, match="empty host name"):
        DatasourceConfig(allowed_hosts=("",))
    with pytest.raises(ConfigError, match="is a URL"):
        DatasourceConfig().replace(allowed_hosts=("http://x",))
    with pytest.raises(ConfigError, match="not one string"):
        DatasourceConfig(allowed_hosts="datasource")  # type: ignore[arg-type]


def test_serve_refuses_a_bad_allow_host_flag_without_traceback(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rlvitals.cli", "serve", "--allow-host", "http://lab-box:8686"],
        env={"RLVITALS_STORE": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "--allow-host" in r.stderr and "'lab-box'" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("value", ["localhost:8686", "ftp://rl.example.org", "http://"])
def test_a_public_url_that_is_no_address_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError, match="RLVITALS_PUBLIC_URL"):
        DatasourceConfig.from_env({"RLVITALS_PUBLIC_URL": value})


def test_serve_refuses_a_bad_public_url_without_traceback(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rlvitals.cli", "serve"],
        env={
            "RLVITALS_STORE": str(tmp_path),
            "RLVITALS_PUBLIC_URL": "lab-box",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "RLVITALS_PUBLIC_URL" in r.stderr
    assert "Traceback" not in r.stderr


# -- (e) a bind other machines reach needs a token, unless explicitly allowed -------------------

STRONG = "Kq3v-9ZpXw2LmT8rYb4NcH6dJ0sFgA1e"


def _start_or_refusal(host: str, extra: list[str], token: str | None) -> tuple[int | None, str]:
    """(exit code, stderr) when serve refuses to start; (None, its stderr) once it answers."""
    env = {"RLVITALS_STORE": tempfile.mkdtemp()}
    if token is not None:
        env["RLVITALS_DATASOURCE_TOKEN"] = token
    try:
        server = Served(Path.cwd(), "--host", host, *extra, env=env, clean=True)
    except ServeExited as exc:
        return exc.returncode, exc.stderr
    try:
        address = host if host.startswith("127.") else "127.0.0.1"  # a wildcard has loopback
        conn = http.client.HTTPConnection(address, server.port, timeout=30)
        try:
            conn.request("GET", "/api/health", headers={"Host": "localhost"})
            assert conn.getresponse().status == 200
        finally:
            conn.close()
    finally:
        server.kill()
    return None, server.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_bind_other_machines_reach_without_a_token_is_refused_saying_why_and_how(
    host: str,
) -> None:
    code, err = _start_or_refusal(host, [], token=None)
    assert code == 2 and "Traceback" not in err
    assert f"--host {host} can be reached from other machines" in err
    for how in ("RLVITALS_DATASOURCE_TOKEN", "secrets.token_urlsafe(32)", "--host 127.0.0.1"):
        assert how in err
    assert "--allow-no-token" in err


def test_allow_no_token_serves_it_and_says_so() -> None:
    code, err = _start_or_refusal("0.0.0.0", ["--allow-no-token"], token=None)
    assert code is None
    assert "no RLVITALS_DATASOURCE_TOKEN on 0.0.0.0 (--allow-no-token)" in err


@pytest.mark.parametrize(
    ("host", "token"), [("0.0.0.0", STRONG), ("127.0.0.1", None), ("127.0.0.2", None)]
)
def test_a_token_or_a_loopback_bind_needs_no_flag(host: str, token: str | None) -> None:
    code, err = _start_or_refusal(host, [], token=token)
    assert code is None, err
    assert "--allow-no-token" not in err
