"""A real Prometheus (Debian's `prometheus`) for tests, scraping given targets every second."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from influx_server import free_port, spawn_until_ready, stop_process

__all__ = ["PromServer", "scrape_config"]


def scrape_config(
    job: str,
    targets: Sequence[str],
    interval: str = "1s",
    more_jobs: Mapping[str, Sequence[str]] | None = None,
) -> str:
    text = (
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
    )
    for name, addrs in {job: targets, **(more_jobs or {})}.items():
        quoted = ", ".join(f'"{t}"' for t in addrs)
        text += f"  - job_name: {name}\n    static_configs:\n      - targets: [{quoted}]\n"
    return text


@dataclass
class PromServer:
    root: Path
    config: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        cfg = self.root / "prometheus.yml"
        cfg.write_text(self.config)
        self.proc = spawn_until_ready(
            [
                "prometheus",
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            self.root / "prometheus.log",
            f"{self.url}/-/ready",
            200,
            timeout,
        )

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; raises on a PromQL error (so every expression is checked for validity)."""
        params = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        assert body["data"]["resultType"] == "vector", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result
