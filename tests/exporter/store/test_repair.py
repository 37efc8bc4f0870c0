"""A damaged store: every reader says so (health included), and `rlvitals doctor --repair` gives
back every run whose pages survived, exactly as logged, in a file the exporter goes on writing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import exporter
import registry
from exporter.store.repair import RepairError, check_store, repair_store
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history.embedded import EmbeddedHistory

STEPS = 2000
RUNS = ("first", "second", "third")


def _value(run: str, step: int) -> float:
    return RUNS.index(run) + step / 4096  # exact in binary: read back bit for bit


def _make_store(store: Path, reg: registry.Registry) -> Path:
    """Three runs logged one after the other through the real exporter, closed cleanly."""
    for run in RUNS:
        settings = exporter.ExporterSettings(store=store)
        with exporter.init(run, registry=reg, settings=settings) as r:
            for step in range(STEPS):
                r.log(step, {"losses/clipfrac": _value(run, step) / 4})
    return store / "outbox.sqlite"


def _truncate(path: Path, keep: float) -> None:
    """Cut the file as a copy interrupted at the end would: the last pages written are gone."""
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(int(size * keep) // 4096 * 4096)


def _series(path: Path, run: str) -> dict[int, float]:
    points = EmbeddedHistory(path).series(run, "clip_fraction", None, None, 10 * STEPS)
    return dict(zip(points.steps.tolist(), points.values.tolist(), strict=True))


def _doctor_repair(store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLVITALS_STORE": str(store)}
    env.pop("RLVITALS_INFLUX_URL", None)
    cmd = [sys.executable, "-m", "rlvitals", "doctor", "--repair"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def damaged(tmp_path: Path, reg: registry.Registry) -> Path:
    path = _make_store(tmp_path / "store", reg)
    _truncate(path, 0.8)
    return path


def test_a_truncated_store_is_reported_damaged_by_every_route_and_by_health(
    damaged: Path, reg: registry.Registry
) -> None:
    app = create_app(DatasourceConfig(store=damaged.parent), reg)
    client = app.test_client()
    health = client.get("/api/health")
    assert health.status_code == 503  # it used to answer 200 while every data route was 503
    assert "doctor --repair" in health.get_json()["store"]["error"]
    runs = client.get("/api/runs")
    assert runs.status_code == 503 and "doctor --repair" in runs.get_json()["error"]


def test_doctor_repair_gives_back_every_run_whose_pages_survived_exactly(
    damaged: Path, reg: registry.Registry
) -> None:
    done = _doctor_repair(damaged.parent)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    kept = [
        p
        for p in damaged.parent.iterdir()
        if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(kept) == 1 and str(kept[0]) in done.stdout  # the damaged file is kept, named
    assert check_store(damaged) is None
    logged = {run: {s: _value(run, s) / 4 for s in range(STEPS)} for run in RUNS}
    # the first two runs were written before the pages a truncation at the end loses
    assert _series(damaged, "first") == logged["first"]
    assert _series(damaged, "second") == logged["second"]
    third = _series(damaged, "third")
    assert third.items() <= logged["third"].items()  # what came back of it is exact
    app = create_app(DatasourceConfig(store=damaged.parent), reg)
    client = app.test_client()
    assert client.get("/api/health").status_code == 200
    names = [r["run"] for r in client.get("/api/runs").get_json()["runs"]]
    assert names == list(RUNS)
    stats = EmbeddedHistory(damaged).stats("first", ["clip_fraction"])["clip_fraction"]
    assert stats.count == STEPS  # whole-run statistics recomputed from the rows
    again = _doctor_repair(damaged.parent)
    assert again.returncode == 0 and "nothing to repair" in again.stdout


def test_the_exporter_goes_on_writing_a_repaired_store_without_reusing_row_numbers(
    damaged: Path, reg: registry.Registry
) -> None:
    repair_store(damaged)
    with sqlite3.connect(damaged) as db:
        (top,) = db.execute("SELECT max(seq) FROM samples").fetchone()
    settings = exporter.ExporterSettings(store=damaged.parent)
    with exporter.init("fourth", registry=reg, settings=settings) as run:
        run.log(0, {"losses/clipfrac": 0.5})
        assert run.flush()
    with sqlite3.connect(damaged) as db:
        (low,) = db.execute("SELECT min(seq) FROM samples WHERE run = 'fourth'").fetchone()
    assert low > top
    assert check_store(damaged) is None


def test_repair_refuses_while_another_process_has_the_store_open(
    tmp_path: Path, reg: registry.Registry
) -> None:
    path = _make_store(tmp_path / "store", reg)
    holder = subprocess.Popen(  # a process that had the store open when it got damaged
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1]); "
            "db.execute('SELECT count(*) FROM runs').fetchall(); print('open', flush=True); "
            "time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        _truncate(path, 0.8)
        with pytest.raises(RepairError, match="in use by another process"):
            repair_store(path)
    finally:
        holder.kill()
        holder.wait()
    assert check_store(path) is not None  # left as it was
    assert not [p for p in path.parent.iterdir() if ".damaged-" in p.name]


def test_a_sound_store_is_left_alone(tmp_path: Path, reg: registry.Registry) -> None:
    path = _make_store(tmp_path / "store", reg)
    before = path.read_bytes()
    report = repair_store(path)
    assert report.repaired is False
    assert path.read_bytes() == before


def test_doctor_repair_on_a_store_that_does_not_exist_says_so(tmp_path: Path) -> None:
    done = _doctor_repair(tmp_path / "nowhere")
    assert done.returncode == 0 and "nothing to repair" in done.stdout
    assert not (tmp_path / "nowhere").exists()  # nothing created


def test_doctor_repair_with_a_bad_setting_exits_2_naming_it(tmp_path: Path) -> None:
    env = {**os.environ, "RLVITALS_STORE": str(tmp_path), "RLVITALS_POLICY": "loud"}
    cmd = [sys.executable, "-m", "rlvitals", "doctor", "--repair"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "RLVITALS_POLICY" in done.stderr
    assert "Traceback" not in done.stderr


def test_doctor_repair_refused_by_a_busy_store_exits_1_without_traceback(
    tmp_path: Path, reg: registry.Registry
) -> None:
    path = _make_store(tmp_path / "store", reg)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1]); "
            "db.execute('SELECT count(*) FROM runs').fetchall(); print('open', flush=True); "
            "time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        _truncate(path, 0.8)
        done = _doctor_repair(path.parent)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 1 and "in use by another process" in done.stderr
    assert "Traceback" not in done.stderr
