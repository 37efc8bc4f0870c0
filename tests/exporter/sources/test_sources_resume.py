"""A restarted `rlvitals tail` goes on where it stopped: no file re-read, no false `resume` event,
no step lost; a file replaced meanwhile is read from its start; a genuine resume still counts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from logmakers import Sb3Csv, sb3_rows, write_event_file
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from exporter import Outbox
from exporter.sources import LogSet, Malformed
from rlvitals.cli import main

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")
_WAIT = 30.0


def _fail(problem: Malformed) -> None:
    raise AssertionError(f"unexpected malformed record: {problem}")


def _jsonl(path: Path, steps: range) -> None:
    with open(path, "a") as fh:
        for s in steps:
            fh.write(f'{{"step": {s}, "losses/clipfrac": {s / 1000}}}\n')


def _tb_append(path: Path, steps: range) -> None:
    """Append events to an existing event file (what a live SummaryWriter does)."""
    with open(path, "ab") as fh:
        writer = RecordWriter(fh)
        for s in steps:
            summary = Summary(value=[Summary.Value(tag="losses/clipfrac", simple_value=s / 1000)])
            writer.write(Event(wall_time=1.7e9 + s, step=s, summary=summary).SerializeToString())
        writer.flush()


class _Log:
    """A growing log of one format: `add(steps)` appends; `field` is where its values land."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.path = folder / "metrics.jsonl"
        self._csv: Sb3Csv | None = None
        self.field = "clip_fraction"

    def add(self, steps: range) -> None:
        if self.kind == "jsonl":
            _jsonl(self.path, steps)
        elif self.kind == "tensorboard":
            if not list(self.folder.glob("events.*")):
                write_event_file(self.folder, [(steps[0], {"losses/clipfrac": steps[0] / 1000})])
                steps = steps[1:]
            (self.path,) = self.folder.glob("events.*")
            _tb_append(self.path, steps)
        else:
            self.field = "policy_kl"
            if self._csv is None:
                self._csv = Sb3Csv(self.folder / "progress.csv")
            for s in steps:
                row = sb3_rows(2)[1] | {"time/total_timesteps": s, "train/approx_kl": s / 1000}
                self._csv.write(row)

    def close(self) -> None:
        if self._csv is not None:
            self._csv.close()


def _steps(store: Path, run: str, field: str) -> list[int]:
    if not (store / "outbox.sqlite").exists():
        return []
    with Outbox(store / "outbox.sqlite") as box:
        return [int(s) for s in box.series(run, field)[0]]


def _resumes(store: Path, run: str) -> list[int]:
    with Outbox(store / "outbox.sqlite") as box:
        return [e.step for e in box.events(run, kind="resume")]


