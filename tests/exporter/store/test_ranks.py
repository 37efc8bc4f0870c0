"""The ranks of one job are one run (DESIGN.md, "Scale"), in the store: the ranks of a job join
the run of its name, another job under that name gets `name-2` unless it resumes, each rank
holds its own lease, and the run's life is its ranks' together (exporter/lifecycle.py): crashed
as soon as one rank crashed or died without an end (that rank named), live while one holds it,
finished once all finished."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import exporter
import registry
from exporter import Lifecycle, Outbox, RunStatus
from exporter.errors import RunHeld
from exporter.job import Job
from exporter.lease import Holder, Lease, this_process
from exporter.lifecycle import RankRecord, Recorded

LIFE = Lifecycle()
NOW = 1_000_000.0
OTHER_HOST = "not-" + socket.gethostname()


def _dead() -> Holder:
    """A process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return Holder(child.pid, socket.gethostname(), None)


def _living(renewed_ago: float = 1.0) -> Lease:
    return Lease(Holder(1234, OTHER_HOST, None), "log", NOW - 7200, NOW - renewed_ago)


def _claim(box: Outbox, job: Job, holder: Holder | None = None, **kw: bool) -> str:
    return box.claim("dist", holder=holder or this_process(), job=job, **kw).name


def test_the_ranks_of_a_job_join_its_run_and_another_job_gets_the_next_name(
    tmp_path: Path,
) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        first = [_claim(box, Job(r, "torchrun:a", True)) for r in range(4)]
        second = [_claim(box, Job(r, "torchrun:b", True)) for r in range(4)]
        assert first == ["dist"] * 4
        assert second == ["dist-2"] * 4
        assert [r.run for r in box.runs()] == ["dist", "dist-2"]
        assert {r.rank for r in box.run("dist").ranks} == {0, 1, 2, 3}  # type: ignore[union-attr]


def test_two_processes_claiming_one_rank_of_a_job_are_refused_naming_the_rank(
    tmp_path: Path,
) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        _claim(box, Job(0, "torchrun:a", True))
        other = Holder(1234, OTHER_HOST, None)  # renewed just now: alive for the lease's ttl
        with pytest.raises(RunHeld, match="as rank 0 by pid"):
            _claim(box, Job(0, "torchrun:a", True), other)


def test_a_worker_restarted_under_the_same_launch_goes_on_with_its_rank(tmp_path: Path) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        gone = _dead()
        _claim(box, Job(2, "torchrun:a", True), gone)
        claim = box.claim("dist", holder=this_process(), job=Job(2, "torchrun:a", True))
        assert (claim.name, claim.resumed) == ("dist", True)
        assert claim.took_over is not None and claim.took_over.holder == gone


def test_a_loose_job_key_reused_by_the_next_job_does_not_join_the_last_run(
    tmp_path: Path,
) -> None:
    """Ranks started by one parent process (multiprocessing) share its key, and so does the
    next job that parent starts: a rank already placed in the run is a new job's."""
    with Outbox(tmp_path / "o.sqlite") as box:
        loose = "parent:host:1:2"
        assert [_claim(box, Job(r, loose)) for r in (0, 1)] == ["dist", "dist"]
        for r in (0, 1):
            box.record_state("dist", "finished", "finish() called", holder=this_process(), rank=r)
        assert [_claim(box, Job(r, loose)) for r in (0, 1)] == ["dist-2", "dist-2"]


def test_a_job_resuming_a_run_makes_it_its_own_and_forgets_the_last_jobs_ranks(
    tmp_path: Path,
) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        gone = _dead()
        for r in range(4):
            _claim(box, Job(r, "torchrun:a", True), gone)  # died without an end
        names = [_claim(box, Job(r, "torchrun:b", True), resume=True) for r in range(2)]
        assert names == ["dist", "dist"]
        record = box.run("dist")
        assert record is not None and record.job == "torchrun:b"
        assert {r.rank for r in record.ranks} == {0, 1}  # the last job's ranks 2, 3 are gone
        assert LIFE.status(record.recorded).status is RunStatus.LIVE


def test_a_resume_while_another_job_still_writes_the_run_is_refused(tmp_path: Path) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        _claim(box, Job(0, "torchrun:a", True), Holder(1234, OTHER_HOST, None))
        with pytest.raises(RunHeld, match="rank 0 of another job"):
            _claim(box, Job(1, "torchrun:b", True), resume=True)


