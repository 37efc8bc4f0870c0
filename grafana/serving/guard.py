"""Connection limits and request deadlines on waitress's channels.

Why waitress's own settings are not enough (waitress 3.0.2, pinned; files read in site-packages):

- `channel_timeout` closes only a connection on which nothing arrived for that long:
  `BaseWSGIServer.maintenance` (waitress/server.py:342-351) marks channels whose `last_activity`
  is older than the cutoff, and `HTTPChannel.handle_read` (waitress/channel.py:158-166) moves
  `last_activity` forward on every byte received. A header sent a byte every few seconds (the
  slowloris attack) is never that old, so the connection is held for ever.
- At `connection_limit` (100 by default) the server stops accepting anyone
  (`BaseWSGIServer.readable`, waitress/server.py:264-289): a hundred such connections leave
  every other client waiting in the listen backlog, unanswered.
- The loop uses `select()` unless `asyncore_use_poll` is set (waitress/wasyncore.py, `loop`),
  and `select()` cannot watch a descriptor above 1023, so the limit cannot simply be raised.

So the guard closes a connection whose request does not arrive in time however it trickles
(`ServerLimits.header_timeout`, `request_timeout`), and at the connection limit, in all or for
one client address, a new connection closes the oldest one that is not being answered instead
of waiting behind it; the loop uses `poll()`. Those closes are counted (`ConnectionStats`, shown
by `/api/health`) and logged as one summary line a minute at most, so an attack does not flood
the log. Another server was not taken instead: gunicorn's documentation says its default
synchronous workers must sit behind a buffering proxy or be "easily susceptible to
denial-of-service attacks" (docs/source/deploy.rst), and waitress already serves the app here.
"""

from __future__ import annotations

import heapq
import ipaddress
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import MultiSocketServer, TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from .limits import ServerLimits

__all__ = ["ConnectionGuard", "ConnectionStats", "client_key", "create_guarded_server"]

_log = logging.getLogger("rlvitals.serve")
_REPORT_EVERY_S = 60.0
_SWEEP_EVERY_S = 0.5


@dataclass(frozen=True)
class ConnectionStats:
    """What the guard did since the server started (and what is open now)."""

    open: int
    limit: int
    per_client_limit: int
    header_timeouts: int
    """Closed: the request's headers had not all arrived `header_timeout` s after its first byte."""
    request_timeouts: int
    """Closed: the headers came, the body had not all arrived `request_timeout` s after."""
    evicted: int
    """Closed to make room for a newer connection (the oldest not being answered)."""
    refused: int
    """New connections closed at once: every place was taken by requests being answered."""

    def as_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def client_key(addr: Any) -> str:
    """The address a connection is counted under: an IPv4 address, an IPv6 client's /64 (one
    host usually owns a whole /64, so counting single addresses would not limit it)."""
    host = str(addr[0] if isinstance(addr, tuple) else addr)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return str(ip)


class GuardedChannel(HTTPChannel):  # type: ignore[misc]
    """waitress's channel, noting when the request it is reading began and when it was last
    waiting for its client (`since`), and telling the guard when it opens and closes."""

    client = ""
    since = 0.0
    request_started: float | None = None
    server: GuardedServer

    def __init__(self, server: GuardedServer, sock: Any, addr: Any, adj: Any, map: Any = None):
        super().__init__(server, sock, addr, adj, map=map)
        server.guard.admit(self)

    def received(self, data: bytes) -> bool:
        before = self.request
        result: bool = super().received(data)
        if self.request is None:
            if before is not None or self.request_started is not None:
                self.request_started = None
                self.since = self.server.guard.now()
        elif self.request is not before:
            self.request_started = self.since = self.server.guard.now()
        return result

    def del_channel(self, map: Any = None) -> None:
        super().del_channel(map)
        self.server.guard.release(self)


class GuardedServer(TcpWSGIServer):  # type: ignore[misc]
    """waitress's TCP server making `GuardedChannel`s and sweeping them with the guard."""

    channel_class = GuardedChannel

    def __init__(self, *args: Any, guard: ConnectionGuard, **kw: Any) -> None:
        self.guard = guard
        super().__init__(*args, **kw)

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # idle connections: waitress's channel_timeout
        self.guard.sweep()


