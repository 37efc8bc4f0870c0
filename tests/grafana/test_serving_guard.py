"""The connection guard under `rlvitals serve` (grafana/serving), on a real waitress server in
this process with short deadlines: a request that does not arrive in time is closed however it
trickles, a client over its connection limit loses its own oldest idle connection, a connection
being answered is never the one closed, and the limits refuse values that cannot work."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from waitress import wasyncore

from grafana.serving import (
    ConnectionGuard,
    LimitsError,
    ServerLimits,
    create_guarded_server,
)
from grafana.serving.guard import client_key
from grafana.serving.limits import RESERVED_FDS

HEADERS = b"GET / HTTP/1.1\r\nHost: localhost\r\n"
RELEASE = threading.Event()


def _app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    if environ["PATH_INFO"] == "/hold":  # a request still being answered
        RELEASE.wait(10)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


class _Served:
    def __init__(self, limits: ServerLimits) -> None:
        self.guard = ConnectionGuard(limits)
        self.server = create_guarded_server(
            _app, self.guard, host="127.0.0.1", port=0, threads=2, max_request_body_size=4096
        )
        self.port = int(self.server.effective_port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            wasyncore.loop(timeout=0.05, map=self.server._map, use_poll=True, count=1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.task_dispatcher.shutdown()
        wasyncore.close_all(self.server._map)

    def connect(self, first: bytes = b"") -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if first:
            sock.sendall(first)
        return sock


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[_Served]:
    RELEASE.clear()
    s = _Served(request.param)
    yield s
    RELEASE.set()
    s.close()


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (EOF or reset on read)."""
    sock.settimeout(within)
    try:
        while chunk := sock.recv(4096):
            if chunk.startswith(b"HTTP/"):
                return False  # answered instead
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _answered(sock: socket.socket, request: bytes = b"\r\n") -> bool:
    sock.sendall(request)
    sock.settimeout(5)
    return sock.recv(4096).startswith(b"HTTP/1.1 200")


def _wait_for(what: Callable[[], bool], seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


QUICK = ServerLimits(header_timeout=1.0, request_timeout=2.0, idle_timeout=30, per_client=8)


@pytest.mark.parametrize("served", [QUICK], indirect=True)
def test_a_header_trickled_a_byte_at_a_time_is_closed_at_the_header_deadline(
    served: _Served,
) -> None:
    sock = served.connect(HEADERS)
    began = time.monotonic()
    closed = False
    while time.monotonic() - began < 4 * QUICK.header_timeout and not closed:
        try:
            sock.send(b"X")  # activity every 0.1 s: waitress's idle timeout never fires on this
        except OSError:
            closed = True
            break
        closed = _closed_by_server(sock, 0.1)
    assert closed
    assert served.guard.stats().header_timeouts == 1
    # and a request that comes whole is answered
    assert _answered(served.connect(), HEADERS + b"\r\n")


@pytest.mark.parametrize("served", [QUICK], indirect=True)
def test_a_body_trickled_after_prompt_headers_is_closed_at_the_request_deadline(
    served: _Served,
) -> None:
    sock = served.connect(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nx")
    began = time.monotonic()
    closed = False
    while time.monotonic() - began < 3 * QUICK.request_timeout and not closed:
        try:
            sock.send(b"y")
        except OSError:
            break
        closed = _closed_by_server(sock, 0.1)
    stats = served.guard.stats()
    assert (stats.header_timeouts, stats.request_timeouts) == (0, 1)


@pytest.mark.parametrize("served", [ServerLimits(per_client=2)], indirect=True)
def test_a_client_over_its_limit_loses_its_own_oldest_idle_connection(served: _Served) -> None:
    oldest = served.connect(b"GET / HTTP/1.1\r\n")
    time.sleep(0.05)
    middle = served.connect(b"GET / HTTP/1.1\r\n")
    time.sleep(0.05)
    newest = served.connect()
    assert _closed_by_server(oldest, 2)
    assert _answered(newest, HEADERS + b"\r\n")
    assert _answered(middle, b"Host: localhost\r\n\r\n")
    assert served.guard.stats().evicted == 1


@pytest.mark.parametrize("served", [ServerLimits(connections=2, per_client=2)], indirect=True)
def test_connections_being_answered_are_never_closed_to_make_room(served: _Served) -> None:
    held = [served.connect(b"GET /hold HTTP/1.1\r\nHost: localhost\r\n\r\n") for _ in range(2)]
    open_now = served.guard._open.values
    assert _wait_for(lambda: len(open_now()) == 2 and all(c.requests for c in open_now()))
    late = served.connect()
    assert _closed_by_server(late, 2)  # no room: refused, counted
    assert served.guard.stats().refused == 1
    RELEASE.set()
    for sock in held:
        sock.settimeout(5)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("served", [ServerLimits(connections=3, per_client=3)], indirect=True)
def test_at_the_connection_limit_the_oldest_idle_connection_of_anyone_makes_room(
    served: _Served,
) -> None:
    first = served.connect(b"GET / HTTP/1.1\r\n")
    time.sleep(0.05)
    others = [served.connect(b"GET / HTTP/1.1\r\n") for _ in range(2)]
    time.sleep(0.05)
    newcomer = served.connect()
    assert _closed_by_server(first, 2)
    assert _answered(newcomer, HEADERS + b"\r\n")
    assert all(_answered(s, b"Host: localhost\r\n\r\n") for s in others)
    assert served.guard.stats().open <= 3


@pytest.mark.parametrize(
    ("addr", "key"),
    [
        (("192.0.2.7", 5000), "192.0.2.7"),
        (("2001:db8::1", 5000, 0, 0), "2001:db8::/64"),
        (("2001:db8::ffff:1", 5000, 0, 0), "2001:db8::/64"),  # the same /64: the same client
        (("2001:db8:0:1::1", 5000, 0, 0), "2001:db8:0:1::/64"),
        (("::ffff:192.0.2.7", 5000, 0, 0), "192.0.2.7"),
    ],
)
def test_clients_are_counted_by_address_and_ipv6_by_their_64(addr: Any, key: str) -> None:
    assert client_key(addr) == key


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"connections": 0}, "--connection-limit"),
        ({"per_client": 0}, "--client-limit"),
        ({"header_timeout": 0}, "--header-timeout"),
        ({"request_timeout": -1}, "--request-timeout"),
        ({"idle_timeout": float("nan")}, "--idle-timeout"),
        ({"header_timeout": 30, "request_timeout": 10}, "--request-timeout"),
    ],
)
def test_limits_that_cannot_work_are_refused_naming_the_flag(
    changes: dict[str, Any], named: str
) -> None:
    with pytest.raises(LimitsError, match=named):
        ServerLimits(**changes)


def test_the_connection_limit_fits_the_open_files_limit() -> None:
    # each connection may hold up to three descriptors (waitress/adjustments.py)
    fitted = ServerLimits(connections=5000, per_client=500).fitted(1024)
    assert fitted.connections == (1024 - RESERVED_FDS) // 3
    assert fitted.per_client == min(500, fitted.connections)
    assert ServerLimits(connections=100).fitted(1 << 20).connections == 100
