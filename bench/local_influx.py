"""A throwaway local InfluxDB 1.x for a benchmark (Debian's `influxd`), or None without one."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["start_influx"]

_TESTS = Path(__file__).resolve().parents[1] / "tests"


def start_influx(tmp: Path, database: str = "bench") -> Any:
    """Start influxd under `tmp` with `database` created; None when influxd is not installed.
    Call `.stop()` on what it returns; `.url` is its HTTP address."""
    if shutil.which("influxd") is None:
        return None
    # after the project's packages: tests/ has folders named like them
    sys.path.append(str(_TESTS))
    from influx_server import InfluxServer

    (tmp / "influx").mkdir(exist_ok=True)
    server = InfluxServer(tmp / "influx")
    server.start()
    server.post_query(f"CREATE DATABASE {database}")
    return server