class ConnectionGuard:
    """The connections of one server (all its listening sockets), by client; the deadlines.

    Called from waitress's loop thread (admit, release, sweep); `stats` from any thread."""

    def __init__(self, limits: ServerLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.now = clock
        self._lock = threading.Lock()
        self._open: dict[int, GuardedChannel] = {}
        self._by_client: dict[str, dict[int, GuardedChannel]] = {}
        self._counts: Counter[str] = Counter()
        self._unreported: Counter[str] = Counter()
        self._last_report = -math.inf
        self._last_sweep = -math.inf

    def admit(self, channel: GuardedChannel) -> None:
        """Count a new connection; at a limit close the oldest idle one of the same scope, or
        this one when every other is being answered."""
        channel.client = client_key(channel.addr)
        channel.since = self.now()
        with self._lock:
            self._open[id(channel)] = channel
            mine = self._by_client.setdefault(channel.client, {})
            mine[id(channel)] = channel
            victims = _oldest_idle(
                (c for c in mine.values() if c is not channel), len(mine) - self.limits.per_client
            )
            refuse = len(victims) < len(mine) - self.limits.per_client
            over = len(self._open) - len(victims) - self.limits.connections
            if not refuse and over > 0:
                chosen = {id(c) for c in victims} | {id(channel)}
                more = _oldest_idle((c for i, c in self._open.items() if i not in chosen), over)
                victims += more
                refuse = len(more) < over
            self._add("evicted", len(victims))
            self._add("refused", int(refuse))
        for victim in victims:
            victim.handle_close()
        if refuse:
            channel.handle_close()

    def release(self, channel: GuardedChannel) -> None:
        with self._lock:
            self._open.pop(id(channel), None)
            mine = self._by_client.get(channel.client)
            if mine is not None:
                mine.pop(id(channel), None)
                if not mine:
                    del self._by_client[channel.client]

    def sweep(self) -> None:
        """Close every connection whose request is late (headers or whole request)."""
        now = self.now()
        if now - self._last_sweep < _SWEEP_EVERY_S:
            return
        self._last_sweep = now
        late: list[tuple[GuardedChannel, str]] = []
        with self._lock:
            for channel in self._open.values():
                request, started = channel.request, channel.request_started
                if request is None or started is None or channel.requests:
                    continue
                if not request.headers_finished and now - started > self.limits.header_timeout:
                    late.append((channel, "header_timeouts"))
                elif now - started > self.limits.request_timeout:
                    late.append((channel, "request_timeouts"))
            for _, kind in late:
                self._add(kind, 1)
        for channel, _ in late:
            channel.will_close = True  # closed by the loop's next write pass, as waitress does
        self._report(now)

    def stats(self) -> ConnectionStats:
        with self._lock:
            return ConnectionStats(
                open=len(self._open),
                limit=self.limits.connections,
                per_client_limit=self.limits.per_client,
                header_timeouts=self._counts["header_timeouts"],
                request_timeouts=self._counts["request_timeouts"],
                evicted=self._counts["evicted"],
                refused=self._counts["refused"],
            )

    def _add(self, kind: str, n: int) -> None:
        """Count `n` closes of `kind` (under the lock)."""
        if n:
            self._counts[kind] += n
            self._unreported[kind] += n

    def _report(self, now: float) -> None:
        with self._lock:
            if not self._unreported or now - self._last_report < _REPORT_EVERY_S:
                return
            counts, self._unreported = self._unreported, Counter()
            self._last_report = now
            open_now = len(self._open)
        late = counts["header_timeouts"] + counts["request_timeouts"]
        _log.warning(
            "rlvitals serve: closed %d connection(s) whose request did not arrive in time "
            "(headers %g s, request %g s) and %d to make room for newer ones; refused %d; "
            "%d open (a slow or stuck client, or someone holding connections open: "
            "counts in /api/health)",
            late,
            self.limits.header_timeout,
            self.limits.request_timeout,
            counts["evicted"],
            counts["refused"],
            open_now,
        )


def _oldest_idle(channels: Iterable[GuardedChannel], n: int) -> list[GuardedChannel]:
    """The `n` channels (at most) waiting longest for their client, none being answered."""
    if n <= 0:
        return []
    idle = (c for c in channels if not c.requests and c.connected)
    return heapq.nsmallest(n, idle, key=lambda c: c.since)


def create_guarded_server(
    app: Callable[..., Any],
    guard: ConnectionGuard,
    *,
    host: str,
    port: int,
    threads: int,
    max_request_body_size: int,
) -> Any:
    """waitress's `create_server` for TCP (waitress/server.py:31-135) with `GuardedServer`s
    sharing `guard`: one server, or a `MultiSocketServer` when `host` names several addresses."""
    limits = guard.limits
    adj = Adjustments(
        host=host,
        port=port,
        threads=threads,
        # the guard keeps the connections under limits.connections; waitress's own stop (which
        # turns everyone away) stays above it, for the listening sockets and their triggers
        connection_limit=limits.connections + 16,
        channel_timeout=max(1, math.ceil(limits.idle_timeout)),
        cleanup_interval=1,
        asyncore_use_poll=True,
        max_request_body_size=max_request_body_size,
    )
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(threads)
    sockets: dict[int, Any] = {}
    servers = [
        GuardedServer(app, sockets, dispatcher=dispatcher, adj=adj, sockinfo=info, guard=guard)
        for info in adj.listen
    ]
    if len(servers) == 1:
        return servers[0]
    listening = [(s.effective_host, s.effective_port) for s in servers]
    return MultiSocketServer(sockets, adj, listening, dispatcher, servers[-1].log_info)
