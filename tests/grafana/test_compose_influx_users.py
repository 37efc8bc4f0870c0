"""The InfluxDB users compose makes, tried on a real InfluxDB 1.x with authentication on (as
compose runs it): the exporter's user writes and keeps rollups, the read-only user Grafana and the
datasource use reads and cannot write, and neither is an admin.

The users are made as at a real first start: the read user as the influxdb image's
init-influxdb.sh makes INFLUXDB_READ_USER (influxdata/influxdata-docker influxdb/1.8/
init-influxdb.sh: CREATE USER, REVOKE ALL PRIVILEGES, GRANT READ ON the database), the exporter's by
running provisioning/influxdb/10-exporter-user.sh itself, sourced the way that script sources it,
with INFLUX_CMD running each statement as the admin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from influx_server import InfluxServer

import exporter
import registry
from exporter.schema import ROLLUP_LEVELS, rollup_measurement
from grafana.datasource import DatasourceConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "provisioning" / "influxdb" / "10-exporter-user.sh"
DB, ADMIN, READER, EXPORTER = (
    "rl",
    ("admin", "a-secret"),
    ("reader", "r-secret"),
    ("exporter", "e-s"),
)
_SHIM = """
import json, sys, urllib.parse, urllib.request
url, user, password, statement = sys.argv[1:5]
auth = urllib.parse.urlencode({"u": user, "p": password})  # credentials go in the URL's query
data = urllib.parse.urlencode({"q": statement}).encode()
with urllib.request.urlopen(url + "/query?" + auth, data=data, timeout=10) as r:
    body = json.loads(r.read())
errors = [res["error"] for res in body.get("results", []) if "error" in res]
sys.exit("; ".join(errors) if errors else 0)
"""


def _query(
    server: InfluxServer, q: str, auth: tuple[str, str] | None, db: str | None = None
) -> dict:
    params = {"q": q, **({"db": db} if db else {})}
    data = urllib.parse.urlencode(params).encode()
    # InfluxDB 1.x reads credentials from the URL's query (or basic auth), not from a form body
    creds = "" if auth is None else "?" + urllib.parse.urlencode({"u": auth[0], "p": auth[1]})
    try:
        with urllib.request.urlopen(f"{server.url}/query{creds}", data=data, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:  # refused statements come back with their error
        return json.loads(exc.read() or b"{}") | {"status": exc.code}


def _write_status(server: InfluxServer, auth: tuple[str, str]) -> int:
    query = urllib.parse.urlencode({"db": DB, "precision": "s", "u": auth[0], "p": auth[1]})
    request = urllib.request.Request(f"{server.url}/write?{query}", data=b"probe v=1 1")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxServer]:
    if shutil.which("influxd") is None:
        pytest.skip("influxd is not on PATH (install Debian's `influxdb` package)")
    server = InfluxServer(tmp_path_factory.mktemp("influxd-auth"), auth=True)
    server.start()
    try:
        # with no user yet, InfluxDB lets the first one, the admin, be made without credentials
        _query(
            server,
            f"CREATE USER \"{ADMIN[0]}\" WITH PASSWORD '{ADMIN[1]}' WITH ALL PRIVILEGES",
            None,
        )
        for q in (
            f'CREATE DATABASE "{DB}"',
            f"CREATE USER \"{READER[0]}\" WITH PASSWORD '{READER[1]}'",
            f'REVOKE ALL PRIVILEGES FROM "{READER[0]}"',
            f'GRANT READ ON "{DB}" TO "{READER[0]}"',
        ):
            _query(server, q, ADMIN)
        shim = tmp_path_factory.mktemp("shim") / "influx_cmd.py"
        shim.write_text(_SHIM)
        env = {
            **os.environ,
            "INFLUX_CMD": f"{sys.executable} {shim} {server.url} {ADMIN[0]} {ADMIN[1]}",
            "INFLUXDB_DB": DB,
            "RLVITALS_EXPORTER_USER": EXPORTER[0],
            "RLVITALS_EXPORTER_PASSWORD": EXPORTER[1],
        }
        done = subprocess.run(
            ["sh", "-c", f'set -e; . "{SCRIPT}"'],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        yield server
    finally:
        server.stop()


def test_the_exporters_user_writes_the_points_and_keeps_their_rollups(
    secured: InfluxServer, tmp_path: Path, builtin: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(
        store=tmp_path,
        influx_url=secured.url,
        influx_database=DB,
        influx_username=EXPORTER[0],
        influx_password=EXPORTER[1],
    )
    with exporter.init("ppo", registry=builtin, settings=settings) as run:
        for step in range(300):
            run.log(step, {"policy_kl": 0.01})
        assert run.flush(60)
        assert run.stats.write_errors == 0
    group = builtin.metric("policy_kl").group
    body = _query(secured, f'SELECT count("policy_kl") FROM "{group}"', READER, DB)
    assert body["results"][0]["series"][0]["values"][0][1] == 300
    shown = _query(secured, "SHOW MEASUREMENTS", READER, DB)
    names = {v[0] for v in body_values(shown)}
    assert rollup_measurement(ROLLUP_LEVELS[0]) in names  # SELECT ... INTO ran as this user


def body_values(body: dict) -> list[list[object]]:
    return [v for res in body["results"] for s in res.get("series", []) for v in s["values"]]


def test_the_read_only_user_serves_the_datasource_and_cannot_write(
    secured: InfluxServer, builtin: registry.Registry
) -> None:
    config = DatasourceConfig(
        influx_url=secured.url,
        influx_database=DB,
        influx_username=READER[0],
        influx_password=READER[1],
    )
    client = create_app(config, builtin).test_client()
    assert client.get("/api/health").status_code == 200
    assert _write_status(secured, READER) == 403


def test_neither_service_user_is_an_admin(secured: InfluxServer) -> None:
    for user in (READER, EXPORTER):
        body = _query(secured, 'CREATE DATABASE "other"', user)
        assert body.get("status") == 403 and "authorized" in body.get("error", ""), (user, body)
    assert _write_status(secured, EXPORTER) == 204
