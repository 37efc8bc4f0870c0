"""A failed or killed `rlvitals import` leaves its run marked incomplete; the same command again
goes on with that run (no `NAME-2`) and ends with raw points and rollups equal to the source; the
error message says exactly what will happen.

Killed with SIGKILL mid-way (no chance to store or record anything more), into the embedded store
and straight into InfluxDB (behind a proxy that holds rollup writes a moment, so the rollups run
batches behind the raw points as on a busy machine, and killed when a saved read position is
past them if it ever is); failed at the disk budget, then run again with it raised; stopped by
SIGTERM while reading its last file (complete, so not incomplete) and before it (exit 1, the
unread run imported by the rerun); and killed after storing everything but before recording the
end (the rerun reads nothing and records it). Every import is a real process, run again with the
same argv.

The logs are written here with known values, all multiples of 2**-10 of small magnitude, so every
sum (Python's, sqlite's, InfluxDB's, the rollups' sums of partial sums) is exact in any order:
the comparisons below are `==`, not approximate.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import math
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import registry
from exporter import Outbox
from exporter.lease import Holder
from exporter.schema import EVENTS, ROLLUP_LEVELS, rollup_key, rollup_measurement
from rlvitals.cli import main

ROOT = Path(__file__).resolve().parents[3]
MINI = str(ROOT / "tests" / "fixtures" / "mini_registry")

# registry metric id -> (the CleanRL key it is logged under, its value at a step)
FIELDS: dict[str, tuple[str, Callable[[int], float]]] = {
    "clip_fraction": ("losses/clipfrac", lambda s: (s % 64) / 64),
    "value_loss": ("losses/value_loss", lambda s: (s % 13) / 8),
    "raw_reward": ("charts/episodic_return", lambda s: (s % 101) - 50.0),
    "policy_kl": ("losses/approx_kl", lambda s: (s % 7) / 1024),
}
Block = tuple[int, float, float, float, int]  # n, sum, min, max, last step


def _write_log(path: Path, steps: int, *, files: int = 1) -> None:
    """A JSON Lines log of `steps` steps; with `files`, split into that many files read one
    after the other as one run (`path` then names the first: `metrics-00.jsonl`, ...)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    per_file = -(-steps // files)
    for i in range(files):
        part = path if files == 1 else path.with_name(f"{path.stem}-{i:02}{path.suffix}")
        with part.open("w") as fh:
            for s in range(i * per_file, min(steps, (i + 1) * per_file)):
                record: dict[str, float] = {"global_step": s}
                record.update({key: value(s) for key, value in FIELDS.values()})
                fh.write(json.dumps(record) + "\n")


def _source_blocks(steps: int, field: str, level: int) -> dict[int, Block]:
    """The rollup blocks of `level` steps the source holds for `field` (key: the first step)."""
    value = FIELDS[field][1]
    out: dict[int, Block] = {}
    for lo in range(0, steps, level):
        values = [value(s) for s in range(lo, min(lo + level, steps))]
        out[lo] = (len(values), math.fsum(values), min(values), max(values), lo + len(values) - 1)
    return out


def _env(store: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    # this checkout's code in the subprocesses, whatever the venv's editable install points at
    env.update(PYTHONPATH=str(ROOT), RLVITALS_STORE=str(store), RLVITALS_POLICY="warn", **extra)
    return env


def _import_cmd(logs: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "rlvitals", "import", str(logs), "--registry", MINI, *more]


def _runs(store: Path) -> list[dict[str, Any]]:
    """`rlvitals runs --json` (in this process: the CLI's start-up is seconds on a busy box)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["runs", "--json", "--store", str(store)]) == 0
    rows: list[dict[str, Any]] = json.loads(out.getvalue())
    return rows


def _read_store(store: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """A query on the outbox while an import writes it (read-only; [] before it exists)."""
    path = store / "outbox.sqlite"
    if not path.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()
    except sqlite3.OperationalError:  # its tables not made yet
        return []


def _kill_when(proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float) -> None:
    """SIGKILL the import as soon as `ready()`; it must still be running then (mid-way)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, "the import ended before it was killed"
        assert time.monotonic() < deadline, "the import stored nothing in time"
        time.sleep(0.01)
    assert proc.poll() is None, "the import ended before it was killed"
    proc.kill()
    proc.wait(30)


def _steps_read(stdout: str, run: str) -> int:
    match = re.search(rf"run '{run}': ([\d,]+) steps", stdout)
    assert match, stdout
    return int(match.group(1).replace(",", ""))


def _assert_killed_run_incomplete(store: Path, run: str, pid: int) -> None:
    (row,) = _runs(store)
    assert row["name"] == run
    assert row["status"] == "incomplete", row
    why = row["status_reason"]
    assert f"pid {pid} " in why, why
    assert "running the same command again goes on with this run" in why, why


def _assert_went_on(done: subprocess.CompletedProcess[str], run: str, steps: int) -> None:
    """The rerun exited 0, said it goes on with the run, and read on from where the killed one
    stopped (fewer steps than the log holds: not the whole log again)."""
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"run '{run}' was left incomplete by an earlier import" in done.stderr, done.stderr
    assert "going on with it" in done.stderr
    assert "is already in the store" not in done.stderr  # the NAME-2 line
    assert 0 < _steps_read(done.stdout, run) < steps, done.stdout


def _assert_store_equals_source(store: Path, run: str, steps: int) -> None:
    """Every step of every field once, with its value; the running statistics and each rollup
    level (sqlite's, `store.running_stats`) the same as summed from the source."""
    with Outbox(store / "outbox.sqlite") as box:
        assert box.events(run, kind="resume") == []  # going on is not a resume
        for field, (_, value) in FIELDS.items():
            got_steps, got_values = box.series(run, field)
            assert got_steps.tolist() == list(range(steps)), field
            assert got_values.tolist() == [value(s) for s in range(steps)], field
            (stats,) = box.stats(run, field)
            assert (stats.count, stats.total) == (steps, math.fsum(map(value, range(steps))))
    for level in ROLLUP_LEVELS:
        for field in FIELDS:
            kept = {
                int(block) * level: (int(n), total, low, high, int(last))
                for block, n, total, low, high, last in _read_store(
                    store,
                    "SELECT block, n, total, min_seen, max_seen, last_step FROM sample_rollups "
                    "WHERE run = ? AND field = ? AND level = ? ORDER BY block",
                    run,
                    field,
                    level,
                )
            }
            assert kept == _source_blocks(steps, field, level), (field, level)


def test_a_killed_import_is_incomplete_and_the_same_command_completes_the_same_run(
    tmp_path: Path,
) -> None:
    steps = 20_000
    store, logs = tmp_path / "store", tmp_path / "logs"
    _write_log(logs / "r" / "metrics.jsonl", steps)
    env = _env(store)
    cmd = _import_cmd(logs)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # mid-way: a read position saved and about a third of the values stored
        _kill_when(
            proc,
            lambda: (
                bool(_read_store(store, "SELECT 1 FROM source_positions"))
                and _read_store(store, "SELECT count(*) FROM samples")[0][0]
                > len(FIELDS) * steps / 3
            ),
            timeout=60,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    _assert_killed_run_incomplete(store, "r", proc.pid)

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    _assert_went_on(again, "r", steps)
    _assert_store_equals_source(store, "r", steps)
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("r", "ended"), row
    assert row["last_step"] == row["stored_step"] == steps - 1


def _influx_totals(influx: Any, reg: registry.Registry, run: str) -> dict[str, tuple[int, float]]:
    """(count, sum) of each field's raw points in InfluxDB."""
    out = {}
    for field in FIELDS:
        measurement = reg.metric(field).group
        rows = influx.query(
            f'SELECT count("{field}"), sum("{field}") FROM "{measurement}" WHERE "run" = \'{run}\''
        )
        out[field] = (rows[0]["count"], rows[0]["sum"]) if rows else (0, 0.0)
    return out


def _influx_rolled(influx: Any, run: str, field: str, level: int) -> dict[int, Block]:
    """The rollup blocks InfluxDB holds for a field, summed over the run's series."""
    stats = ", ".join(f'"{rollup_key(stat, field)}"' for stat in ("n", "sum", "min", "max", "last"))
    rows = influx.query(
        f'SELECT {stats} FROM "{rollup_measurement(level)}" WHERE "run" = \'{run}\' GROUP BY *'
    )
    out: dict[int, list[float]] = {}
    for r in rows:
        n = r[rollup_key("n", field)]
        if n is None:
            continue
        cell = out.setdefault(int(r["time"]), [0, 0.0, math.inf, -math.inf, -1])
        cell[0] += n
        cell[1] += r[rollup_key("sum", field)]
        cell[2] = min(cell[2], r[rollup_key("min", field)])
        cell[3] = max(cell[3], r[rollup_key("max", field)])
        cell[4] = max(cell[4], r[rollup_key("last", field)])
    return {k: (int(c[0]), c[1], c[2], c[3], int(c[4])) for k, c in sorted(out.items())}


# how a line of each rollup measurement starts
_ROLLUP_LINES = [b"\n" + rollup_measurement(level).encode() + b"," for level in ROLLUP_LEVELS]


class _SlowRollups(http.server.BaseHTTPRequestHandler):
    """In front of the real InfluxDB: passes every request on, holding each write of rollup
    lines `DELAY` seconds first (an InfluxDB slow to take them, as on a busy machine), so the
    rollups run batches behind the raw points, as they did in the issue."""

    protocol_version = "HTTP/1.1"  # the writers keep their connections open
    upstream = ""
    DELAY = 0.25

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/write") and any(m in b"\n" + body for m in _ROLLUP_LINES):
            time.sleep(self.DELAY)
        headers = {k: v for k in ("Content-Type", "Authorization") if (v := self.headers.get(k))}
        request = urllib.request.Request(
            self.upstream + self.path,
            data=body if self.command == "POST" else None,
            headers=headers,
            method=self.command,
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, data = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slow_rollups(influx: Any) -> Iterator[str]:
    """The URL of a `_SlowRollups` in front of the test's InfluxDB."""
    handler = type("Handler", (_SlowRollups,), {"upstream": influx.url})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_killed_direct_import_rerun_leaves_influxdb_raw_points_and_rollups_equal_to_the_source(
    tmp_path: Path, influx: Any, reg: registry.Registry, slow_rollups: str
) -> None:
    steps = 24_000
    store, logs = tmp_path / "store", tmp_path / "logs"
    # a read position at the end of every file: a moment to kill at every 2,000 steps
    _write_log(logs / "r" / "metrics.jsonl", steps, files=12)
    env = _env(store, RLVITALS_INFLUX_URL=slow_rollups, RLVITALS_INFLUX_DATABASE=influx.name)
    cmd = _import_cmd(logs)
    first = next(iter(FIELDS))
    measurement = reg.metric(first).group
    fine = rollup_measurement(ROLLUP_LEVELS[0])
    seen = {"saved": -1, "rolled": 0, "raw": 0}

    def count(query: str) -> int:
        rows = influx.query(query)
        return int(rows[0]["v"]) if rows else 0

    def worst_moment() -> bool:
        """Once a read position is saved, the moment a kill hurts most as seen from outside:
        the rollups InfluxDB holds short of that position (read after it: the rerun would go
        on after steps whose blocks were never rolled up, the issue's 27,507 raw points and
        25,840 in both levels), else well past half-way."""
        saved = _read_store(store, "SELECT max(step) FROM run_progress WHERE run = 'r'")
        if not saved or saved[0][0] is None:
            return False
        seen["saved"] = saved[0][0]
        seen["rolled"] = count(f'SELECT sum("{rollup_key("n", first)}") AS v FROM "{fine}"')
        if seen["rolled"] < seen["saved"] + 1:
            return True
        return count(f'SELECT count("{first}") AS v FROM "{measurement}"') >= steps * 0.6

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _kill_when(proc, worst_moment, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    seen["raw"] = count(f'SELECT count("{first}") AS v FROM "{measurement}"')
    assert 0 < seen["raw"] < steps, seen  # mid-way
    _assert_killed_run_incomplete(store, "r", proc.pid)

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    _assert_went_on(again, "r", steps)
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("r", "ended"), row
    want = {
        field: (steps, math.fsum(map(value, range(steps)))) for field, (_, value) in FIELDS.items()
    }
    assert _influx_totals(influx, reg, "r") == want, seen
    for level in ROLLUP_LEVELS:
        for field in FIELDS:
            rolled = _influx_rolled(influx, "r", field, level)
            assert rolled == _source_blocks(steps, field, level), (field, level, seen)
    assert not influx.query(f'SELECT * FROM "{EVENTS}" WHERE "kind" = \'resume\'')


def test_an_import_failed_for_the_disk_budget_is_incomplete_and_completes_once_it_is_raised(
    tmp_path: Path,
) -> None:
    steps = 8000
    store, logs = tmp_path / "store", tmp_path / "logs"
    _write_log(logs / "r" / "metrics.jsonl", steps)
    # the log reaches its planned length: once complete the run is `finished`, not `ended`
    cmd = _import_cmd(logs, "--set", f"planned_steps={steps - 1}")
    small = _env(store, RLVITALS_DISK_BUDGET_MB="1")
    failed = subprocess.run(cmd, env=small, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    assert "raise RLVITALS_DISK_BUDGET_MB" in failed.stderr
    assert "value(s) read were not stored" in failed.stderr
    assert (
        "running the same command again goes on with 'r' from where this one stopped "
        "(no new run is made)"
    ) in failed.stderr
    (row,) = _runs(store)
    assert row["status"] == "incomplete", row
    assert "value(s) read were not stored" in row["status_reason"]
    assert "running the same command again goes on with this run" in row["status_reason"]

    roomy = _env(store, RLVITALS_DISK_BUDGET_MB="200")  # the cause fixed
    again = subprocess.run(cmd, env=roomy, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "run 'r' was left incomplete by an earlier import" in again.stderr, again.stderr
    assert "is already in the store" not in again.stderr
    _assert_store_equals_source(store, "r", steps)
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("r", "finished"), row
    assert "planned length" in row["status_reason"]


def test_sigterm_while_the_last_file_is_read_still_completes_the_import(tmp_path: Path) -> None:
    # SIGTERM (a stopped container) ends the reader after the file it is reading: here the
    # only one, so nothing is left unread and the run ends; it is not left incomplete
    steps = 60_000  # read for long enough (> 1 s) that the SIGTERM lands while reading
    store, logs = tmp_path / "store", tmp_path / "logs"
    _write_log(logs / "r" / "metrics.jsonl", steps)
    env = _env(store)
    proc = subprocess.Popen(
        _import_cmd(logs), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not _read_store(store, "SELECT 1 FROM samples LIMIT 1"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopping (SIGTERM)" in err
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("r", "ended"), row
    _assert_store_equals_source(store, "r", steps)


def test_sigterm_before_the_last_file_exits_1_and_the_same_command_completes_every_run(
    tmp_path: Path,
) -> None:
    steps = 60_000  # read for long enough (> 1 s) that the SIGTERM lands while reading a
    store, logs = tmp_path / "store", tmp_path / "logs"
    for run in ("a", "b"):  # read in this order: b is left unread
        _write_log(logs / run / "metrics.jsonl", steps)
    env = _env(store)
    cmd = _import_cmd(logs, "--set", f"planned_steps={steps - 1}")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _read_store(store, "SELECT 1 FROM samples LIMIT 1"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert "stopped (SIGTERM) before every log was read" in err
    assert "running the same command again goes on with 'a' from where this one stopped" in err
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("a", "incomplete"), row
    assert "running the same command again goes on with this run" in row["status_reason"]

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "run 'a' was left incomplete by an earlier import" in again.stderr, again.stderr
    assert _steps_read(again.stdout, "b") == steps
    # a was read whole before the SIGTERM took effect: nothing to read again, yet it ends now
    assert _steps_read(again.stdout, "a") == 0
    assert [(r["name"], r["status"]) for r in _runs(store)] == [
        ("a", "finished"),
        ("b", "finished"),
    ]
    for run in ("a", "b"):
        _assert_store_equals_source(store, run, steps)


def test_a_rerun_with_nothing_left_to_read_records_the_end_the_killed_import_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = 3000
    store, logs = tmp_path / "store", tmp_path / "logs"
    _write_log(logs / "r" / "metrics.jsonl", steps)
    env = _env(store)
    cmd = _import_cmd(logs, "--set", f"planned_steps={steps - 1}")
    for key, value in env.items():
        if key.startswith("RLVITALS_"):
            monkeypatch.setenv(key, value)
    assert main(cmd[3:]) == 0  # (in this process: it only sets the store up)
    # what an import killed after storing everything, before recording the end, leaves: its
    # run importing, the lease of a process that is gone, every read position at the end
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    with Outbox(store / "outbox.sqlite") as box:
        box.claim(
            "r", resume=True, holder=Holder(gone.pid, socket.gethostname(), None), kind="import"
        )
    _assert_killed_run_incomplete(store, "r", gone.pid)

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "run 'r' was left incomplete by an earlier import" in again.stderr, again.stderr
    assert _steps_read(again.stdout, "r") == 0  # nothing read again
    (row,) = _runs(store)
    assert (row["name"], row["status"]) == ("r", "finished"), row
    _assert_store_equals_source(store, "r", steps)