def _wait_for(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + _WAIT
    while not check():
        assert time.monotonic() < deadline, "the tail did not store the log in time"
        time.sleep(0.05)


@pytest.fixture
def start_tail(tmp_path: Path) -> Iterator[Callable[[Path], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "RLVITALS_STORE": str(tmp_path / "store"), "RLVITALS_POLICY": "warn"}
    env.pop("RLVITALS_INFLUX_URL", None)

    def start(logs: Path) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "rlvitals", "tail", str(logs), "--registry", MINI]
        proc = subprocess.Popen(
            [*cmd, "--poll", "0.05"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.parametrize(
    ("kind", "sig"),
    [
        ("jsonl", signal.SIGTERM),
        ("jsonl", signal.SIGKILL),
        ("sb3-csv", signal.SIGKILL),
        ("tensorboard", signal.SIGKILL),
        ("tensorboard", signal.SIGTERM),
    ],
)
def test_restarted_tail_goes_on_without_a_false_resume_or_a_lost_step(
    kind: str,
    sig: signal.Signals,
    tmp_path: Path,
    start_tail: Callable[[Path], subprocess.Popen[bytes]],
) -> None:
    store, logs = tmp_path / "store", tmp_path / "logs"
    log = _Log(kind, logs / "run1")
    log.add(range(1, 301))
    tail = start_tail(logs)
    _wait_for(lambda: _steps(store, "run1", log.field)[-1:] == [300])
    log.add(range(301, 601))  # the tail is reading this when it is stopped or killed
    time.sleep(0.02)
    tail.send_signal(sig)
    code = tail.wait(60)
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    log.add(range(601, 801))
    again = start_tail(logs)
    _wait_for(lambda: _steps(store, "run1", log.field)[-1:] == [800])
    again.send_signal(signal.SIGTERM)
    assert again.wait(60) == 0
    log.close()
    assert _steps(store, "run1", log.field) == list(range(1, 801))
    assert _resumes(store, "run1") == []
    assert again.stderr is not None
    assert b"go on from where the last reader stopped" in again.stderr.read()


def test_genuine_resume_is_still_recorded_once_across_restarts(
    tmp_path: Path, start_tail: Callable[[Path], subprocess.Popen[bytes]]
) -> None:
    store, logs = tmp_path / "store", tmp_path / "logs"
    run = logs / "PPO_1"
    write_event_file(run, [(s, {"train/approx_kl": 0.01}) for s in range(100, 1001, 100)])
    tail = start_tail(logs)
    _wait_for(lambda: _steps(store, "PPO_1", "policy_kl")[-1:] == [1000])
    tail.send_signal(signal.SIGTERM)
    assert tail.wait(60) == 0
    # SB3 resumed from its step-500 checkpoint: a new event file whose steps start lower
    write_event_file(
        run, [(s, {"train/approx_kl": 0.02}) for s in range(500, 1201, 100)], wall_time=1.8e9
    )
    for _ in range(2):  # the second restart reads nothing new and must not add a resume
        tail = start_tail(logs)
        _wait_for(lambda: _steps(store, "PPO_1", "policy_kl")[-1:] == [1200])
        time.sleep(0.3)
        tail.send_signal(signal.SIGKILL)
        tail.wait(60)
    assert _resumes(store, "PPO_1") == [500]
    assert _steps(store, "PPO_1", "policy_kl") == list(range(100, 1201, 100))


def test_a_file_replaced_while_the_tail_was_down_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _jsonl(path, range(1, 4))
    first = LogSet([tmp_path], _fail)
    assert [r.step for _, rs in first.poll() for r in rs] == [1, 2, 3]
    (log,) = first.files
    saved = first.position(log)
    first.close()
    assert saved is not None
    same = LogSet([tmp_path], _fail, positions={saved.path: saved})
    _jsonl(path, range(4, 6))
    assert [r.step for _, rs in same.poll() for r in rs] == [4, 5]
    same.close()
    os.rename(path, tmp_path / "m.jsonl.1")  # rotated: a new file under the same name
    _jsonl(path, range(10, 12))
    fresh = LogSet([tmp_path], _fail, positions={saved.path: saved})
    assert [r.step for _, rs in fresh.poll() for r in rs] == [10, 11]
    assert fresh.resumed == []
    fresh.close()


def test_resumed_csv_knows_its_header_and_tensorboard_resumes_at_a_record(
    tmp_path: Path,
) -> None:
    csv_log = _Log("sb3-csv", tmp_path / "sb3")
    tb_log = _Log("tensorboard", tmp_path / "tb")
    for log in (csv_log, tb_log):
        log.add(range(1, 4))
    first = LogSet([tmp_path], _fail)
    assert sorted(r.step for _, rs in first.poll() for r in rs) == [1, 1, 2, 2, 3, 3]
    saved = {p.path: p for p in (first.position(log) for log in first.files) if p is not None}
    first.close()
    for log in (csv_log, tb_log):
        log.add(range(4, 6))
    again = LogSet([tmp_path], _fail, positions=saved)
    records = [r for _, rs in again.poll() for r in rs]
    assert len(again.resumed) == 2
    assert sorted(r.step for r in records) == [4, 4, 5, 5]
    assert all(
        r.values.get("train/approx_kl", r.values.get("losses/clipfrac"))
        == pytest.approx(r.step / 1000)
        for r in records
    )
    again.close()
    csv_log.close()


def test_import_reads_from_the_start_unless_asked_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    _jsonl(logs / "m.jsonl", range(1, 11))
    args = ["import", str(logs), "--registry", MINI, "--framework", "cleanrl"]
    assert main(args) == 0
    assert main(args) == 0  # a deliberate re-import reads all ten steps again, as a new run
    assert _steps(tmp_path / "store", "logs-2", "clip_fraction") == list(range(1, 11))
    _jsonl(logs / "m.jsonl", range(11, 16))
    assert main([*args, "--resume"]) == 0
    captured = capsys.readouterr()
    assert "already in the store, so this one is 'logs-2'" in captured.err
    out = captured.out.splitlines()
    assert [line.split(":")[1].split(",")[0].strip() for line in out] == [
        "10 steps",
        "10 steps",
        "5 steps",
    ]
    assert _steps(tmp_path / "store", "logs", "clip_fraction") == list(range(1, 16))


def test_tail_names_a_new_run_after_a_taken_name_unless_resume_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:  # an older run of that name
        box.claim_run("run1")
    log = _Log("jsonl", tmp_path / "logs" / "run1")
    log.add(range(1, 6))
    args = ["tail", str(tmp_path / "logs"), "--registry", MINI, "--no-follow"]
    assert main([*args, "--from-start"]) == 0
    assert _steps(tmp_path / "store", "run1-2", "clip_fraction") == list(range(1, 6))
    assert "'run1' is already in the store" in capsys.readouterr().err
    assert main([*args, "--from-start", "--resume"]) == 0
    assert _steps(tmp_path / "store", "run1", "clip_fraction") == list(range(1, 6))
    log.add(range(6, 8))
    assert main(args) == 0  # this store's reader read run1 before: it goes on with it
    assert _steps(tmp_path / "store", "run1", "clip_fraction") == list(range(1, 8))
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        assert [r.run for r in box.runs()] == ["run1", "run1-2"]
