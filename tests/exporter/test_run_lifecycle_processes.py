"""A run's status as the user reads it (`rlvitals runs --json`, the store through `Lifecycle`)
when real training processes crash, return, get `kill -9`ed, race for one run and log with a
clock that is off: every end is recorded or told by the writer lease, never guessed from
silence, and never from the trainer's `wall_time`."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from installed import installed

from exporter import Lifecycle, Outbox, RunStatus
from rlvitals.cli import main as rlvitals_main

ROOT = Path(__file__).parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_registry"
"""The children's registry (environment MINI): small, so a child is logging within a second."""
HOST = socket.gethostname()
SHORT = {"RLVITALS_STALL_AFTER_S": "2", "RLVITALS_ENDED_AFTER_S": "10"}
"""Lifecycle windows short enough to watch a run stall within a test."""

T = TypeVar("T")


class Child:
    """`python -c script args...` writing to the store `store`; its stdout is read line by line
    in a thread (`expect`), its stderr kept (`stderr`)."""

    def __init__(self, script: str, store: Path, args: Sequence[str], env: dict[str, str]) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        environ.update(
            RLVITALS_STORE=str(store), MINI=str(MINI), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1"
        )
        environ.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script), *args],
            env=environ,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        out, err = self.proc.stdout, self.proc.stderr
        threading.Thread(target=self._read, args=(out,), daemon=True).start()
        self._err_reader = threading.Thread(target=self._err.extend, args=(err,), daemon=True)
        self._err_reader.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    @property
    def stderr(self) -> str:
        return "".join(self._err)

    def expect(self, prefix: str, timeout: float = 60.0) -> str:
        """The next line of stdout starting with `prefix` (what follows it)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {prefix!r} from pid {self.pid} in {timeout} s:\n{self.stderr}")
            if line is None:
                self.proc.wait(10)
                self._err_reader.join(10)
                pytest.fail(
                    f"pid {self.pid} exited ({self.proc.returncode}) before {prefix!r}:\n"
                    f"{self.stderr}"
                )
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout)
        self._err_reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL, and reap it (a zombie still has its pid)."""
        os.kill(self.pid, signal.SIGKILL)
        assert self.wait(10) == -signal.SIGKILL


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    """Start children on the test's store (`tmp_path / "store"`); any left running at the end
    are killed."""
    children: list[Child] = []

    def start(script: str, *args: str, env: dict[str, str] | None = None) -> Child:
        child = Child(script, tmp_path / "store", args, env or {})
        children.append(child)
        return child

    yield start
    for child in children:
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait(10)


