"""The forwarder tells, and keeps sending after the training is gone (issue 39, item 5): a
training process that exits with rows not yet sent leaves its forwarder child to send them,
detached and for a bounded time, and says so in one line; what the child did is in the store
for `rlvitals runs`; while InfluxDB refuses, the backlog (rows, oldest age, rate) is on
`/metrics` and the warning comes back while it lasts.

InfluxDB is a real one behind an HTTP proxy that refuses every request while `down`."""

from __future__ import annotations

import http.server
import logging
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import exporter
from exporter.influx import forwarder as forwarder_module
from exporter.prometheus.metrics_endpoint import MetricsEndpoint
from rlvitals.cli import main

STEPS = 3000
FIELDS = ("policy_kl", "clip_fraction", "value_loss")  # registry ids, all in range below


class _Switch(http.server.ThreadingHTTPServer):
    """Relays to a real InfluxDB, or answers 503 to everything while `down`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.down = True
        super().__init__(("127.0.0.1", 0), _Relay)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Switch

    def _relay(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.down:
            status, answer = 503, b'{"error":"down for the test"}'
        else:
            headers = {k: v for k, v in self.headers.items() if k.lower() == "content-type"}
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
def switch(influx: Any) -> Iterator[_Switch]:
    server = _Switch(influx.url)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


_TRAINER = textwrap.dedent(
    """
    import sys
    import exporter
    run = exporter.init("trained")
    for step in range(int(sys.argv[1])):
        run.log(step, {"policy_kl": 0.01, "clip_fraction": 0.1, "value_loss": float(step)})
    # no finish(): the exit hook ends the run, as a script that just returns
    """
)


def _train(
    tmp_path: Path, url: str, database: str, drain: float
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_INFLUX_URL": url,
        "RLVITALS_INFLUX_DATABASE": database,
        "RLVITALS_FLUSH_TIMEOUT": "1",
        "RLVITALS_DRAIN_TIMEOUT": str(drain),
    }
    return subprocess.run(
        [sys.executable, "-c", _TRAINER, str(STEPS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _forwarders(store: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(store / "outbox.sqlite")
    try:
        return db.execute("SELECT pid, state, detail, sent, backlog FROM forwarders").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())


def _steps_in_influx(influx: Any) -> int:
    rows = influx.query('SELECT count("value_loss") FROM "value" WHERE "run" = \'trained\'')
    return int(rows[0]["count"]) if rows else 0


def test_rows_left_at_exit_are_sent_by_the_detached_forwarder(
    tmp_path: Path, influx: Any, switch: _Switch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = _train(tmp_path, switch.url, influx.name, drain=120)
    assert done.returncode == 0, done.stderr
    said = re.search(
        r"the forwarder \(pid (\d+)\) goes on sending them after this process", done.stderr
    )
    assert said, done.stderr
    pid = int(said.group(1))
    assert _alive(pid) and _steps_in_influx(influx) == 0
    # while it waits: `rlvitals runs` says what it does and what waits
    assert _wait(lambda: any(f[1] in ("draining", "failing") for f in _forwarders(tmp_path)), 30)
    os.environ_backup = dict(os.environ)  # type: ignore[attr-defined]
    try:
        os.environ["RLVITALS_STORE"] = str(tmp_path)
        assert main(["runs"]) == 0
    finally:
        os.environ.clear()
        os.environ.update(os.environ_backup)  # type: ignore[attr-defined]
    listed = capsys.readouterr().out
    assert f"InfluxDB forwarder pid {pid}" in listed and "row(s) wait" in listed
    assert "UNSENT" in listed
    switch.down = False
    assert _wait(lambda: any(f[1] == "drained" for f in _forwarders(tmp_path)), 90)
    assert _steps_in_influx(influx) == STEPS
    assert _wait(lambda: not _alive(pid), 30), "the drained forwarder did not exit"
    (state,) = [f for f in _forwarders(tmp_path) if f[0] == pid]
    assert state[4] == 0 and state[3] >= STEPS * len(FIELDS)


def test_a_drain_that_cannot_finish_stops_in_time_and_says_what_is_left(
    tmp_path: Path, influx: Any, switch: _Switch
) -> None:
    done = _train(tmp_path, switch.url, influx.name, drain=3)
    assert done.returncode == 0, done.stderr
    pid = int(re.findall(r"\(pid (\d+)\)", done.stderr)[0])
    assert _wait(lambda: not _alive(pid), 40), "the forwarder outlived its drain time"
    (state,) = [f for f in _forwarders(tmp_path) if f[0] == pid]
    assert state[1] == "stopped" and "drain time (3 s" in state[2]
    assert state[4] >= STEPS * len(FIELDS)  # every row still waits in the store, none lost
    assert _steps_in_influx(influx) == 0


def test_backlog_and_a_repeated_warning_while_influxdb_refuses(
    tmp_path: Path,
    influx: Any,
    switch: _Switch,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(forwarder_module, "_WARN_EVERY", 0.5)
    settings = exporter.ExporterSettings(
        store=tmp_path, influx_url=switch.url, influx_database=influx.name, forwarder="thread"
    )
    endpoint = MetricsEndpoint()
    with (
        caplog.at_level(logging.WARNING),
        exporter.init("refused", settings=settings, endpoint=endpoint) as run,
    ):
        for step in range(500):
            run.log(step, {"policy_kl": 0.01})
        assert run.flush(sent=False)
        time.sleep(3.0)  # refused all along
        text = endpoint.render().decode()
        backlog = _gauge(text, "rlvitals_outbox_backlog")
        oldest = _gauge(text, "rlvitals_outbox_backlog_oldest_age_seconds")
        assert backlog >= 500 and oldest >= 2.0
        refusals = [r for r in caplog.records if "refused writes for" in r.getMessage()]
        assert len(refusals) >= 2, [r.getMessage() for r in caplog.records]
        assert "row(s) wait in the outbox" in refusals[-1].getMessage()
        switch.down = False
        assert run.flush(60)
        time.sleep(1.1)
        text = endpoint.render().decode()
        assert _gauge(text, "rlvitals_outbox_backlog") == 0
        assert _gauge(text, "rlvitals_forward_rate_rows_per_second") > 0


def _gauge(text: str, name: str) -> float:
    found = re.search(rf'^{name}{{run="refused"}} (\S+)$', text, re.MULTILINE)
    assert found, f"{name} not on /metrics:\n{text}"
    return float(found.group(1))
