"""`rlvitals tail` with InfluxDB configured: what the logs already hold is read through the
direct path (as `import` reads it), what they get afterwards through the outbox; the hand-over
and a sidecar killed during its catch-up lose and duplicate nothing (real InfluxDB 1.x)."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from logmakers import write_event_file
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from exporter.sources.linefile import MARK_EVERY
from exporter.store.outbox import Outbox
from rlvitals.cli import main

ROOT = Path(__file__).parents[3]


def _values(step: int) -> dict[str, float]:
    # what the translation does on the way: both KL keys of CleanRL, a scaled loss, an
    # unknown key, a NaN, a value outside its limits, a ratio and a gradient derived per step
    return {
        "losses/approx_kl": 0.01 + (step % 100) / 1e4,
        "losses/old_approx_kl": 0.02,
        "losses/qf_loss": 1.0 + (step % 13) / 10,
        "losses/entropy": 0.69 - (step % 500) / 1e4,
        "losses/value_loss": math.nan if step % 997 == 5 else 0.5 / (1 + step % 50),
        "losses/clipfrac": 1.5 if step % 1009 == 3 else 0.1 + (step % 7) / 100,
        "charts/episodic_return": 100.0 + step % 300,
        "charts/episodic_length": 200.0,
        "custom/thing": (step % 40) * 0.5,
    }


def _append(path: Path, steps: Iterable[int]) -> None:
    """More events at the end of an event file, as a SummaryWriter still writing it adds them."""
    with open(path, "ab") as fh:
        writer = RecordWriter(fh)
        for step in steps:
            for tag, value in _values(step).items():
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
                event = Event(wall_time=1.7e9 + step, step=step, summary=summary)
                writer.write(event.SerializeToString())


def _env(influx: Any, tmp: Path, name: str) -> dict[str, str]:
    influx.server.post_query(f'CREATE DATABASE "{name}"')
    return {
        "RLVITALS_INFLUX_URL": influx.url,
        "RLVITALS_INFLUX_DATABASE": name,
        "RLVITALS_STORE": str(tmp / f"store_{name}"),
        "RLVITALS_POLICY": "warn",
    }


def _use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def _points(influx: Any, database: str) -> list[dict[str, Any]]:
    rows = influx.server.query(database, "SELECT * FROM /.*/ GROUP BY *")
    for row in rows:
        if row["_measurement"] == "run_config":
            row["wall_time"] = None  # when each reader started
    return sorted(rows, key=lambda r: (r["_measurement"], r["time"], json.dumps(r, sort_keys=True)))


def _position(store: Path) -> int | None:
    """The offset stored for the one log file, None before any."""
    outbox = store / "outbox.sqlite"
    if not outbox.exists():
        return None
    try:
        with Outbox(outbox) as box:
            offsets = [p.offset for p in box.source_positions().values()]
    except Exception:  # the sidecar is creating it
        return None
    return offsets[0] if offsets else None


def _wait(condition: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _raw(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in points if not str(p["_measurement"]).startswith("rlvitals_rollup")]


def _same_points(points: list[dict[str, Any]], others: list[dict[str, Any]]) -> bool:
    """The same points; a rollup's sums and means (`sum:<field>`, `mean:<field>`) equal up to the
    order they were added in (InfluxDB recomputes the block a follower goes on in, the import
    sums it itself)."""
    if len(points) != len(others):
        return False
    for point, other in zip(points, others, strict=True):
        if point.keys() != other.keys():
            return False
        for key, value in point.items():
            if key.startswith(("sum:", "mean:")) and isinstance(value, float):
                if not math.isclose(value, other[key], rel_tol=1e-12, abs_tol=1e-12):
                    return False
            elif value != other[key]:
                return False
    return True


def test_tail_catches_up_directly_then_follows_through_the_outbox_as_an_import_would(
    influx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    first = [*range(0, 2000), *range(1500, 3000)]  # a resume inside what the catch-up reads
    later = [*range(3000, 3300), *range(3250, 3400)]  # and one after the hand-over
    path = write_event_file(logs / "run_a", [(s, _values(s)) for s in first])
    size_before = path.stat().st_size

    tailed = _env(influx, tmp_path, f"{influx.name}_tail")
    _use(monkeypatch, tailed)
    store = Path(tailed["RLVITALS_STORE"])
    result: list[int] = []
    args = ["tail", str(logs), "--poll", "0.2", "--max-polls", "40"]
    sidecar = threading.Thread(target=lambda: result.append(main(args)))
    sidecar.start()
    try:
        # the catch-up stored where it stopped: the end of the file as it was
        _wait(lambda: _position(store) == size_before, "the catch-up's position")
        _append(path, later)
    finally:
        sidecar.join(120)
    assert result == [0]
    assert _position(store) == path.stat().st_size  # and where following stopped

    imported = _env(influx, tmp_path, f"{influx.name}_import")
    _use(monkeypatch, imported)
    assert main(["import", str(logs)]) == 0

    tail_points = _points(influx, tailed["RLVITALS_INFLUX_DATABASE"])
    assert _same_points(tail_points, _points(influx, imported["RLVITALS_INFLUX_DATABASE"]))
    kinds = {(r["kind"], r["time"]) for r in tail_points if r["_measurement"] == "events"}
    assert {("resume", 1500), ("resume", 3250)} <= kinds
    assert any("entropy_gradient" in r for r in tail_points if r["time"] == 3001)
    # What the catch-up read went straight to InfluxDB; only what came later went through the
    # outbox (the local store).
    db = sqlite3.connect(store / "outbox.sqlite")
    steps = db.execute("SELECT min(step), max(step) FROM samples WHERE measurement = 'policy'")
    assert steps.fetchone() == (3000, 3399)
    runs = [name for (name,) in db.execute("SELECT run FROM runs")]
    assert runs == ["run_a"]
    db.close()


@pytest.mark.parametrize("kind", ["tensorboard", "jsonl"])
def test_a_tail_killed_during_its_catch_up_goes_on_and_loses_or_duplicates_nothing(
    influx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    logs = tmp_path / "logs"
    # Long enough that the catch-up is far from the end when its first position is stored (the
    # kill follows within a poll): an event file gets one per block read (the first is 64 KiB,
    # about 120 steps of these nine keys), a text log one every MARK_EVERY lines. The log's own
    # resume is in it.
    last = 8_000 if kind == "tensorboard" else 2 * MARK_EVERY + 5_000
    resume = last * 3 // 4 - 1_000
    steps = [*range(0, last * 3 // 4), *range(resume, last)]
    if kind == "tensorboard":
        path = write_event_file(logs / "run_b", [(s, _values(s)) for s in steps])
    else:  # positions come every so many lines
        path = logs / "run_b" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        rows = [{"global_step": s, "_timestamp": 1.7e9 + s, **_values(s)} for s in steps]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    size = path.stat().st_size

    tailed = _env(influx, tmp_path, f"{influx.name}_killed")
    store = Path(tailed["RLVITALS_STORE"])
    env = {**os.environ, **tailed, "PYTHONPATH": str(ROOT)}
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "rlvitals.cli", "tail", str(logs), "--poll", "0.2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # killed as soon as the catch-up stored a position short of the end
        offset = _wait(lambda: _position(store), "a position of the catch-up")
        sidecar.send_signal(signal.SIGKILL)
    finally:
        sidecar.wait(30)
    assert 0 < offset < size

    _use(monkeypatch, tailed)
    assert main(["tail", str(logs), "--no-follow"]) == 0
    assert _position(store) == size

    imported = _env(influx, tmp_path, f"{influx.name}_whole")
    _use(monkeypatch, imported)
    assert main(["import", str(logs)]) == 0
    # the training's points (the step rollups computed from them are compared with the raw
    # points they sum in tests/exporter/influx/test_influx_rollups.py)
    killed_points = _raw(_points(influx, tailed["RLVITALS_INFLUX_DATABASE"]))
    whole = _raw(_points(influx, imported["RLVITALS_INFLUX_DATABASE"]))
    # A restarted reader starts the gradient's trailing window afresh (as any restarted `tail`
    # does): the gradients of the window's steps after where it went on differ, nothing else.
    window = 50
    moved = [a["time"] for a, b in zip(killed_points, whole, strict=True) if a != b]
    assert len(moved) <= window and max(moved, default=0) - min(moved, default=0) < window
    for a, b in zip(killed_points, whole, strict=True):
        if a["time"] in moved:
            a["entropy_gradient"] = b["entropy_gradient"] = None
    assert killed_points == whole
    resumes = [r["time"] for r in killed_points if r.get("kind") == "resume"]
    assert resumes == [resume]  # the log's own, and no replay taken for one
    db = sqlite3.connect(store / "outbox.sqlite")
    assert [name for (name,) in db.execute("SELECT run FROM runs")] == ["run_b"]
    db.close()


def test_a_catch_up_influxdb_does_not_take_is_read_again_into_the_outbox(tmp_path: Path) -> None:
    from influx_server import refused_port

    with refused_port() as port:
        _catch_up_refused(tmp_path, port)


def _catch_up_refused(tmp_path: Path, port: int) -> None:
    logs = tmp_path / "logs"
    path = write_event_file(logs / "run_c", [(s, _values(s)) for s in range(2000)])
    store = tmp_path / "store"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RLVITALS_INFLUX_URL": f"http://127.0.0.1:{port}",  # nothing answers there
        "RLVITALS_STORE": str(store),
        "RLVITALS_POLICY": "warn",
        "RLVITALS_OUTAGE_WAIT": "0.5",
        # no drain after the SIGTERM: its forwarder would retry the absent InfluxDB for the
        # default ten minutes, outliving the test
        "RLVITALS_DRAIN_TIMEOUT": "0",
    }
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "rlvitals.cli", "tail", str(logs), "--poll", "0.2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def parked() -> bool:
        if _position(store) != path.stat().st_size:
            return False
        db = sqlite3.connect(store / "outbox.sqlite")
        try:
            (steps,) = db.execute(
                "SELECT count(DISTINCT step) FROM samples WHERE measurement = 'policy'"
            ).fetchone()
        finally:
            db.close()
        return bool(steps == 2000)

    try:
        _wait(parked, "every step parked in the outbox")
    finally:
        sidecar.send_signal(signal.SIGTERM)
        _, stderr = sidecar.communicate(timeout=60)
    assert "reading on from where InfluxDB stopped through the outbox" in stderr.decode()
