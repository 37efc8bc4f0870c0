"""Nothing is lost when InfluxDB goes away or the exporter is killed; nothing arrives twice."""

from __future__ import annotations

import collections
import http.server
import os
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from influx_server import InfluxServer, refused_port

import exporter
import registry

MINI = Path(__file__).parents[1] / "fixtures" / "mini_registry"


class _RecordingProxy(http.server.ThreadingHTTPServer):
    """Relays writes to a real InfluxDB and records every body InfluxDB accepted."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.accepted: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _Relay)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RecordingProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = urllib.request.Request(
            f"{self.server.upstream}{self.path}", data=body, method="POST"
        )
        answer = b""
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                status, answer = r.status, r.read()
            if self.path.startswith("/write"):  # not the exporter's rollup queries
                self.server.accepted.append(body)
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 503
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def own_influx(influx_server_factory: Callable[[], InfluxServer]) -> InfluxServer:
    server = influx_server_factory()
    server.post_query('CREATE DATABASE "rl"')
    return server


@pytest.fixture
def proxy(own_influx: InfluxServer) -> Iterator[_RecordingProxy]:
    server = _RecordingProxy(own_influx.url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_influxdb_stopped_mid_run_gets_every_sample_exactly_once(
    tmp_path: Path, reg: registry.Registry, own_influx: InfluxServer, proxy: _RecordingProxy
) -> None:
    settings = exporter.ExporterSettings(
        store=tmp_path, influx_url=proxy.url, influx_database="rl", policy="strict", batch_size=50
    )
    with exporter.init("outage", registry=reg, settings=settings) as run:
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1, "losses/value_loss": float(step)})
        assert run.flush()
        own_influx.stop()
        for step in range(100, 300):
            run.log(step, {"losses/clipfrac": 0.2, "losses/value_loss": float(step)})
        run.event(150, "checkpoint", "saved during the outage")
        assert not run.flush(timeout=1.0)  # nothing can be sent while InfluxDB is down
        assert run.stats.write_errors > 0
        own_influx.start()
        assert run.flush(timeout=60.0)
    rows = own_influx.query("rl", 'SELECT "clip_fraction", "value_loss" FROM "policy", "value"')
    per_step = collections.Counter((r["_measurement"], r["time"]) for r in rows)
    assert sorted(per_step) == sorted((m, s) for m in ("policy", "value") for s in range(300))
    assert set(per_step.values()) == {1}
    delivered = collections.Counter(
        (line.split(b",", 1)[0], line.rsplit(b" ", 1)[1])
        for body in proxy.accepted
        for line in body.split(b"\n")
        # step rollups are rewritten as their blocks fill (idempotent by design)
        if not line.startswith(b"rlvitals_")
    )
    # 300 steps x 3 measurements (policy, value, and health for the per-step NaN/Inf count) + 1 event
    assert len(delivered) == 901
    assert set(delivered.values()) == {1}, "some lines were delivered twice"
    assert own_influx.query("rl", 'SELECT "text" FROM "events"')[0]["time"] == 150


_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import exporter, registry
    store, mini, dead_url = sys.argv[1:4]
    settings = exporter.ExporterSettings(store=Path(store), influx_url=dead_url, policy="strict")
    run = exporter.init("killed", project="p", registry=registry.load(mini), settings=settings)
    for step in range(500):
        run.log(step, {"losses/clipfrac": step / 1000})
    run.event(250, "checkpoint", "half way")
    run.flush(timeout=0.5)
    box = exporter.Outbox(settings.outbox_path)
    while box.last_step("killed") != 499 or not box.events("killed"):
        time.sleep(0.05)
    print("STORED", flush=True)
    time.sleep(600)
    """
)


def test_sigkilled_exporter_forwards_what_it_stored_after_restart(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with refused_port() as port:  # nothing answers there while the child lives
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), str(MINI), f"http://127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "STORED"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
    assert child.returncode == -signal.SIGKILL
    assert influx.query('SELECT * FROM "policy"') == []
    with exporter.init("restarted", registry=reg, settings=influx.settings(tmp_path)) as run:
        assert run.flush(timeout=30)
    rows = influx.query('SELECT "clip_fraction" FROM "policy" WHERE "run" = \'killed\'')
    assert [r["time"] for r in rows] == list(range(500))
    assert rows[123]["clip_fraction"] == pytest.approx(0.123)
    (event,) = influx.query('SELECT "text" FROM "events"')
    assert (event["time"], event["text"]) == (250, "half way")


_EXITING_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import exporter, registry
    store, mini, url, db = sys.argv[1:5]
    settings = exporter.ExporterSettings(
        store=Path(store), influx_url=url, influx_database=db, policy="strict"
    )
    run = exporter.init("no-finish", registry=registry.load(mini), settings=settings)
    for step in range(300):
        run.log(step, {"losses/clipfrac": 0.5})
    # no run.finish(): the atexit hook flushes
    """
)


def test_process_exiting_without_finish_is_flushed_at_exit(tmp_path: Path, influx: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXITING_CHILD, str(tmp_path), str(MINI), influx.url, influx.name],
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows = influx.query('SELECT count("clip_fraction") FROM "policy"')
    assert rows[0]["count"] == 300


def test_exhausted_disk_budget_counts_refused_samples_and_training_goes_on(
    tmp_path: Path, reg: registry.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, disk_budget_mb=0.1, policy="strict")
    with caplog.at_level("ERROR"), exporter.init("full", registry=reg, settings=settings) as run:
        for step in range(3000):
            run.log(step, {"losses/clipfrac": 0.5, "losses/value_loss": 1.0})
            if step % 500 == 0:
                run.flush()
        assert run.flush() is False  # what was refused is not stored, and flush says so
        stats = run.stats
    assert stats.refused_disk > 0
    # stats count only what the outbox took: the refused part is in refused_disk
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        stored = sum(len(box.series("full", f)[0]) for f in ("clip_fraction", "value_loss"))
    assert stats.accepted == stored < 6000
    assert sum("REFUSED" in r.getMessage() for r in caplog.records) == 1
    assert (tmp_path / "outbox.sqlite").stat().st_size < 1024 * 1024
