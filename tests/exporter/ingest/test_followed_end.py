"""How a followed run ends, with real writer processes on this host (issue 36): the follower is
not the trainer, so a quiet followed run is stalled only while the process writing its logs runs
and holds them open; once that process is gone, the end recorded is what the evidence says:

- killed (reaped) with no closing record and nothing to expect one: `ended`, said to be unknown;
- killed with a planned length not reached, or from a trainer that always writes a closing
  record: `crashed`;
- killed and left a zombie by a launcher that does not `wait`: `crashed`, with the signal;
- a closing record read, then the writer exits: `finished`;
- the writer closes its logs, runs on (quiet, never stalled), then exits: `finished`;
- a console log ending with a traceback: `crashed` with the exception line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import registry
from exporter import ExporterSettings, Lifecycle, RunStatus
from exporter.ingest.feed import Ingest
from exporter.lifecycle import Status
from exporter.sources import EndMark, Record
from exporter.sources.discover import LogFile
from exporter.store.outbox import Outbox

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="needs /proc to see a log's writer"
)

LIFE = Lifecycle(stall_after_s=5, ended_after_s=60)

# Holds its log open for writing until told (a line on stdin): "close" closes it and runs on,
# "exit" exits normally.
_HOLDER = """
import sys
f = open(sys.argv[1], "a")
print("holding", flush=True)
for line in sys.stdin:
    if line.strip() == "close":
        f.close()
        print("closed", flush=True)
    elif line.strip() == "exit":
        sys.exit(0)
