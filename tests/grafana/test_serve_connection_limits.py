"""`rlvitals serve` keeps answering while 1,000 connections hold it open without ever finishing
a request (the slowloris attack, issue 39): headers trickled a byte a second, every connection
the server closes opened again at once. Waitress alone stopped answering anyone after 100 such
connections (its connection limit, and a deadline that each trickled byte pushes back).

The attack comes from one address (the client timed shares it, as two users of one host or of
one NAT do), from a hundred, and from a hundred against a connection limit of 500. A normal
client is answered throughout, a trickled request is closed after the header deadline, and the
server logs the closes as one summary line, not one per connection. The client's latencies are
written to `test-artifacts/serve-slowloris-<case>.json` (a record; no timing is asserted)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from serve_process import Served
from slowloris import raise_open_files_limit

from grafana.serving import ServerLimits

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
ATTACKER = Path(__file__).with_name("slowloris.py")
SOCKETS = 1000
DEFAULTS = ServerLimits()
# when the client asks, in seconds after the attack's connections are open: before the first
# header deadline passes and after it (the attack opening its connections again)
ASK_AT = (0.5, 3.0, 6.0, DEFAULTS.header_timeout + 1.5, DEFAULTS.header_timeout + 4.0)
HUNDRED = tuple(f"127.0.0.{i}" for i in range(2, 102))


def _get(port: int, path: str, timeout: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _start_serve(store: Path, args: list[str]) -> Served:
    # no token: /api/health gives its detail to anyone
    server = Served(store, *args, env={"RLVITALS_STORE": str(store)})
    deadline = time.monotonic() + 30
    while True:
        try:
            if _get(server.port, "/api/health", 2)[0] == 200:
                return server
        except OSError:
            pass
        if server.proc.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"rlvitals serve did not answer in 30 s: {server.stderr}")
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("case", "sources", "args"),
    [
        ("one-address", ("127.0.0.1",), []),
        ("hundred-addresses", HUNDRED, []),
        ("hundred-addresses-limit-500", HUNDRED, ["--connection-limit", "500"]),
    ],
)
def test_a_normal_client_is_answered_through_1000_slowloris_connections(
    tmp_path: Path, case: str, sources: tuple[str, ...], args: list[str]
) -> None:
    server = _start_serve(tmp_path, args)
    try:
        asked, health, seen = _attack_and_ask(server.port, sources)
    finally:
        server.kill()
    err = server.stderr
    ARTIFACTS.mkdir(exist_ok=True)
    record = {"sockets": SOCKETS, "sources": len(sources), "args": args, "asked": asked}
    record.update(server=health["connections"], attacker=seen)
    (ARTIFACTS / f"serve-slowloris-{case}.json").write_text(json.dumps(record, indent=1))

    assert [a["status"] for a in asked] == [200] * len(ASK_AT), asked
    closed = health["connections"]
    # what made room: the client's own oldest unfinished connections (one address), the header
    # deadline (a hundred addresses, each under the per-client limit), the connection limit
    if case == "one-address":
        assert closed["evicted"] >= SOCKETS - DEFAULTS.per_client
    elif case == "hundred-addresses":
        assert closed["header_timeouts"] >= SOCKETS
    else:
        assert closed["evicted"] >= SOCKETS - 500
    assert closed["open"] <= closed["limit"]
    assert seen["closed_by_server"] > 0
    summaries = [line for line in err.splitlines() if "connection(s) whose request" in line]
    assert len(summaries) == 1, err[-3000:]  # one line a minute at most, not one per close


def _attack_and_ask(
    port: int, sources: tuple[str, ...]
) -> tuple[list[dict[str, object]], dict[str, Any], dict[str, int]]:
    """Start the attack, ask as a normal client at `ASK_AT`, then read the server's health and
    what the attacker saw."""
    raise_open_files_limit(SOCKETS + 256)
    attacker = subprocess.Popen(
        [sys.executable, str(ATTACKER), str(port), str(SOCKETS), *sources],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    asked: list[dict[str, object]] = []
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        ready = attacker.stdout.readline().split()
        assert ready[:1] == ["ready"] and int(ready[1]) == SOCKETS, ready
        began = time.monotonic()
        for at in ASK_AT:
            time.sleep(max(0.0, began + at - time.monotonic()))
            t0 = time.monotonic()
            status, body = _get(port, "/api/runs", timeout=30)  # generous: the outcome counts
            latency = time.monotonic() - t0
            asked.append({"at_s": round(t0 - began, 2), "status": status, "latency_s": latency})
            assert body == b'{"runs":[]}\n' or status != 200, body[:200]
        health = json.loads(_get(port, "/api/health", timeout=30)[1])
        attacker.stdin.close()
        seen = json.loads(attacker.stdout.readline())
    finally:
        attacker.kill()
        attacker.wait(30)
    return asked, health, seen
