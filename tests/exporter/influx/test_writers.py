"""The InfluxDB 2.x path, checked against a local HTTP server that records requests.

No InfluxDB 2.x server runs here (Debian ships 1.6.7, which answers 404 on /api/v2/write), so
these tests check what `influxdb-client` sends: URL, query, headers (Authorization: Token) and body.
"""

from __future__ import annotations

import http.server
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Recorder(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.requests: list[_Request] = []
        self.status = 204
        self.refuse: bytes | None = None  # refuse (400) any request whose body holds this
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Recorder

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append(_Request("POST", self.path, dict(self.headers.items()), body))
        status = self.server.status
        if self.server.refuse is not None and self.server.refuse in body:
            status = 400  # as a server refusing a whole request for one line does
        payload = b'{"code":"invalid","message":"bad line"}' if status == 400 else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    server = _Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_v2_writer_posts_line_protocol_with_token_org_bucket_and_seconds(
    tmp_path: Path, reg: registry.Registry, recorder: _Recorder
) -> None:
    settings = exporter.ExporterSettings(
        store=tmp_path,
        influx_url=recorder.url,
        influx_api="v2",
        influx_org="lab",
        influx_bucket="rl metrics",
        influx_token="s3cr3t-token",
        policy="strict",
    )
    with exporter.init("v2 run", project="p", registry=reg, settings=settings) as run:
        run.log(7, {"losses/clipfrac": 0.25})
        run.event(7, "checkpoint", "c")
        assert run.flush()
    (request,) = recorder.requests
    url = urllib.parse.urlsplit(request.path)
    assert url.path == "/api/v2/write"
    assert urllib.parse.parse_qs(url.query) == {
        "org": ["lab"],
        "bucket": ["rl metrics"],
        "precision": ["s"],
    }
    assert request.headers["Authorization"] == "Token s3cr3t-token"
    lines = request.body.decode().split("\n")
    assert any(
        line.startswith("policy,project=p,run=v2\\ run clip_fraction=0.25,step=7i,wall_time=")
        and line.endswith(" 7")
        for line in lines
    )
    assert any(line.startswith("events,kind=checkpoint,project=p,run=v2\\ run ") for line in lines)
    assert "s3cr3t-token" not in repr(settings)


def test_server_refusing_the_data_is_counted_and_not_retried_forever(
    tmp_path: Path, reg: registry.Registry, recorder: _Recorder
) -> None:
    recorder.status = 400
    settings = exporter.ExporterSettings(
        store=tmp_path, influx_url=recorder.url, influx_database="db", policy="strict"
    )
    with exporter.init("bad", registry=reg, settings=settings) as run:
        for step in range(200):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush()
        stats = run.stats
        assert stats.write_errors == 1
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        refused = box.rejected("bad")
        assert box.backlog() == 0
    db = sqlite3.connect(tmp_path / "outbox.sqlite")
    (rows,) = db.execute("SELECT count(*) FROM samples WHERE sent = 2").fetchone()
    assert len(refused) >= 200 and stats.server_rejected == rows and stats.sent == 0
    # halving isolates at most 32 lines one by one; the rest of a batch is refused whole
    assert len(recorder.requests) <= 2 * 32 * 8 + 1


def test_v1_writer_sends_credentials_in_a_basic_auth_header_not_the_url(
    recorder: _Recorder,
) -> None:
    writer = exporter.InfluxV1Writer(
        recorder.url + "/influx", "db", retention_policy="week", username="u", password="pw"
    )
    writer.write(b"m f=1 1")
    writer.write(b"m f=2 2")  # same keep-alive connection
    writer.close()
    first, second = recorder.requests
    assert first.path == "/influx/write?db=db&precision=s&rp=week"
    assert first.headers["Authorization"] == "Basic dTpwdw=="
    assert "pw" not in first.path and second.body == b"m f=2 2"


def test_unreachable_server_raises_a_retryable_write_error() -> None:
    from influx_server import refused_port

    with refused_port() as port:
        writer = exporter.InfluxV1Writer(f"http://127.0.0.1:{port}", "db")
        with pytest.raises(exporter.WriteError, match="unreachable") as info:
            writer.write(b"m f=1 1")
    assert info.value.retryable


def test_a_server_refusing_whole_requests_for_one_line_still_gets_every_other_line(
    tmp_path: Path, reg: registry.Registry, recorder: _Recorder
) -> None:
    recorder.refuse = b"poison"
    settings = exporter.ExporterSettings(
        store=tmp_path,
        influx_url=recorder.url,
        influx_api="v2",
        influx_org="o",
        influx_bucket="b",
        influx_token="t",
        policy="warn",
    )
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(100):
            values = {"losses/clipfrac": 0.1}
            if step == 50:
                values["poison"] = 1.0  # stored under `unregistered`, refused by the server
            run.log(step, values)
        assert run.flush()
        stats = run.stats
    accepted = [
        line
        for r in recorder.requests
        if b"poison" not in r.body
        for line in r.body.split(b"\n")
        if line.startswith(b"policy,")
    ]
    steps = {int(line.rsplit(b" ", 1)[1]) for line in accepted}
    assert steps == set(range(100))  # the step-50 policy point too: only the poison line is out
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        ((_, line, message),) = box.rejected("r")
    assert line.startswith("unregistered,") and "poison=1" in line and "bad line" in message
    assert stats.server_rejected == 1


def test_a_flush_while_influxdb_refuses_keeps_to_the_retry_backoff(
    tmp_path: Path, reg: registry.Registry, recorder: _Recorder
) -> None:
    """A trainer's flush (and the drain at its exit) waits for the forwarder; it must not make it
    retry faster than its backoff (0.25 s, doubling): a flush that woke it every 0.1 s re-sent
    the whole backlog ten times a second while InfluxDB was down."""
    recorder.status = 503
    settings = exporter.ExporterSettings(
        store=tmp_path, influx_url=recorder.url, influx_database="db", drain_timeout=0.0
    )
    with exporter.init("down", registry=reg, settings=settings) as run:
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1})
        before = len(recorder.requests)
        assert not run.flush(3.0)
        tried = len(recorder.requests) - before
    # within 3 s a backoff of 0.25, 0.5, 1 and 2 s allows 4 or 5 attempts; 0.1 s wakes gave ~30
    assert 1 <= tried <= 8, tried
