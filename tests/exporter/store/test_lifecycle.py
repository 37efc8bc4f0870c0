"""A run's life as recorded (exporter/lifecycle.py): a recorded end wins, a dead writer is
a crash (or an incomplete import), a living writer that stores nothing is stalled, and history
nobody holds is ended once quiet, never stalled."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry
from exporter import Lifecycle, Outbox, RunStatus
from exporter.lease import Holder, Lease, this_process
from exporter.lifecycle import Recorded
from exporter.run import Run

LIFE = Lifecycle()
NOW = 1_000_000.0
OTHER_HOST = "not-" + socket.gethostname()


def _settings(tmp_path: Path) -> exporter.ExporterSettings:
    return exporter.ExporterSettings(store=tmp_path / "store")


def _lease(*, renewed_ago: float, kind: str = "log", host: str = OTHER_HOST) -> Lease:
    return Lease(Holder(1234, host, None), kind, NOW - 7200, NOW - renewed_ago)


def _dead_pid() -> int:
    """A pid that existed on this host and no longer does."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        # a recorded end is the status, however long ago rows arrived
        (Recorded("finished", "finish() called", NOW - 5, NOW - 9e6), RunStatus.FINISHED),
        (Recorded("crashed", "RuntimeError: x", NOW - 5, NOW - 1), RunStatus.CRASHED),
        (Recorded("ended", "imported", NOW - 5, NOW - 1), RunStatus.ENDED),
        # a living writer (renewing, on another host) judged by arrivals on the store clock
        (Recorded(arrived=NOW - 599, lease=_lease(renewed_ago=1)), RunStatus.LIVE),
        (Recorded(arrived=NOW - 600, lease=_lease(renewed_ago=1)), RunStatus.STALLED),
        (Recorded(arrived=NOW - 9e5, lease=_lease(renewed_ago=1)), RunStatus.STALLED),
        # a writer that stopped renewing for the lease's ttl is gone without an end
        (Recorded(arrived=NOW - 1, lease=_lease(renewed_ago=59)), RunStatus.LIVE),
        (Recorded(arrived=NOW - 1, lease=_lease(renewed_ago=60)), RunStatus.CRASHED),
        (
            Recorded("importing", arrived=NOW - 1, lease=_lease(renewed_ago=60, kind="import")),
            RunStatus.INCOMPLETE,
        ),
        (Recorded("importing", "stopped", NOW - 1, NOW - 1), RunStatus.INCOMPLETE),
        # a dead reader of the logs says nothing about the training: not a crash, no page
        (Recorded(arrived=NOW - 1, lease=_lease(renewed_ago=60, kind="tail")), RunStatus.UNKNOWN),
        # nobody holds it: live while rows arrive, then ended (never stalled: nobody to page)
        (Recorded(arrived=NOW - 599), RunStatus.LIVE),
        (Recorded(arrived=NOW - 600), RunStatus.ENDED),
        (Recorded(), RunStatus.UNKNOWN),
    ],
)
def test_status_reads_the_recorded_end_the_lease_and_arrivals(
    recorded: Recorded, expected: RunStatus
) -> None:
    status = LIFE.status(recorded, NOW)
    assert status.status is expected
    assert status.reason  # every status says what set it


def test_a_writer_on_this_host_is_judged_by_its_process_not_its_renewals() -> None:
    here = socket.gethostname()
    mine = Lease(this_process(), "log", NOW, NOW - 9e6)  # never renewed, but alive
    assert LIFE.status(Recorded(arrived=NOW - 1, lease=mine), NOW).status is RunStatus.LIVE
    dead = Lease(Holder(_dead_pid(), here, None), "log", NOW, NOW)  # just renewed, but gone
    status = LIFE.status(Recorded(arrived=NOW - 1, lease=dead), NOW)
    assert status.status is RunStatus.CRASHED
    assert "without recording an end" in status.reason


def test_a_recycled_pid_is_another_process() -> None:
    me = this_process()
    if me.started is None:
        pytest.skip("no /proc: process start times are not known on this system")
    recycled = Lease(Holder(me.pid, me.host, me.started - 1), "log", NOW, NOW)
    assert not LIFE.holder_alive(recycled, NOW)


def test_windows_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="stall_after_s"):
        Lifecycle(stall_after_s=100, ended_after_s=50)
    with pytest.raises(ValueError, match="renew_every_s"):
        Lifecycle(renew_every_s=60, lease_ttl_s=30)


