"""Passwords changed in .env apply at the next `docker compose up`, or the stack says why not.

The influxdb image sets its users' passwords only when it creates the `influxdb-data` volume. The
compose's influxdb service starts through provisioning/influxdb-start/entrypoint.sh, which, once
the real server answers, sources apply-passwords.sh with INFLUX_CMD running a statement as the
admin, and leaves the marker its health check asks for only when that succeeded. Here the script
runs on a real InfluxDB 1.x with authentication on, users made as at a first start, INFLUX_CMD the
shim test_compose_influx_users.py uses (the image's `influx -execute` exits non-zero on a refused
statement, as the shim does). The entrypoint itself runs only inside the image (not run here: no
Docker engine); its wiring to the compose file is checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from influx_server import InfluxServer
from test_compose_influx_users import _SHIM, _query

ROOT = Path(__file__).resolve().parents[2]
START = ROOT / "provisioning" / "influxdb-start"
DB = "rl"
ADMIN = ("admin", "a-secret")
USERS = {"INFLUXDB_READ_USER": "reader", "RLVITALS_EXPORTER_USER": "exporter"}
PASSWORD_OF = {
    "INFLUXDB_READ_USER": "INFLUXDB_READ_USER_PASSWORD",
    "RLVITALS_EXPORTER_USER": "RLVITALS_EXPORTER_PASSWORD",
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[InfluxServer]:
    if shutil.which("influxd") is None:
        pytest.skip("influxd is not on PATH (install Debian's `influxdb` package)")
    (tmp_path / "influxd").mkdir()
    srv = InfluxServer(tmp_path / "influxd", auth=True)
    srv.start()
    try:
        _query(
            srv, f"CREATE USER \"{ADMIN[0]}\" WITH PASSWORD '{ADMIN[1]}' WITH ALL PRIVILEGES", None
        )
        _query(srv, f'CREATE DATABASE "{DB}"', ADMIN)
        for user in USERS.values():  # the passwords the volume was created with
            _query(srv, f"CREATE USER \"{user}\" WITH PASSWORD 'first-{user}'", ADMIN)
            _query(srv, f'GRANT READ ON "{DB}" TO "{user}"', ADMIN)
        yield srv
    finally:
        srv.stop()


def _apply(
    srv: InfluxServer,
    tmp_path: Path,
    passwords: dict[str, str],
    admin: tuple[str, str] = ADMIN,
    users: dict[str, str] = USERS,
) -> subprocess.CompletedProcess[str]:
    """apply-passwords.sh sourced as the entrypoint sources it, the .env values (`users`: the
    user names, `passwords` by user name) in the environment the compose file gives the
    influxdb service."""
    shim = tmp_path / "influx_cmd.py"
    shim.write_text(_SHIM)
    env = {
        **os.environ,
        "INFLUX_CMD": f"{sys.executable} {shim} {srv.url} {admin[0]} {admin[1]}",
        **users,
        **{PASSWORD_OF[k]: passwords[v] for k, v in users.items()},
    }
    script = START / "apply-passwords.sh"
    return subprocess.run(
        ["sh", "-c", f'. "{script}" && touch "{tmp_path}/marker"'],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _logs_in(srv: InfluxServer, user: str, password: str) -> bool:
    body = _query(srv, "SHOW DATABASES", (user, password))
    return "error" not in body and "status" not in body


def test_passwords_changed_in_env_apply_at_the_next_start(
    server: InfluxServer, tmp_path: Path
) -> None:
    # a quote and a backslash: an InfluxQL string literal must carry them as typed
    new = {"reader": "new 'read' pass\\word", "exporter": "new-exporter-pass"}
    done = _apply(server, tmp_path, new)
    assert done.returncode == 0, done.stderr
    assert "passwords are the ones in .env" in done.stdout
    assert (tmp_path / "marker").exists()
    for user, password in new.items():
        assert _logs_in(server, user, password), user
        assert not _logs_in(server, user, f"first-{user}"), user


def test_an_unchanged_env_applies_again_harmlessly(server: InfluxServer, tmp_path: Path) -> None:
    same = {u: f"first-{u}" for u in USERS.values()}
    assert _apply(server, tmp_path, same).returncode == 0
    assert all(_logs_in(server, u, p) for u, p in same.items())


def test_a_changed_admin_password_is_said_and_nothing_is_applied(
    server: InfluxServer, tmp_path: Path
) -> None:
    new = {u: f"second-{u}" for u in USERS.values()}
    done = _apply(server, tmp_path, new, admin=(ADMIN[0], "changed-in-env"))
    assert done.returncode != 0
    assert "INFLUXDB_ADMIN_PASSWORD" in done.stderr and "NOT applied" in done.stderr
    assert "docs/compose.md" in done.stderr
    assert not (tmp_path / "marker").exists()  # the health check stays failing
    for user in USERS.values():
        assert _logs_in(server, user, f"first-{user}")


def test_a_renamed_service_user_is_said(server: InfluxServer, tmp_path: Path) -> None:
    renamed = {**USERS, "RLVITALS_EXPORTER_USER": "exporter-renamed"}
    done = _apply(server, tmp_path, {"reader": "x", "exporter-renamed": "y"}, users=renamed)
    assert done.returncode != 0
    assert "'exporter-renamed'" in done.stderr and "INFLUXDB_EXPORTER_USER" in done.stderr


def _influxdb_service() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service: dict[str, Any] = compose["services"]["influxdb"]
    return service


def test_the_influxdb_service_starts_through_the_entrypoint_and_is_healthy_only_after_it() -> None:
    svc = _influxdb_service()
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    assert mounts["/etc/rlvitals"] == "./provisioning/influxdb-start"
    assert svc["entrypoint"] == ["sh", "/etc/rlvitals/entrypoint.sh"]
    # an entrypoint set by compose drops the image's command: the server must be named again
    assert svc["command"] == ["influxd"]
    entry = (START / "entrypoint.sh").read_text()
    marker = "/tmp/rlvitals-passwords-applied"
    assert f"touch {marker}" in entry and ". /etc/rlvitals/apply-passwords.sh" in entry
    assert f"test -f {marker}" in " ".join(svc["healthcheck"]["test"])
    # both scripts parse as POSIX sh (the image runs them with its /bin/sh)
    for script in ("entrypoint.sh", "apply-passwords.sh"):
        assert subprocess.run(["sh", "-n", str(START / script)], check=False).returncode == 0
    # not in the folder the image's first-start init sources every script of
    assert mounts["/docker-entrypoint-initdb.d"] != mounts["/etc/rlvitals"]