def _until(read: Callable[[], T], ok: Callable[[T], bool], timeout: float = 30.0) -> T:
    """Read until `ok` says so or `timeout` seconds passed; the last read either way."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _runs(store: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """`rlvitals runs --store STORE --json`, by run name."""
    capsys.readouterr()
    assert rlvitals_main(["runs", "--store", str(store), "--json"]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)}


def _row(store: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return _runs(store, capsys).get(name, {"status": None, "status_reason": None})


def _stored(store: Path, name: str, life: Lifecycle | None = None) -> tuple[Any, Any]:
    """(status read from the store through `Lifecycle`, the run's record)."""
    with Outbox(store / "outbox.sqlite") as box:
        record = box.run(name)
    assert record is not None, f"run {name!r} is not in the store"
    return (life or Lifecycle()).status(record.recorded), record


def _series(store: Path, name: str, field: str) -> tuple[list[int], list[float]]:
    with Outbox(store / "outbox.sqlite") as box:
        steps, values = box.series(name, field)
    return steps.tolist(), values.tolist()


# -- SB3: learn() raising, and learn() returning -----------------------------------------------

_SB3 = """
    import os, sys
    import torch
    torch.set_num_threads(1)
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    import exporter, registry
    from exporter.integrations.sb3 import RlvitalsCallback

    name, crash_at = sys.argv[1], int(sys.argv[2])

    class Boom(BaseCallback):
        def _on_step(self) -> bool:
            if crash_at and self.num_timesteps >= crash_at:
                raise RuntimeError(f"boom at step {self.num_timesteps}")
            return True

    run = exporter.init(name, framework="sb3", registry=registry.load(os.environ["MINI"]))
    model = PPO(
        "MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(total_timesteps=256, callback=[RlvitalsCallback(run), Boom()])
    print("RETURNED", flush=True)
    # no finish(): the script just ends
"""


def _sb3_children(spawn: Callable[..., Child]) -> tuple[Child, Child]:
    installed("stable_baselines3", "stable-baselines3")
    installed("gymnasium")
    installed("torch")
    return spawn(_SB3, "ppo-crash", "200"), spawn(_SB3, "ppo-done", "0")


def test_sb3_learn_raising_is_crashed_with_the_exception_and_returning_is_finished(
    tmp_path: Path, spawn: Callable[..., Child], capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    crash, done = _sb3_children(spawn)  # both train at once: the test waits for the slower
    assert crash.wait(240) == 1
    assert "Traceback" in crash.stderr and "RuntimeError: boom at step 200" in crash.stderr
    assert done.wait(240) == 0, done.stderr
    rows = _runs(store, capsys)

    crashed = rows["ppo-crash"]
    assert crashed["status"] == "crashed"
    assert "RuntimeError: boom at step 200" in crashed["status_reason"]
    status, record = _stored(store, "ppo-crash")
    assert (status.status, status.reason) == (RunStatus.CRASHED, crashed["status_reason"])
    assert record.lease is None  # the crash was recorded: nobody holds the run
    assert crashed["last_step"] == 192  # the dumps of the three rollouts before the raise
    with Outbox(store / "outbox.sqlite") as box:
        (event,) = box.events("ppo-crash", "exception")
    assert (event.step, event.text) == (192, "uncaught RuntimeError: boom at step 200")

    finished = rows["ppo-done"]
    assert (finished["status"], finished["status_reason"]) == ("finished", "SB3 learn() returned")
    status, record = _stored(store, "ppo-done")
    assert (status.status, status.reason) == (RunStatus.FINISHED, "SB3 learn() returned")
    assert record.lease is None
    assert finished["last_step"] == 256


_ENDING = """
    import os, sys
    import exporter, registry

    name, how = sys.argv[1:3]
    run = exporter.init(name, policy="strict", registry=registry.load(os.environ["MINI"]))
    for step in range(500):  # logged faster than the worker stores: a backlog at the end
        run.log(step, {"value_loss": float(step)})
    if how == "raise":
        raise RuntimeError(f"boom after step {step}")
    run.mark_finished("the trainer said it is done")
    # no finish(): the script just ends
"""


def test_without_sb3_an_exit_keeps_the_recorded_end_and_a_crash_is_marked_at_the_last_step(
    tmp_path: Path, spawn: Callable[..., Child], capsys: pytest.CaptureFixture[str]
) -> None:
    """What the SB3 test shows, with no framework: the exit after `mark_finished` keeps its
    reason, and the crash's `exception` event is at the step logged last, not at the step the
    worker had stored when the exception came."""
    store = tmp_path / "store"
    raised, marked = spawn(_ENDING, "raised", "raise"), spawn(_ENDING, "marked", "mark")
    assert raised.wait() == 1 and "RuntimeError: boom after step 499" in raised.stderr
    assert marked.wait() == 0, marked.stderr
    rows = _runs(store, capsys)
    assert (rows["raised"]["status"], rows["raised"]["status_reason"]) == (
        "crashed",
        "uncaught RuntimeError: boom after step 499",
    )
    with Outbox(store / "outbox.sqlite") as box:
        (event,) = box.events("raised", "exception")
    assert event.step == 499 == rows["raised"]["last_step"]
    assert (rows["marked"]["status"], rows["marked"]["status_reason"]) == (
        "finished",
        "the trainer said it is done",
    )


# -- a logger killed with SIGKILL --------------------------------------------------------------

_LOGGER = """
    import os, sys, time
    import exporter, registry

    name, base = sys.argv[1], float(sys.argv[2])
    run = exporter.init(name, policy="strict", registry=registry.load(os.environ["MINI"]))
    step = 0
    while True:
        run.log(step, {"value_loss": base + step})
        if step == 5:
            run.flush()
            print("LOGGING", run.name, flush=True)
        step += 1
        time.sleep(0.05)
"""


def test_a_sigkilled_logger_reads_crashed_at_once_naming_its_pid(
    tmp_path: Path, spawn: Callable[..., Child], capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    logger = spawn(_LOGGER, "killed", "0")
    assert logger.expect("LOGGING") == "killed"
    assert _row(store, "killed", capsys)["status"] == "live"
    logger.kill()
    # same host, the pid is gone: no lease timeout to wait for
    status, record = _stored(store, "killed")
    assert status.status is RunStatus.CRASHED
    assert status.reason.startswith(f"pid {logger.pid} on {HOST} stopped without recording an end")
    assert record.lease is not None and record.lease.holder.pid == logger.pid
    row = _row(store, "killed", capsys)
    assert (row["status"], row["status_reason"]) == ("crashed", status.reason)
    steps, values = _series(store, "killed", "value_loss")
    assert len(steps) >= 6 and steps == list(range(len(steps)))  # what was stored stays
    assert values == [float(s) for s in steps]


def test_a_sigkilled_logger_its_launcher_never_reaps_reads_crashed_as_a_zombie(
    tmp_path: Path, spawn: Callable[..., Child], capsys: pytest.CaptureFixture[str]
) -> None:
    """A launcher that does not `wait` leaves the killed trainer a zombie: its pid still exists,
    but it does not run (issue 36: it read stalled)."""
    store = tmp_path / "store"
    logger = spawn(_LOGGER, "zombie", "0")
    assert logger.expect("LOGGING") == "zombie"
    os.kill(logger.pid, signal.SIGKILL)  # this test is its parent and does not reap it yet
    stat = Path(f"/proc/{logger.pid}/stat")
    _until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0], lambda s: s == "Z")
    status, _ = _stored(store, "zombie")
    assert status.status is RunStatus.CRASHED, status
    assert status.reason.startswith(f"pid {logger.pid} on {HOST} exited (killed by SIGKILL)")
    assert "zombie" in status.reason, status
    row = _row(store, "zombie", capsys)
    assert (row["status"], row["status_reason"]) == ("crashed", status.reason)
    assert logger.wait(10) == -signal.SIGKILL


# -- two processes asking for one run ----------------------------------------------------------

_RESUMER = """
    import os, sys
    import exporter, registry
    from exporter.errors import RunHeld

    name, base = sys.argv[1], float(sys.argv[2])
    sys.stdin.readline()  # started early (imports take a while), it goes on when told to
    try:
        run = exporter.init(
            name, resume=True, policy="strict", registry=registry.load(os.environ["MINI"])
        )
    except RunHeld as exc:
        print("HELD", exc.holder, "|", exc, flush=True)
        sys.exit(3)
    print("RESUMED", run.name, run.resumed, run.last_step, flush=True)
    start = run.last_step + 1
    for step in range(start, start + 10):
        run.log(step, {"value_loss": base + step})
    run.flush()
    print("STORED", run.last_step, run.status().status, flush=True)
    sys.stdin.readline()  # holds the run until the test lets go
    run.finish()
"""


def test_a_second_writer_is_refused_while_the_first_lives_and_takes_over_once_it_is_killed(
    tmp_path: Path, spawn: Callable[..., Child], capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    first = spawn(_LOGGER, "shared", "1000000")
    second = spawn(_RESUMER, "shared", "2000000")
    third = spawn(_RESUMER, "shared", "3000000")
    assert first.expect("LOGGING") == "shared"
    second.send("go")
    holder, message = second.expect("HELD").split(" | ", 1)
    assert second.wait() == 3
    assert holder == f"pid {first.pid} on {HOST}"
    assert f"pid {first.pid} on {HOST}" in message and "two writers would mix" in message
    assert list(_runs(store, capsys)) == ["shared"]  # refused: no "shared-2" either
    assert _row(store, "shared", capsys)["status"] == "live"  # the first goes on

    # the first keeps logging after the refusal; then it is killed
    _until(lambda: _series(store, "shared", "value_loss")[0], lambda s: len(s) >= 20)
    first.kill()
    steps, values = _series(store, "shared", "value_loss")
    assert steps == list(range(len(steps))) and len(steps) >= 20
    assert values == [1_000_000.0 + s for s in steps]  # only the first's values
    killed_at = steps[-1]
    assert _row(store, "shared", capsys)["status"] == "crashed"

    third.send("go")
    assert third.expect("RESUMED") == f"shared True {killed_at}"
    assert third.expect("STORED") == f"{killed_at + 10} live"
    row = _row(store, "shared", capsys)
    assert row["status"] == "live", row
    assert row["last_step"] == killed_at + 10
    status, record = _stored(store, "shared")
    assert status.status is RunStatus.LIVE
    assert record.lease is not None and record.lease.holder.pid == third.pid
    with Outbox(store / "outbox.sqlite") as box:
        (resume,) = box.events("shared", "resume")
    assert resume.step == killed_at
    assert f"pid {first.pid} on {HOST}" in resume.text
    assert "stopped without recording an end" in resume.text
    steps, values = _series(store, "shared", "value_loss")
    assert steps == list(range(killed_at + 11))
    assert values == [(1_000_000.0 if s <= killed_at else 3_000_000.0) + s for s in steps]

    third.send("done")
    assert third.wait() == 0, third.stderr
    assert _row(store, "shared", capsys)["status"] == "finished"


# -- a training host whose clock is off --------------------------------------------------------

_SKEWED = """
    import os, sys, time
    from pathlib import Path
    import exporter, registry

    name, offset, stop = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
    run = exporter.init(name, policy="strict", registry=registry.load(os.environ["MINI"]))
    step = 0
    while not stop.exists():
        run.log(step, {"value_loss": float(step)}, wall_time=time.time() + offset)
        step += 1
        if step == 5:
            run.flush()
            print("LOGGING", run.status().status, flush=True)
        time.sleep(0.05)
    run.flush()
    print("STOPPED", step, flush=True)
    while run.status().status != "stalled":
        time.sleep(0.05)
    status = run.status()
    print("SELF", status.status, "|", status.reason, flush=True)
    time.sleep(600)  # alive, logging nothing: hung
"""


def test_skewed_trainer_clocks_read_live_while_logging_then_stalled_then_crashed(
    tmp_path: Path,
    spawn: Callable[..., Child],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, stop = tmp_path / "store", tmp_path / "stop"
    for key, value in SHORT.items():
        monkeypatch.setenv(key, value)  # what `rlvitals runs` reads, as the children do
    life = Lifecycle(stall_after_s=2, ended_after_s=10)
    skew = {"behind": -3600.0, "ahead": 7200.0}
    children = {
        name: spawn(_SKEWED, name, str(offset), str(stop), env=SHORT)
        for name, offset in skew.items()
    }
    for child in children.values():
        assert child.expect("LOGGING") == "live"
    # logging for longer than the stall window, whatever their clocks say
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        rows = _runs(store, capsys)
        assert {n: rows[n]["status"] for n in skew} == {"behind": "live", "ahead": "live"}
        for name in skew:
            assert _stored(store, name, life)[0].status is RunStatus.LIVE
        time.sleep(0.5)
    now = time.time()
    # the skew is in the data (the wall-time axis), not in the status
    assert rows["behind"]["last_activity"] < now - 3000
    assert rows["ahead"]["last_activity"] > now + 7000

    stop.touch()
    for child in children.values():
        child.expect("STOPPED")
    rows = _until(
        lambda: _runs(store, capsys),
        lambda r: all(r[n]["status"] == "stalled" for n in skew),
    )
    for name, child in children.items():
        assert rows[name]["status"] == "stalled", rows[name]
        holds = f"pid {child.pid} on {HOST} holds the run but stored nothing for"
        assert rows[name]["status_reason"].startswith(holds)
        assert _stored(store, name, life)[0].status is RunStatus.STALLED
        # the process's own view (`Run.status()`, what its /metrics serves) agrees
        assert child.expect("SELF").startswith(f"stalled | {holds}")

    for child in children.values():
        child.kill()
    rows = _runs(store, capsys)
    for name, child in children.items():
        assert rows[name]["status"] == "crashed", rows[name]
        assert rows[name]["status_reason"].startswith(f"pid {child.pid} on {HOST} stopped")
        assert _stored(store, name, life)[0].status is RunStatus.CRASHED


def test_import_resume_on_a_run_another_process_logs_is_refused_naming_it(
    tmp_path: Path,
    spawn: Callable[..., Child],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = tmp_path / "store"
    logger = spawn(_LOGGER, "shared", "1000000")
    assert logger.expect("LOGGING") == "shared"
    logs = tmp_path / "logs" / "shared"
    logs.mkdir(parents=True)
    (logs / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "value_loss": -1.0}) + "\n" for s in range(50))
    )
    for key in [k for k in os.environ if k.startswith("RLVITALS_")]:
        monkeypatch.delenv(key)
    capsys.readouterr()
    args = ["import", str(logs.parent), "--run", "shared", "--resume", "--store", str(store)]
    code = rlvitals_main([*args, "--registry", str(MINI), "--via-outbox"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"'shared' is being written by pid {logger.pid} on {HOST}" in err
    assert "Traceback" not in err
    logger.kill()
    _, values = _series(store, "shared", "value_loss")
    assert values and min(values) >= 1_000_000  # nothing of the import's went in
