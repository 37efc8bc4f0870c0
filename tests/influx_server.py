"""A real InfluxDB 1.x server for tests: started on free loopback ports in a temporary folder."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["InfluxDatabase", "InfluxServer", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A local port where nothing answers, for as long as the block lasts: bound and never
    listened on, so a connection is refused at once and no other test's server can take it
    (a port from `free_port` is free again when it returns: under parallel tests another
    server was started on one and answered a test that expected nothing there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def spawn_until_ready(
    cmd: list[str], log_path: Path, ready_url: str, ready_status: int, timeout: float
) -> subprocess.Popen[bytes]:
    """Start a server process logging to `log_path`; return once `ready_url` answers."""
    log = log_path.open("ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited early; see {log_path}")
        try:
            with urllib.request.urlopen(ready_url, timeout=1) as r:
                if r.status == ready_status:
                    return proc
        except OSError:
            time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"{cmd[0]} did not answer {ready_url} within {timeout}s; see {log_path}")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """Terminate a server process, killing it if it does not exit within 15 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


_CONFIG = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"
[meta]
  dir = "{root}/meta"
  logging-enabled = false
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:{port}"
  log-enabled = false
  auth-enabled = {auth}
[logging]
  level = "warn"
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
"""


@dataclass
class InfluxServer:
    """A real influxd (1.x) process on loopback; `stop()`/`start()` keep its port and data."""

    root: Path
    port: int = field(default_factory=free_port)
    rpc_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    auth: bool = False
    """With authentication on (as compose runs it): the first user created is the admin."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        config = self.root / "influxdb.conf"
        config.write_text(
            _CONFIG.format(
                root=self.root,
                port=self.port,
                rpc_port=self.rpc_port,
                auth="true" if self.auth else "false",
            )
        )
        self.proc = spawn_until_ready(
            ["influxd", "-config", str(config)],
            self.root / "influxd.log",
            f"{self.url}/ping",
            204,
            timeout,
        )

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def post_query(self, q: str, database: str | None = None) -> None:
        params = {"q": q} if database is None else {"q": q, "db": database}
        data = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(f"{self.url}/query", data=data, timeout=10) as r:
            r.read()

    def write(self, database: str, lines: str) -> None:
        """POST line protocol (timestamps in seconds) to /write."""
        query = urllib.parse.urlencode({"db": database, "precision": "s"})
        request = urllib.request.Request(f"{self.url}/write?{query}", data=lines.encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    def raw_query(self, database: str, q: str, epoch: str = "ms") -> dict[str, Any]:
        """The response body as InfluxDB sends it (Grafana's InfluxQL backend asks epoch=ms)."""
        params = urllib.parse.urlencode({"db": database, "q": q, "epoch": epoch})
        # a whole database read back (`SELECT * ... GROUP BY *`) outlasts 10 s on a loaded machine
        with urllib.request.urlopen(f"{self.url}/query?{params}", timeout=60) as r:
            body: dict[str, Any] = json.loads(r.read())
        return body

    def query(self, database: str, q: str) -> list[dict[str, Any]]:
        """Rows of an InfluxQL query (epoch=s), each a dict with the series tags merged in."""
        params = urllib.parse.urlencode({"db": database, "q": q, "epoch": "s"})
        # a whole database read back (`SELECT * ... GROUP BY *`) outlasts 10 s on a loaded machine
        with urllib.request.urlopen(f"{self.url}/query?{params}", timeout=60) as r:
            body = json.loads(r.read())
        rows: list[dict[str, Any]] = []
        for result in body.get("results", []):
            if "error" in result:
                raise AssertionError(f"InfluxQL error for {q!r}: {result['error']}")
            for series in result.get("series", []):
                for values in series["values"]:
                    row = dict(zip(series["columns"], values, strict=True))
                    row.update(series.get("tags", {}))
                    row["_measurement"] = series["name"]
                    rows.append(row)
        return rows


@dataclass
class InfluxDatabase:
    """One fresh database on a running server."""

    server: InfluxServer
    name: str

    @property
    def url(self) -> str:
        return self.server.url

    def query(self, q: str) -> list[dict[str, Any]]:
        return self.server.query(self.name, q)

    def raw_query(self, q: str) -> dict[str, Any]:
        return self.server.raw_query(self.name, q)

    def post_query(self, q: str) -> None:
        self.server.post_query(q, self.name)

    def write(self, lines: str) -> None:
        self.server.write(self.name, lines)

    def settings(self, store: Path, **changes: Any) -> Any:
        import exporter

        base = exporter.ExporterSettings(
            store=store, influx_url=self.url, influx_database=self.name, policy="strict"
        )
        return base.replace(**changes) if changes else base