def test_the_run_ends_when_its_last_rank_ends_and_a_dead_rank_is_recorded_by_the_others(
    tmp_path: Path,
) -> None:
    with Outbox(tmp_path / "o.sqlite") as box:
        _claim(box, Job(0, "torchrun:a", True))
        _claim(box, Job(1, "torchrun:a", True), _dead())
        _claim(box, Job(2, "torchrun:a", True))
        box.record_state("dist", "finished", "finish() called", holder=this_process(), rank=0)
        record = box.run("dist")
        assert record is not None
        status = LIFE.status(record.recorded)
        assert status.status is RunStatus.CRASHED and status.reason.startswith("rank 1: ")
        assert record.state is None  # rank 2 still holds the run
        assert box.reap_ranks("dist") == [1]
        box.record_state("dist", "finished", "finish() called", holder=this_process(), rank=2)
        record = box.run("dist")
        assert record is not None and record.state == "crashed"
        assert record.state_reason is not None and record.state_reason.startswith("rank 1: ")
        (end,) = [e for e in box.events("dist") if e.rank == 1]
        assert end.kind == "rank_end" and end.fields == {"state": "crashed"}


@pytest.mark.parametrize(
    ("ranks", "arrived", "expected", "reason"),
    [
        # any rank holding the run: live while rows arrive, stalled once they stop
        (
            (RankRecord(0, "finished", "done", NOW), RankRecord(1, lease=_living())),
            NOW - 5,
            RunStatus.LIVE,
            "1 of 2 rank(s) hold the run",
        ),
        (
            (RankRecord(0, lease=_living()), RankRecord(1, lease=_living())),
            NOW - 900,
            RunStatus.STALLED,
            "2 of 2 rank(s) hold the run",
        ),
        # one rank crashed: the run crashed, whoever still runs, and that rank is named
        (
            (RankRecord(0, lease=_living()), RankRecord(3, "crashed", "uncaught OSError: x", NOW)),
            NOW - 1,
            RunStatus.CRASHED,
            "rank 3: uncaught OSError: x",
        ),
        (
            (RankRecord(0, lease=_living()), RankRecord(1, lease=_living(renewed_ago=600))),
            NOW - 1,
            RunStatus.CRASHED,
            "rank 1: pid 1234",
        ),
        # every rank ended: finished, or ended when one was stopped by hand
        (
            (RankRecord(0, "finished", "a", NOW), RankRecord(1, "finished", "b", NOW)),
            NOW - 1,
            RunStatus.FINISHED,
            "all 2 rank(s) finished",
        ),
        (
            (RankRecord(0, "finished", "a", NOW), RankRecord(1, "ended", "KeyboardInterrupt", NOW)),
            NOW - 1,
            RunStatus.ENDED,
            "rank 1: KeyboardInterrupt",
        ),
        # InfluxDB knows no leases: ranks without an end are judged by the run's activity
        ((RankRecord(0, "finished", "a", NOW), RankRecord(1)), NOW - 5, RunStatus.LIVE, ""),
        (
            (RankRecord(0, "finished", "a", NOW), RankRecord(1)),
            NOW - 900,
            RunStatus.ENDED,
            "1 of 2 rank(s) recorded an end",
        ),
    ],
)
def test_a_runs_life_is_its_ranks_together(
    ranks: tuple[RankRecord, ...], arrived: float, expected: RunStatus, reason: str
) -> None:
    status = LIFE.status(Recorded(arrived=arrived, ranks=ranks), NOW)
    assert status.status is expected
    assert reason in status.reason


def test_ranks_logging_in_one_process_each_make_one_run_through_init(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "launch-1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    settings = exporter.ExporterSettings(store=tmp_path)
    runs = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))  # read by init(), not at import
        runs.append(exporter.init("dist", registry=reg, settings=settings))
    assert [(r.name, r.rank) for r in runs] == [("dist", 0), ("dist", 1)]
    runs[0].log(0, {"train/approx_kl": 0.01})
    runs[1].log(0, {"train/approx_kl": 0.02})
    runs[0].finish()
    assert runs[1].flush()
    with Outbox(settings.outbox_path) as box:
        record = box.run("dist")
        assert record is not None and LIFE.status(record.recorded).status is RunStatus.LIVE
        kept = {s.rank: s.total for s in box.stats("dist") if s.measurement == "policy"}
        assert kept == {0: 0.01, 1: 0.02}
    runs[1].finish()
    with Outbox(settings.outbox_path) as box:
        record = box.run("dist")
        assert record is not None and LIFE.status(record.recorded).status is RunStatus.FINISHED