"""


class Writer:
    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "holding\n"

    def say(self, what: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        if what == "close":
            assert self.proc.stdout is not None and self.proc.stdout.readline() == "closed\n"

    def kill(self, *, reap: bool) -> None:
        self.proc.send_signal(signal.SIGKILL)
        if reap:
            self.proc.wait(10)
        else:
            # a launcher that does not wait: the child stays a zombie until its parent reaps it
            deadline = time.monotonic() + 10
            while _state(self.proc.pid) != "Z":
                assert time.monotonic() < deadline, "the killed child never became a zombie"
                time.sleep(0.01)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


@pytest.fixture
def follow(tmp_path: Path, reg: registry.Registry) -> Iterator[dict[str, Any]]:
    writers: list[Writer] = []
    ingests: list[Ingest] = []

    def start(name: str, *, config: dict[str, Any] | None = None, framework: str = "sb3"):
        settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
        ingest = Ingest(
            registry=reg, settings=settings, framework=framework, follow=True, config=config
        )
        ingests.append(ingest)
        (tmp_path / name).mkdir()
        log = LogFile(tmp_path / name / "progress.jsonl", "jsonl")
        log.path.write_text("{}\n", encoding="utf-8")
        writer = Writer(log.path)
        writers.append(writer)
        return ingest, log, writer, settings

    yield {"start": start}
    for writer in writers:
        writer.stop()
    for ingest in ingests:
        ingest.finish(30)


def _steps(start: int, n: int = 10, **extra: float) -> list[Record]:
    return [Record(s, {"policy_kl": 0.01, **extra}) for s in range(start, start + n)]


def _stored(settings: ExporterSettings, run: str, at: float) -> tuple[str | None, Status]:
    with Outbox(settings.outbox_path) as box:
        record = box.run(run)
    assert record is not None
    return record.state, LIFE.status(record.recorded, at)


def _grow(ingest: Ingest, log: LogFile, records: list[Record], now: float) -> None:
    """A first read (history), then a second one: the log grew while followed; the writer is
    looked for after it."""
    ingest.feed(log, _steps(0))
    ingest.feed(log, records)
    ingest.settle()
    assert ingest.flush(30)
    assert ingest.finish_idle(LIFE, now) == []
    assert ingest.flush(30)


def test_a_quiet_log_whose_writer_runs_and_holds_it_is_stalled_and_a_killed_one_ended(
    follow: dict[str, Any],
) -> None:
    ingest, log, writer, settings = follow["start"]("hang")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    state, status = _stored(settings, "hang", now)
    assert (state, status.status) == (None, RunStatus.LIVE), status
    later = now + 30  # past the stall window, short of the ended one
    assert ingest.finish_idle(LIFE, later) == []  # the writer holds it: nothing recorded
    state, status = _stored(settings, "hang", later)
    assert status.status is RunStatus.STALLED, status
    assert f"pid {writer.proc.pid}" in status.reason and "holds them open" in status.reason
    # far past the ended window, the writer still runs and holds it: still stalled, not ended
    assert ingest.finish_idle(LIFE, now + 600) == []
    assert _stored(settings, "hang", now + 600)[1].status is RunStatus.STALLED
    writer.kill(reap=True)
    # the look that sees it gone waits a look for what it wrote before it went
    assert ingest.finish_idle(LIFE, now + 601) == []
    assert _stored(settings, "hang", now + 601)[1].status is RunStatus.QUIET
    assert ingest.finish_idle(LIFE, now + 602) == ["hang"]
    state, status = _stored(settings, "hang", now + 602)
    # an SB3-like log writes no closing record: a kill and a normal exit read the same
    assert (state, status.status) == ("ended", RunStatus.ENDED), status
    assert "cannot be told from a kill" in status.reason, status


def test_a_writer_killed_short_of_its_planned_length_crashed(follow: dict[str, Any]) -> None:
    ingest, log, writer, settings = follow["start"]("short", config={"planned_steps": 1000})
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    writer.kill(reap=True)
    assert ingest.finish_idle(LIFE, now + 1) == []
    assert ingest.finish_idle(LIFE, now + 2) == ["short"]
    state, status = _stored(settings, "short", now + 3)
    assert (state, status.status) == ("crashed", RunStatus.CRASHED), status
    assert "at step 19 of the planned 1,000" in status.reason, status


def test_a_trl_writer_killed_without_its_closing_record_crashed(follow: dict[str, Any]) -> None:
    ingest, log, writer, settings = follow["start"]("trl", framework="trl")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    writer.kill(reap=True)
    ingest.finish_idle(LIFE, now + 1)
    assert ingest.finish_idle(LIFE, now + 2) == ["trl"]
    state, status = _stored(settings, "trl", now + 3)
    assert (state, status.status) == ("crashed", RunStatus.CRASHED), status
    assert "closing record" in status.reason, status


def test_a_killed_writer_left_a_zombie_crashed_naming_the_signal(follow: dict[str, Any]) -> None:
    ingest, log, writer, settings = follow["start"]("zombie")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    writer.kill(reap=False)
    # the zombie's pid still exists: it does not run, so the run is not stalled
    assert _stored(settings, "zombie", now + 30)[1].status is RunStatus.QUIET
    ingest.finish_idle(LIFE, now + 31)
    assert ingest.finish_idle(LIFE, now + 32) == ["zombie"]
    state, status = _stored(settings, "zombie", now + 33)
    assert (state, status.status) == ("crashed", RunStatus.CRASHED), status
    assert "killed by SIGKILL" in status.reason and "zombie" in status.reason, status


def test_a_killed_writer_seen_a_zombie_then_reaped_crashed_naming_the_signal_not_a_zombie(
    follow: dict[str, Any],
) -> None:
    # a launcher that waits, but a moment after the follower looked: the exit status read
    # from the zombie is kept, "never reaped by its parent" is not said (seen in CI)
    ingest, log, writer, settings = follow["start"]("late")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    writer.kill(reap=False)
    ingest.finish_idle(LIFE, now + 31)  # this look sees the zombie
    writer.proc.wait(10)  # then its parent reaps it
    assert ingest.finish_idle(LIFE, now + 32) == ["late"]
    state, status = _stored(settings, "late", now + 33)
    assert (state, status.status) == ("crashed", RunStatus.CRASHED), status
    assert "killed by SIGKILL" in status.reason, status
    assert "zombie" not in status.reason and "never reaped" not in status.reason, status


def test_a_closing_record_then_a_normal_exit_finished(follow: dict[str, Any]) -> None:
    ingest, log, writer, settings = follow["start"]("hf", framework="trl")
    now = time.time()
    closing = Record(20, {"train_runtime": 12.5, "train_loss": 0.4, "total_flos": 1e12})
    _grow(ingest, log, [*_steps(10), closing], now)
    writer.say("exit")
    writer.proc.wait(10)
    ingest.finish_idle(LIFE, now + 1)
    assert ingest.finish_idle(LIFE, now + 2) == ["hf"]
    state, status = _stored(settings, "hf", now + 3)
    assert (state, status.status) == ("finished", RunStatus.FINISHED), status
    assert "HF Trainer's closing record" in status.reason and "step 20" in status.reason


def test_a_writer_that_closed_its_log_is_quiet_and_finished_once_it_exits(
    follow: dict[str, Any],
) -> None:
    ingest, log, writer, settings = follow["start"]("closer")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    writer.say("close")
    assert ingest.finish_idle(LIFE, now + 30) == []  # runs on, quiet: nothing to record yet
    assert ingest.flush(30)
    status = _stored(settings, "closer", now + 30)[1]
    assert status.status is RunStatus.QUIET and "closed them and still runs" in status.reason
    writer.say("exit")
    writer.proc.wait(10)
    ingest.finish_idle(LIFE, now + 31)
    assert ingest.finish_idle(LIFE, now + 32) == ["closer"]
    state, status = _stored(settings, "closer", now + 33)
    assert (state, status.status) == ("finished", RunStatus.FINISHED), status
    assert "closed its logs, then exited" in status.reason


def test_a_console_traceback_with_no_writer_seen_is_a_crash_once_quiet(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    ingest = Ingest(registry=reg, settings=settings, framework="sb3", follow=True)
    (tmp_path / "tb").mkdir()
    log = LogFile(tmp_path / "tb" / "train.log", "regex")
    log.path.write_text("x\n", encoding="utf-8")
    now = time.time()
    ingest.feed(log, _steps(0))
    # a traceback that training went on from was handled: not the end
    ingest.feed(log, [EndMark("crash", "ValueError: retrying", 3), *_steps(10)])
    ingest.feed(log, [EndMark("crash", "RuntimeError: CUDA error: out of memory", 40)])
    ingest.settle()
    assert ingest.flush(30)
    assert ingest.finish_idle(LIFE, now + 1) == []  # not quiet yet
    assert ingest.finish_idle(LIFE, now + 30) == ["tb"]
    state, status = _stored(settings, "tb", now + 31)
    assert (state, status.status) == ("crashed", RunStatus.CRASHED), status
    assert status.reason.endswith("RuntimeError: CUDA error: out of memory"), status
    ingest.finish(30)


def test_a_later_training_in_a_followed_log_ends_the_one_before_at_once_while_its_writer_goes_on(
    follow: dict[str, Any],
) -> None:
    # one job's log: a training, then another whose steps start again (console.py's parts); the
    # first is over when the second begins, although the job still runs and holds the log
    ingest, log, _writer, settings = follow["start"]("phases")
    now = time.time()
    _grow(ingest, log, _steps(10), now)
    assert _stored(settings, "phases", now)[1].status is RunStatus.LIVE
    ingest.feed(log, [Record(s, {"policy_kl": 0.02}, part=1) for s in range(5)])
    ingest.settle()
    assert ingest.flush(30)
    assert ingest.finish_idle(LIFE, now + 1) == ["phases"]
    state, status = _stored(settings, "phases", now + 1)
    assert (state, status.status) == ("ended", RunStatus.ENDED), status
    assert "another training began in its log after step 19" in status.reason
    assert "'phases-part2'" in status.reason
    later, status = _stored(settings, "phases-part2", now + 1)
    assert (later, status.status) == (None, RunStatus.LIVE), status
