"""`rlvitals import` / `tail` under faults of the store: never a busy loop, SIGTERM honoured, a
non-zero exit when what was read is not stored, and running it again completes."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import exporter

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(RLVITALS_STORE=str(store), RLVITALS_POLICY="warn")
    return env


def _jsonl(path: Path, steps: range) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        for s in steps:
            fh.write(f'{{"step": {s}, "losses/clipfrac": 0.25}}\n')


def _steps(store: Path, run: str) -> list[int]:
    with exporter.Outbox(store / "outbox.sqlite") as box:
        steps, _ = box.series(run, "clip_fraction")
    return [int(s) for s in steps]


def test_import_blocked_by_a_locked_store_honours_sigterm_exits_non_zero_and_reruns_complete(
    tmp_path: Path,
) -> None:
    store, logs = tmp_path / "store", tmp_path / "logs"
    _jsonl(logs / "run1" / "m.jsonl", range(500))
    exporter.Outbox(store / "outbox.sqlite").close()
    # another process holds the outbox's write lock: every write of the import waits on it
    holder = sqlite3.connect(store / "outbox.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    cmd = [sys.executable, "-m", "rlvitals", "import", str(logs), "--registry", MINI]
    proc = subprocess.Popen(cmd, env=_env(store), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # SIGTERM once its run started (a fixed sleep could come before the CLI, seconds to
        # start on a busy machine, installed its handler: killed by the signal, not handled)
        assert proc.stderr is not None
        started = b""
        deadline = time.monotonic() + 60
        while b"framework" not in started:
            assert proc.poll() is None and time.monotonic() < deadline, started.decode()
            if select.select([proc.stderr], [], [], 1.0)[0]:
                started += proc.stderr.readline()
        time.sleep(1.0)  # its writes wait on the lock
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        err = started + err
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
        holder.execute("ROLLBACK")
        holder.close()
    assert took < 20, f"SIGTERM took {took:.1f} s to be honoured"
    assert proc.returncode == 1, err.decode()
    assert len(err) < 10_000  # a few lines, not a loop printing
    assert b"Traceback" not in err
    assert b"stored" in err
    again = subprocess.run(cmd, env=_env(store), capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    assert _steps(store, "run1") == list(range(500))


def test_one_stuck_run_does_not_stall_the_other_runs_a_tail_follows(
    tmp_path: Path, reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.ingest.feed import Ingest
    from exporter.run import Run
    from exporter.sources import LogFile, Record

    release = threading.Event()
    real = Run._process

    def stuck_process(self: Run, outbox: Any, batch: Any) -> None:
        if self.name == "stuck":
            release.wait(120)  # its store hangs (a disk that stopped answering)
        real(self, outbox, batch)

    monkeypatch.setattr(Run, "_process", stuck_process)
    settings = exporter.ExporterSettings(store=tmp_path / "store", queue_size=1000)
    ingest = Ingest(registry=reg, settings=settings, framework="cleanrl")
    (tmp_path / "stuck").mkdir()
    (tmp_path / "ok").mkdir()
    stuck_log = LogFile(tmp_path / "stuck" / "m.jsonl", "jsonl")
    ok_log = LogFile(tmp_path / "ok" / "m.jsonl", "jsonl")
    done = threading.Event()

    def read() -> None:
        ingest.feed(stuck_log, (Record(s, {"losses/clipfrac": 0.1}) for s in range(3000)))
        ingest.feed(ok_log, (Record(s, {"losses/clipfrac": 0.1}) for s in range(300)))
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert done.wait(60), "the reader stalled behind the stuck run"
        assert ingest.runs[1].flush(30)
        assert _steps(tmp_path / "store", "ok") == list(range(300))
    finally:
        release.set()
        ingest.finish(30)
    stuck = ingest.summaries[0].stats
    assert stuck is not None
    assert stuck.accepted + stuck.dropped == 3000
    assert stuck.dropped_by_reason.get("queue_full", 0) == stuck.dropped


def test_an_import_truncated_by_the_disk_budget_exits_non_zero_and_counts_right(
    tmp_path: Path,
) -> None:
    store, logs = tmp_path / "store", tmp_path / "logs"
    _jsonl(logs / "run1" / "m.jsonl", range(20_000))
    env = _env(store)
    env["RLVITALS_DISK_BUDGET_MB"] = "1"
    cmd = [sys.executable, "-m", "rlvitals", "import", str(logs), "--registry", MINI]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "RLVITALS_DISK_BUDGET_MB" in done.stderr
    steps = _steps(store, "run1")
    stored = len(steps)
    assert steps == list(range(stored))  # the run up to where the budget filled
    assert f"stored {stored:,}," in done.stdout
    # the budget counts the data, not the write-ahead log an import grows: about 1 MB of it
    # (it used to keep 3 steps in a 0.09 MB file)
    size = (store / "outbox.sqlite").stat().st_size
    assert 0.9 * 2**20 <= size <= 2**20, f"{size / 2**20:.2f} MB"
    listed = subprocess.run(
        [sys.executable, "-m", "rlvitals", "runs"], env=env, capture_output=True, text=True
    )
    refused = int(done.stdout.split("refused (disk budget) ")[1].split()[0].replace(",", ""))
    assert stored + refused == 20_000  # every value read is either stored or counted refused
    # the listing says what is missing, not a run that looks whole: incomplete, with how many
    # values were not stored; its last step is where it is stored to (the read positions are
    # not saved past what the budget refused: running the import again reads it again)
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("run1 ")]
    assert "incomplete" in row and f"{refused:,} value(s) read were not stored" in row, row
    assert f" {stored - 1:,} " in row and "19,999" not in row, row
    assert "Traceback" not in done.stderr


def test_import_with_influxdb_down_fails_fast_parks_nothing_and_a_rerun_completes(
    tmp_path: Path, influx_server_factory: Any
) -> None:
    server = influx_server_factory()
    server.post_query('CREATE DATABASE "rl"')
    server.stop()
    store, logs = tmp_path / "store", tmp_path / "logs"
    _jsonl(logs / "run1" / "m.jsonl", range(5000))
    env = _env(store)
    env.update(
        RLVITALS_INFLUX_URL=server.url, RLVITALS_INFLUX_DATABASE="rl", RLVITALS_OUTAGE_WAIT="3"
    )
    cmd = [sys.executable, "-m", "rlvitals", "import", str(logs), "--registry", MINI]
    started = time.monotonic()
    down = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert down.returncode != 0, down.stderr
    assert took < 60, f"took {took:.0f} s"
    assert "unreachable" in down.stderr and "run the same command again" in down.stderr
    assert "Traceback" not in down.stderr
    assert "stored 0," in down.stdout  # counts only what InfluxDB took
    db = sqlite3.connect(store / "outbox.sqlite")
    # nothing parked: replayed later it would overwrite what was written since
    assert db.execute("SELECT count(*) FROM samples").fetchone() == (0,)
    db.close()
    server.start()
    up = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    rows = server.query("rl", 'SELECT count("clip_fraction") FROM "policy"')
    assert rows[0]["count"] == 5000
