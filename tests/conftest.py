"""Shared fixtures: the mini registry (`reg`) and a real InfluxDB 1.x server (`influxd`, `influx`).

`influxd` starts Debian's `influxd` once per session on free ports in a temporary folder; `influx`
gives each test its own database on it. `influx_server_factory` starts a dedicated server a test
may stop and restart (outage tests). Tests are skipped, with the reason, only when `influxd` is
not on PATH.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from influx_server import InfluxDatabase, InfluxServer

import registry

MINI_REGISTRY = Path(__file__).parent / "fixtures" / "mini_registry"


@pytest.fixture(scope="session")
def reg() -> registry.Registry:
    """The small test registry (tests/fixtures/mini_registry)."""
    return registry.load(MINI_REGISTRY)


@pytest.fixture(scope="session")
def builtin() -> registry.Registry:
    """The shipped registry."""
    return registry.load()


def _require_influxd() -> None:
    if shutil.which("influxd") is None:
        pytest.skip("influxd is not on PATH (install Debian's `influxdb` package)")


@pytest.fixture(scope="session")
def influxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxServer]:
    """A real InfluxDB 1.x for the whole session."""
    _require_influxd()
    server = InfluxServer(tmp_path_factory.mktemp("influxd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def influx(influxd: InfluxServer) -> InfluxDatabase:
    """A fresh database on the session's InfluxDB."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    influxd.post_query(f'CREATE DATABASE "{name}"')
    return InfluxDatabase(influxd, name)


@pytest.fixture
def influx_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[], InfluxServer]]:
    """Start dedicated servers a test may stop and restart; all are stopped afterwards."""
    _require_influxd()
    servers: list[InfluxServer] = []

    def make() -> InfluxServer:
        server = InfluxServer(tmp_path_factory.mktemp("influxd-own"))
        server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium under PyPI playwright (see `chromium.py`), one per test module."""
    from chromium import ARGS, CHROMIUM

    pw = pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with pw.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