def test_finish_records_the_end_and_arrival_is_the_store_clock_not_wall_time(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = _settings(tmp_path)
    before = time.time()
    with exporter.init("r", registry=reg, settings=settings) as run:
        # the trainer's clock is two days behind: data for the wall-time axis, not activity
        run.log(1, {"policy_kl": 0.01}, wall_time=before - 172_800)
        assert run.flush()
        with Outbox(settings.outbox_path) as box:
            record = box.run("r")
        assert record is not None and record.last_activity == before - 172_800
        assert record.arrived is not None and record.arrived >= before
        assert record.lease is not None and record.lease.holder.pid == this_process().pid
        assert LIFE.status(record.recorded).status is RunStatus.LIVE
    with Outbox(settings.outbox_path) as box:
        record = box.run("r")
    assert record is not None and record.lease is None
    status = LIFE.status(record.recorded)
    assert (status.status, status.reason) == (RunStatus.FINISHED, "finish() called")


@pytest.mark.parametrize("state", ["ended", None])
def test_the_end_waits_out_a_store_kept_busy_for_longer_than_two_seconds(
    tmp_path: Path, reg: registry.Registry, state: str | None
) -> None:
    # A sidecar ending one run while its other runs store a large catch-up found the lock
    # busy past the 2 s it waited: the end was lost and the lease kept (history read stalled,
    # then crashed once the sidecar exited). finish() waits for the rest of its timeout.
    settings = _settings(tmp_path)
    run = exporter.init("r", registry=reg, settings=settings)
    run.log(1, {"policy_kl": 0.01})
    assert run.flush()
    holder = sqlite3.connect(settings.outbox_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another writer's long transaction
    timer = threading.Timer(3.5, holder.execute, ["COMMIT"])
    timer.start()
    try:
        run.finish(15, state=state, reason="its logs were already quiet")
    finally:
        timer.join()
        holder.close()
    with Outbox(settings.outbox_path) as box:
        record = box.run("r")
    assert record is not None and record.lease is None
    assert record.state == state


def test_a_run_still_storing_what_it_was_given_is_not_stalled(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sidecar's catch-up of a large log logs it all, then its worker stores the backlog
    # for a while (finish() waiting on it): rows still reach the store, so it is not stalled.
    real = Run._process

    def slow(self: Run, outbox: Outbox, batch: list[Any]) -> None:
        time.sleep(0.5)
        real(self, outbox, batch)

    monkeypatch.setattr(Run, "_process", slow)
    settings = exporter.ExporterSettings(
        store=tmp_path / "store", stall_after_s=2, ended_after_s=60, queue_size=100_000
    )
    run = exporter.init("r", registry=reg, settings=settings)
    for step in range(10 * 2000):  # ten worker batches: 5 s or more to store
        run.log(step, {"policy_kl": 0.01})
    time.sleep(3)
    assert run.queue_depth > 0  # still storing, nothing logged for 3 s
    assert run.status().status is RunStatus.LIVE
    assert run.flush(60)
    time.sleep(2.5)  # nothing logged, nothing stored
    assert run.status().status is RunStatus.STALLED
    run.finish(30)


def test_an_exception_through_the_context_manager_is_the_runs_crash(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = _settings(tmp_path)
    with pytest.raises(RuntimeError), exporter.init("r", registry=reg, settings=settings) as run:
        run.log(1, {"policy_kl": 0.01})
        raise RuntimeError("loss went to nan at step 1")
    with Outbox(settings.outbox_path) as box:
        record = box.run("r")
    assert record is not None
    status = LIFE.status(record.recorded)
    assert status.status is RunStatus.CRASHED
    assert status.reason == "RuntimeError: loss went to nan at step 1"


def test_logging_again_after_a_recorded_end_makes_the_run_live(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = _settings(tmp_path)
    run = exporter.init("r", registry=reg, settings=settings)
    run.log(1, {"policy_kl": 0.01})
    run.mark_finished("SB3 learn() returned")
    assert run.flush()
    with Outbox(settings.outbox_path) as box:
        first = LIFE.status(box.run("r").recorded)  # type: ignore[union-attr]
    run.log(2, {"policy_kl": 0.01})  # a second learn()
    assert run.flush()
    with Outbox(settings.outbox_path) as box:
        second = LIFE.status(box.run("r").recorded)  # type: ignore[union-attr]
    run.finish()
    assert (first.status, first.reason) == (RunStatus.FINISHED, "SB3 learn() returned")
    assert second.status is RunStatus.LIVE


def test_a_store_from_before_the_recorded_lifecycle_gains_its_columns(tmp_path: Path) -> None:
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
    assert record is not None
    assert (record.finished, record.last_activity, record.state, record.lease) == (
        None,
        None,
        None,
        None,
    )
    assert LIFE.status(record.recorded).status is RunStatus.UNKNOWN
