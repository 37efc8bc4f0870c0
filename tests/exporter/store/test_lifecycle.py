"""A run's lifecycle: finished when it says so or after a long silence, stalled in between."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import exporter
import registry
from exporter import Lifecycle, Outbox, RunStatus


def _settings(tmp_path: Path) -> exporter.ExporterSettings:
    return exporter.ExporterSettings(store=tmp_path / "store")


@pytest.mark.parametrize(
    ("finished_after_last", "idle", "expected"),
    [
        (None, 0.0, RunStatus.LIVE),
        (None, 599.0, RunStatus.LIVE),
        (None, 600.0, RunStatus.STALLED),
        (None, 3599.0, RunStatus.STALLED),
        (None, 3600.0, RunStatus.FINISHED),
        (5.0, 1.0, RunStatus.FINISHED),  # finish() called after the last step
        (-100.0, 1.0, RunStatus.LIVE),  # logged again after finishing: resumed
        (-100.0, 700.0, RunStatus.STALLED),  # ... and then went quiet
    ],
)
def test_status_follows_the_declared_windows(
    finished_after_last: float | None, idle: float, expected: RunStatus
) -> None:
    now = 10_000.0
    last = now - idle
    finished = None if finished_after_last is None else last + finished_after_last
    assert Lifecycle().status(finished_at=finished, last_activity=last, now=now) is expected


def test_a_run_recorded_but_not_yet_logging_is_live() -> None:
    assert Lifecycle().status(finished_at=None, last_activity=None, now=1.0) is RunStatus.LIVE


def test_windows_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="stall_after_s"):
        Lifecycle(stall_after_s=100, ended_after_s=50)


def test_finish_is_recorded_and_activity_is_the_last_steps_wall_time(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = _settings(tmp_path)
    with exporter.init("r", registry=reg, settings=settings) as run:
        run.log(1, {"policy_kl": 0.01}, wall_time=1000.0)
        run.log(2, {"policy_kl": 0.02}, wall_time=1060.0)
        assert run.flush()
        with Outbox(settings.outbox_path) as box:
            record = box.run("r")
        assert record is not None
        assert record.finished is None and record.last_activity == 1060.0
    with Outbox(settings.outbox_path) as box:
        record = box.run("r")
    assert record is not None and record.finished == pytest.approx(time.time(), abs=60)
    status = Lifecycle().status(
        finished_at=record.finished, last_activity=record.last_activity, now=time.time()
    )
    assert status is RunStatus.FINISHED


def test_a_store_from_before_the_lifecycle_gains_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE runs (run TEXT PRIMARY KEY, project TEXT, config TEXT NOT NULL DEFAULT "
        "'{}', framework TEXT, created REAL NOT NULL)"
    )
    db.execute("INSERT INTO runs (run, created) VALUES ('old', 5.0)")
    db.commit()
    db.close()
    with Outbox(path) as box:
        record = box.run("old")
    assert record is not None and (record.finished, record.last_activity) == (None, None)
