"""Shared fixtures: the mini registry (`reg`) and a real InfluxDB 1.x server (`influxd`, `influx`).

`influxd` starts Debian's `influxd` once per session on free ports in a temporary folder; `influx`
gives each test its own database on it. `influx_server_factory` starts a dedicated server a test
may stop and restart (outage tests). Tests are skipped, with the reason, only when `influxd` is
not on PATH.

Marks: a test is `slow` (left out of the quick loop, `python -m pytest -q -m "not slow"`) when
it starts something heavy: Chromium or an InfluxDB server (by the fixtures it uses), or
Prometheus, a real training, processes it kills, or the calibration corpus's replay (by its
module, named in `SLOW_MODULES`). Every test runs with SB3's logger folder under its own
`tmp_path`.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from influx_server import InfluxDatabase, InfluxServer
from installed import installed

import registry

MINI_REGISTRY = Path(__file__).parent / "fixtures" / "mini_registry"

# Fixtures that start Chromium or an InfluxDB server: every test using one (directly or through
# another fixture) is slow.
SLOW_FIXTURES = frozenset({"browser", "influxd", "influx_server_factory"})
# Modules whose tests start such things themselves (or replay a whole corpus), with what they
# start; `*_browser.py` and `*_processes.py` modules are slow by their name.
SLOW_MODULES: dict[str, str] = {
    "test_alerting_prometheus.py": "a Prometheus server",
    "test_report_png.py": "Chromium",
    "test_integrations.py": "an SB3 PPO training",
    "test_trl_console.py": "a TRL GRPO training",
    "test_docs_console_logs.py": "docs/console-logs.md's commands, serve included",
    "test_serve_console_logs.py": "an rlvitals serve process following a console log",
    "test_tail_catch_up.py": "a sidecar killed during its catch-up",
    "test_durability.py": "writers killed mid-write",
    "test_forward_process.py": "a forwarding child killed",
    "test_import_rerun.py": "imports killed and stopped",
    "test_ingest_faults.py": "imports killed",
    "test_sources_resume.py": "readers killed",
    "test_repair.py": "writers killed",
    "test_corpus_verdicts.py": "the calibration corpus replayed card by card at every step",
    "test_replay_matches_live.py": "the corpus replayed, and each run logged and served again",
    "test_followed_matches_imported.py": "the corpus followed as it grew and imported whole",
    "test_readme_commands.py": "the README's commands: the demo, serve, an SB3 training",
    "test_docs_guides.py": "the docs guides' commands: demos, serve, Chromium, a corpus training",
    "test_serve_logdir.py": "rlvitals serve processes following log folders",
    "test_serve_terminal.py": "rlvitals serve processes: --logdir, hints, queue notices",
    "test_serve_connection_limits.py": "1,000 slowloris connections against rlvitals serve",
    "test_docs_trackers.py": "docs/trackers.md's commands: W&B and MLflow runs written, serve",
    "test_docs_ranks.py": "docs/ranks.md's torchrun jobs, one host and two",
}


def _is_slow(item: pytest.Item) -> bool:
    name = item.path.name
    return (
        bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))
        or name in SLOW_MODULES
        or name.endswith(("_browser.py", "_processes.py"))
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if _is_slow(item):
            item.add_marker(slow)


@pytest.fixture(autouse=True)
def _sb3_logger_under_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's logger writes to `$SB3_LOGDIR`, else to a new `/tmp/SB3-<date>` folder at each
    `configure()` without a folder (stable_baselines3/common/logger.py, `configure`), which a
    model's `learn()` calls: here, the test's own folder (the children it starts inherit it)."""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3-logger"))


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

    pw = installed("playwright.sync_api", "playwright")
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with pw.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _sendable(text: str) -> str:
    """`text` with lone surrogates written as escapes: what UTF-8 can carry."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # The fuzz tests log names holding lone surrogates ("\udc80") on purpose; a report whose
    # captured output or failure text holds one cannot be sent from an xdist worker (execnet
    # encodes UTF-8), and the whole run ended in INTERNALERROR (seen in CI). Escaped here.
    outcome: Any = yield
    report = outcome.get_result()
    report.sections = [(title, _sendable(text)) for title, text in report.sections]
    if report.longrepr is not None:
        text = str(report.longrepr)
        if _sendable(text) != text:
            report.longrepr = _sendable(text)
