"""The forwarder runs in a child process (RLVITALS_FORWARDER=process, the default): the training
process only writes the outbox. Its counts and log records reach the run; a child that dies is
replaced without losing rows; a training process killed outright still has everything it stored
sent by its child, which then exits."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry
from exporter.influx.forward_process import ForwarderProcess

_ROOT = Path(__file__).resolve().parents[3]


def _steps(influx: Any, run: str) -> list[int]:
    points = influx.query(f'SELECT "clip_fraction" FROM "policy" WHERE "run" = \'{run}\'')
    return [p["time"] for p in points]


def test_the_forwarder_is_a_child_process_and_its_counts_reach_the_run(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init("r", registry=reg, settings=influx.settings(tmp_path)) as run:
        child = run._forwarder
        assert isinstance(child, ForwarderProcess)
        assert child._proc is not None and child._proc.pid != os.getpid()
        for step in range(500):
            run.log(step, {"losses/clipfrac": 0.25})
        assert run.flush()
        assert child.ready  # it read its settings and sent (what bench_forwarder times from)
        stats = run.stats
    assert _steps(influx, "r") == list(range(500))
    assert stats.sent >= 500  # every sample row (and the run's derived rows) was counted
    assert child._proc.poll() == 0  # finish() stopped it


def test_a_thread_forwarder_is_used_when_the_settings_ask_for_it(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path).replace(forwarder="thread")
    with exporter.init("r", registry=reg, settings=settings) as run:
        assert isinstance(run._forwarder, exporter.Forwarder)
        for step in range(50):
            run.log(step, {"losses/clipfrac": 0.25})
        assert run.flush()
    assert _steps(influx, "r") == list(range(50))


def test_an_unknown_forwarder_setting_is_refused_with_the_choices() -> None:
    with pytest.raises(exporter.ConfigError, match=r"RLVITALS_FORWARDER='fork'.*process, thread"):
        exporter.ExporterSettings.from_env({"RLVITALS_FORWARDER": "fork"})


def test_a_child_that_dies_is_replaced_and_nothing_is_lost(
    tmp_path: Path, reg: registry.Registry, influx: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.ERROR),
        exporter.init("r", registry=reg, settings=influx.settings(tmp_path)) as run,
    ):
        child = run._forwarder
        assert isinstance(child, ForwarderProcess) and child._proc is not None
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.25})
        assert run.flush()
        first = child._proc
        first.kill()
        first.wait()
        for step in range(100, 200):
            run.log(step, {"losses/clipfrac": 0.25})
        deadline = time.monotonic() + 20
        while not run.flush(5) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert child._proc is not first
    assert _steps(influx, "r") == list(range(200))
    assert any("forwarder process exited" in r.getMessage() for r in caplog.records)


def test_a_refusal_logged_by_the_child_is_logged_by_the_run(
    tmp_path: Path, reg: registry.Registry, influx: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # an event field InfluxDB holds as a string, sent as a number: HTTP 400 for that line
    with caplog.at_level(logging.ERROR):
        settings = influx.settings(tmp_path)
        with exporter.init("r", registry=reg, settings=settings) as run:
            run.event(1, "checkpoint", text="saved", note="text")
            assert run.flush()
            run.event(2, "checkpoint", text="saved", note=2.0)
            run.flush()
            stats = run.stats
    assert stats.server_rejected == 1
    assert any("refused and kept" in r.getMessage() for r in caplog.records)


_TRAINING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import exporter, registry
    settings = exporter.ExporterSettings(
        store=Path(sys.argv[1]), influx_url=sys.argv[2], influx_database=sys.argv[3]
    )
    run = exporter.init("killed", registry=registry.load(sys.argv[4]), settings=settings)
    for step in range(3000):
        run.log(step, {"losses/clipfrac": 0.25})
    assert run.flush(30, sent=False)  # stored in the outbox, not necessarily sent yet
    print(run._forwarder._proc.pid, flush=True)
    time.sleep(60)
    """
)


def test_a_killed_training_process_has_what_it_stored_sent_by_its_child(
    tmp_path: Path, influx: Any
) -> None:
    mini = _ROOT / "tests" / "fixtures" / "mini_registry"
    training = subprocess.Popen(
        [sys.executable, "-c", _TRAINING, str(tmp_path), influx.url, influx.name, str(mini)],
        stdout=subprocess.PIPE,
        cwd=_ROOT,
    )
    assert training.stdout is not None
    child_pid = int(training.stdout.readline())
    training.send_signal(signal.SIGKILL)
    training.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_steps(influx, "killed")) < 3000:
        time.sleep(0.2)
    assert _steps(influx, "killed") == list(range(3000))
    while time.monotonic() < deadline and _alive(child_pid):
        time.sleep(0.2)
    assert not _alive(child_pid)  # it went once the outbox was sent


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().split()[2] != "Z"
    return waited == 0


