"""Rollups a trainer owed when it exited are not lost (issue 39, item 4): a rollup write or query
that fails at any moment of a run, with InfluxDB answering again only after the trainer exited,
leaves raw = rollups in InfluxDB once the next forwarder on the store has started; and `rlvitals
doctor` finds a run whose rollups disagree with its raw points, and `--repair` recomputes them.

The faults come from an HTTP proxy in front of a real InfluxDB that answers 500 to the rollup
requests (lines of the `rlvitals_rollup_*` measurements, `SELECT ... INTO` queries) from the k-th
one on, and relays everything else."""

from __future__ import annotations

import http.server
import math
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry
from exporter.schema import ROLLUP_LEVELS, rollup_measurement
from rlvitals.cli import main

FIELDS = {"policy_kl": "policy", "clip_fraction": "policy"}  # field -> measurement (registry)


class _FaultyProxy(http.server.ThreadingHTTPServer):
    """Relays to a real InfluxDB; answers 500 to rollup requests once `allowed` have passed,
    until `healed`."""

    def __init__(self, upstream: str, allowed: int) -> None:
        self.upstream = upstream
        self.allowed = allowed
        self.passed = 0
        self.refused = 0
        self.healed = False
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Relay)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def fails(self, path: str, body: bytes) -> bool:
        rollup = (path.startswith("/write") and b"rlvitals_rollup" in body) or (
            path.startswith("/query")
            and b"INTO" in urllib.parse.unquote_plus(body.decode()).encode()
        )
        if not rollup:
            return False
        with self.lock:
            if self.healed or self.passed < self.allowed:
                self.passed += 1
                return False
            self.refused += 1
            return True


class _Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FaultyProxy

    def _relay(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.fails(self.path, body):
            answer, status = b'{"error":"injected fault"}', 500
        else:
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() in ("content-type", "authorization")
            }
            request = urllib.request.Request(
                f"{self.server.upstream}{self.path}",
                data=body if method == "POST" else None,
                headers=headers,
                method=method,
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as r:
                    status, answer = r.status, r.read()
            except urllib.error.HTTPError as exc:
                status, answer = exc.code, exc.read()
            except OSError:
                status, answer = 503, b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_POST(self) -> None:
        self._relay("POST")

    def do_GET(self) -> None:
        self._relay("GET")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def proxy_factory(influx: Any) -> Iterator[Any]:
    started: list[_FaultyProxy] = []

    def start(allowed: int) -> _FaultyProxy:
        server = _FaultyProxy(influx.url, allowed)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def _blocks(influx: Any, run: str, level: int) -> dict[tuple[str, int], tuple[int, float]]:
    """(field, block) -> (count, sum), summed from the raw points InfluxDB holds."""
    out: dict[tuple[str, int], list[float]] = {}
    for field, measurement in FIELDS.items():
        for r in influx.query(f'SELECT "{field}" FROM "{measurement}" WHERE "run" = \'{run}\''):
            if r[field] is None:
                continue
            cell = out.setdefault((field, r["time"] // level * level), [0, 0.0])
            cell[0] += 1
            cell[1] += r[field]
    return {k: (int(c[0]), c[1]) for k, c in out.items()}


def _rolled(influx: Any, run: str, level: int) -> dict[tuple[str, int], tuple[int, float]]:
    """(field, block) -> (count, sum) as the rollup points of the level hold them."""
    out: dict[tuple[str, int], tuple[int, float]] = {}
    rows = influx.query(f'SELECT * FROM "{rollup_measurement(level)}" WHERE "run" = \'{run}\'')
    for r in rows:
        for field in FIELDS:
            if r.get(f"n:{field}") is not None:
                out[(field, int(r["time"]))] = (int(r[f"n:{field}"]), float(r[f"sum:{field}"]))
    return out


def _agree(influx: Any, run: str) -> bool:
    for level in ROLLUP_LEVELS:
        raw, rolled = _blocks(influx, run, level), _rolled(influx, run, level)
        if raw.keys() != rolled.keys():
            return False
        for key, (n, total) in raw.items():
            if rolled[key][0] != n or not math.isclose(rolled[key][1], total, rel_tol=1e-9):
                return False
    return True


def _train(settings: exporter.ExporterSettings, run: str, steps: range) -> None:
    with exporter.init(run, settings=settings) as r:
        for step in steps:
            r.log(step, {"policy_kl": 0.001 * (step % 89), "clip_fraction": (step % 50) / 100})
        assert r.flush(120)


@pytest.mark.parametrize("allowed", [0, 1, 4, 9])
def test_a_rollup_write_failing_at_any_moment_is_made_good_by_the_next_forwarder(
    tmp_path: Path, influx: Any, proxy_factory: Any, allowed: int
) -> None:
    proxy = proxy_factory(allowed)
    settings = influx.settings(tmp_path, influx_url=proxy.url, batch_size=600, policy="warn")
    _train(settings, "first", range(0, 6000))
    assert proxy.refused, "the fault was never hit"
    assert not _agree(influx, "first")  # what the exited trainer left: rollups behind raw
    proxy.healed = True
    # the next forwarder on this store: another training run starts
    _train(settings, "second", range(0, 100))
    assert _agree(influx, "first")
    assert _agree(influx, "second")


def test_doctor_finds_rollups_behind_the_raw_points_and_repair_recomputes_them(
    tmp_path: Path, influx: Any, proxy_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = influx.settings(tmp_path, batch_size=600, policy="warn")
    _train(settings, "lagging", range(0, 3000))
    # rollups behind: points written to InfluxDB by something that keeps no rollups
    lines = "\n".join(
        f"policy,run=lagging policy_kl=0.5,step={s}i,wall_time=1.0 {s}" for s in range(3000, 3500)
    )
    influx.write(lines)
    assert not _agree(influx, "lagging")
    env = {
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_INFLUX_URL": influx.url,
        "RLVITALS_INFLUX_DATABASE": influx.name,
    }
    old = dict(os.environ)
    os.environ.update(env)
    try:
        assert main(["doctor"]) == 1
        out = capsys.readouterr().out
        assert "lagging" in out and "policy_kl" in out and "--repair" in out
        assert main(["doctor", "--repair"]) == 0
        assert _agree(influx, "lagging")
        main(["doctor"])
        out = capsys.readouterr().out
        assert "rollups" in out and "lagging" not in out.split("rollups", 1)[1].splitlines()[0]
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_the_builtin_registry_stores_the_fields_this_test_reads(builtin: registry.Registry) -> None:
    for field, measurement in FIELDS.items():
        assert builtin.metric(field).group == measurement


def test_doctor_finds_store_rollups_behind_their_rows_and_repair_rebuilds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    settings = exporter.ExporterSettings(store=tmp_path, policy="warn")
    with exporter.init("kept", settings=settings) as r:
        for step in range(2000):
            r.log(step, {"policy_kl": 0.001 * (step % 89)})
    db = sqlite3.connect(tmp_path / "outbox.sqlite")
    with db:  # a block lost from the rollups (as a tool writing the file could leave it)
        db.execute("DELETE FROM sample_rollups WHERE run = 'kept' AND block = 3")
    db.close()
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "rollups in the embedded store" in out and "'kept'" in out and "policy_kl" in out
    assert main(["doctor", "--repair"]) == 0
    assert main(["doctor"]) == 0
    assert "every rollup equals its raw points" in capsys.readouterr().out