def test_where_no_child_can_start_the_run_forwards_on_a_thread(
    tmp_path: Path,
    reg: registry.Registry,
    influx: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # an interpreter that cannot run `-m exporter.influx.forward_child` (here: one that exits at once)
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    with (
        caplog.at_level(logging.WARNING),
        exporter.init("r", registry=reg, settings=influx.settings(tmp_path / "store")) as run,
    ):
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.25})
        assert run.flush(20)
    assert _steps(influx, "r") == list(range(100))
    assert any("forwarding on a thread" in r.getMessage() for r in caplog.records)


def _write_requests(server: Any) -> int:
    """Write requests the server has answered (influxd's own count, /debug/vars)."""
    with urllib.request.urlopen(f"{server.url}/debug/vars", timeout=10) as response:
        stats = json.loads(response.read())
    (httpd,) = (v for k, v in stats.items() if k.startswith("httpd"))  # "httpd:<bind>"
    return int(httpd["values"].get("writeReq", 0))


def test_a_child_that_sent_all_there_was_sends_what_comes_next_once_per_idle_wait(
    tmp_path: Path, reg: registry.Registry, influx_server_factory: Any
) -> None:
    # The promise (forward_process._IDLE_POLL): once caught up, the child reads again only
    # after its idle wait, so a run logging steadily costs InfluxDB (and the child) one pass
    # per wait, not one per commit of the worker (ten a second at the default interval).
    server = influx_server_factory()
    server.post_query('CREATE DATABASE "steady"')
    settings = exporter.ExporterSettings(
        store=tmp_path, influx_url=server.url, influx_database="steady"
    )
    seconds = 3.0
    with exporter.init("steady", registry=reg, settings=settings) as run:
        assert run.flush()
        before = _write_requests(server)
        start = time.monotonic()
        step = 0
        while time.monotonic() - start < seconds:
            run.log(step, {"losses/clipfrac": 0.25})
            step += 1
            time.sleep(0.01)
        during = _write_requests(server) - before
        # and the rows it sent are marked as it goes (room in the store), not only in a pause
        with sqlite3.connect(settings.outbox_path) as db:
            ((unmarked,),) = db.execute(
                "SELECT count(*) FROM points WHERE sent = 0 "
                "AND seq <= (SELECT seq FROM points_sent_upto)"
            ).fetchall()
            ((stored,),) = db.execute("SELECT count(*) FROM points").fetchall()
        assert run.flush()
    # docs/benchmarks.md and the CHANGELOG: caught up, it reads again 0.5 s later. A pass is a
    # data request and at most one rollup request; two passes of slack for the ones in flight
    # when the loop began and ended. (Passing after every commit, it made 56 here.)
    passes = seconds / 0.5 + 2
    assert during <= 2 * passes, (during, passes)
    assert unmarked <= stored / seconds, (unmarked, stored)  # at most the last second's
    points = server.query("steady", 'SELECT count("clip_fraction") FROM "policy"')
    assert points[0]["count"] == step  # and every step arrived


def test_the_child_imports_the_parents_exporter_whatever_folders_share_its_name(
    tmp_path: Path, reg: registry.Registry, influx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A training project with a folder named `exporter` (no __init__: a namespace package to
    # Python) on its path: the child, given the parent's path, found that folder instead of an
    # editable install's package ("No module named exporter.influx.forward_child") and the run
    # fell back to a thread after two failed starts.
    shadow = tmp_path / "project"
    (shadow / "exporter").mkdir(parents=True)
    # and the project's own folder not on the path as a folder (an installed rlvitals: pytest
    # puts it there for this suite)
    away = [p for p in sys.path if p and Path(p).resolve() != _ROOT]
    monkeypatch.setattr(sys, "path", [str(shadow), *away])
    monkeypatch.chdir(shadow)
    with exporter.init("r", registry=reg, settings=influx.settings(tmp_path / "store")) as run:
        run.log(0, {"losses/clipfrac": 0.25})
        assert run.flush()
        child = run._forwarder
        assert isinstance(child, ForwarderProcess)
        assert child.ready and child._fallback is None
    assert _steps(influx, "r") == [0]
