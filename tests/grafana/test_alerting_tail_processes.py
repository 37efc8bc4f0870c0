"""The generated stall and crash rules, run by a real Prometheus scraping a real
`rlvitals tail --follow` process (the sidecar as deployed), with short lifecycle windows set
through the environment:

1. logs written completely before the tail started (JSONL with correct, missing or hours-off
   timestamps; an SB3 progress.csv; one long enough that the first pass outlasts the stall
   window) are history: recorded `ended`, never stalled, never paged (served `live` at most,
   while the tail reads and stores them);
2. a job that hangs while logging (its log grew while followed, then stopped; the process runs
   on holding it open) fires "Training stalled" for its run once the stall window passed;
3. a restarted tail (SIGTERM, the same command again) reads logs quiet since before the restart
   as history: nothing (re)fires, the hang included (a restarted follower takes up a run again
   only when its logs grow: docs/status.md says so);
4. a training process logging through `exporter.init` into the same store that raises fires
   "Run crashed" with the exception in its reason; one that finished fires nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from influx_server import free_port, spawn_until_ready
from prom_server import PromServer, scrape_config
from prometheus_client.parser import text_string_to_metric_families
from test_alerting_prometheus import Fired, _evaluate

import registry
from exporter import Lifecycle
from exporter.ingest.feed import DETECT_SAMPLE
from exporter.lifecycle import RunStatus
from exporter.store.outbox import Outbox
from grafana.dashboards_gen.alerts import EXPORTER_JOB, Timing, alert_rule_groups

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus not installed"
)

REPO = Path(__file__).resolve().parents[2]
STALL_S = 4.0
ENDED_S = 60.0
POLL_S = 0.5
LIFE = Lifecycle(stall_after_s=STALL_S, ended_after_s=ENDED_S)
TIMING = Timing(unhealthy="30s", lookback_seconds=600, lifecycle=LIFE)
STALLED = "rlv-training-stalled"
CRASHED = "rlv-run-crashed"
UNHEALTHY = "rlv-exporter-unhealthy"
HISTORY = ("done-jsonl", "done-csv", "no-times", "skew-ahead", "skew-behind", "zz-long")
HANG = "hang"
# enough lines that each history run starts (and is served) while the first pass still reads
HISTORY_STEPS = DETECT_SAMPLE + 100
# the last history log (folders are read in name order) keeps the first pass reading (and
# storing) for longer than the stall window after the others were read: ~5 s at the ~5,000
# lines/s a loaded 2-CPU machine reads and stores
LONG_STEPS = 25_000
CRASH_TEXT = "CUDA error: an illegal memory access was encountered"
# a scrape a second (as the other test), the tail's poll, and slack for a loaded machine
SCRAPE_DELAY_S = 2 * 1.0 + 2 * POLL_S + 3.0


def _values(step: int) -> dict[str, float]:
    """One SB3 logger dump inside every band (no metric rule fires)."""
    return {
        "time/total_timesteps": 2048 * (step + 1),
        "rollout/ep_rew_mean": 10.0 + 0.1 * step,
        "train/approx_kl": 0.01,
        "train/clip_fraction": 0.1,
        "train/entropy_loss": -1.2,
    }


def _jsonl(step: int, wall_time: float | None) -> str:
    line: dict[str, float] = _values(step)
    if wall_time is not None:
        line["wall_time"] = wall_time
    return json.dumps(line) + "\n"


def _write_history(logs: Path, written: float) -> None:
    """Complete logs whose last line was written at `written` (their mtime)."""
    hours = 6 * 3600.0
    times: dict[str, Callable[[int], float | None]] = {
        "done-jsonl": lambda s: written - (HISTORY_STEPS - s),
        "no-times": lambda s: None,
        "skew-ahead": lambda s: written + hours - (HISTORY_STEPS - s),
        "skew-behind": lambda s: written - hours - (HISTORY_STEPS - s),
    }
    for name, at in times.items():
        (logs / name).mkdir()
        path = logs / name / "progress.jsonl"
        path.write_text("".join(_jsonl(s, at(s)) for s in range(HISTORY_STEPS)), encoding="utf-8")
        os.utime(path, (written, written))
    (logs / "zz-long").mkdir()
    path = logs / "zz-long" / "progress.jsonl"
    path.write_text("".join(_jsonl(s, None) for s in range(LONG_STEPS)), encoding="utf-8")
    os.utime(path, (written, written))
    (logs / "done-csv").mkdir()
    path = logs / "done-csv" / "progress.csv"
    keys = [*_values(0), "time/time_elapsed"]
    rows = [",".join(keys)]
    for s in range(HISTORY_STEPS):
        row = {**_values(s), "time/time_elapsed": float(s)}
        rows.append(",".join(str(row[k]) for k in keys))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    os.utime(path, (written, written))


@dataclass
class Tail:
    """`rlvitals tail --follow` as a process, serving /metrics on its own port."""

    logs: Path
    store: Path
    root: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.root / f"tail-{self.starts}.log"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        env.update(
            RLVITALS_STORE=str(self.store),
            RLVITALS_PROMETHEUS_PORT=str(self.port),
            RLVITALS_STALL_AFTER_S=str(STALL_S),
            RLVITALS_ENDED_AFTER_S=str(ENDED_S),
            # this checkout's code, not whatever the virtualenv's editable install points at
            PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        )
        return env

    def start(self) -> None:
        self.starts += 1
        cmd = [sys.executable, "-m", "rlvitals", "tail", "--follow", "--poll", str(POLL_S)]
        cmd.append(str(self.logs))
        # spawn_until_ready takes no env: the child inherits this one
        with mock.patch.dict(os.environ, self.env(), clear=True):
            self.proc = spawn_until_ready(
                cmd, self.log_path, f"http://127.0.0.1:{self.port}/metrics", 200, 30
            )

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as a container stop sends it; the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise
        self.proc = None
        return rc

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def statuses(self) -> dict[str, tuple[str, str]]:
        """`rlvitals_run_status` as the tail serves it now: run -> (status, reason)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            if family.name == "rlvitals_run_status":
                for sample in family.samples:
                    if sample.value == 1:
                        labels = sample.labels
                        out[labels["run"]] = (labels["status"], labels["reason"])
        return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("tail-alerting")
    logs = root / "logs"
    logs.mkdir()
    tail = Tail(logs, root / "store", root)
    prom = PromServer(root / "prom", scrape_config(EXPORTER_JOB, [f"127.0.0.1:{tail.port}"]))
    (root / "prom").mkdir()
    prom.start()
    launched = time.time()
    # written completely 2 stall windows before the tail starts: quiet past the stall window
    # when first read, not past the ended one (the tail takes seconds to start), so only "quiet
    # when first read" makes them history
    written = launched - 2 * STALL_S
    _write_history(logs, written)
    tail.start()
    serving = time.time()
    _wait_up(prom)
    stack: dict[str, Any] = {
        "prom": prom,
        "tail": tail,
        "logs": logs,
        "t0": launched,
        "serving": serving,
        "written": written,
    }
    try:
        yield stack
    finally:
        if tail.proc is not None:
            tail.stop()
        prom.stop()
        hung = stack.get("hung")
        if hung is not None:
            hung.kill()
            hung.wait(10)


def _wait_up(prom: PromServer, timeout: float = 30) -> None:
    """Until Prometheus scraped the tail (before that its target reads down: unhealthy)."""
    deadline = time.monotonic() + timeout
    while [float(r["value"][1]) for r in prom.query(f'up{{job="{EXPORTER_JOB}"}}')] != [1.0]:
        assert time.monotonic() < deadline, "Prometheus never scraped the tail"
        time.sleep(0.2)


def _rules(reg: registry.Registry) -> list[dict[str, Any]]:
    return [r for g in alert_rule_groups(reg, TIMING)["groups"] for r in g["rules"]]


def _poll(
    prom: PromServer,
    rules: list[dict[str, Any]],
    done: Callable[[set[Fired]], bool],
    timeout: float,
    seen: set[Fired],
) -> tuple[set[Fired], bool]:
    """Evaluate every rule once a second until `done(fired)` or the deadline; whatever fired at
    any evaluation is added to `seen`."""
    deadline = time.monotonic() + timeout
    while True:
        fired = _evaluate(prom, rules)
        seen |= fired
        if done(fired):
            return fired, True
        if time.monotonic() >= deadline:
            return fired, False
        time.sleep(0.5)


def _store_statuses(store: Path) -> dict[str, tuple[str | None, RunStatus, str]]:
    """run -> (the recorded end, the status `Lifecycle` reads, its reason), from the store."""
    with Outbox(store / "outbox.sqlite") as outbox:
        return {
            r.run: (r.state, (s := LIFE.status(r.recorded)).status, s.reason) for r in outbox.runs()
        }


def _ever(prom: PromServer, status: str) -> set[str]:
    """Runs scraped with `status` at any time in the last 15 minutes."""
    expr = f'max by (run) (max_over_time(rlvitals_run_status{{status="{status}"}}[15m]))'
    return {r["metric"]["run"] for r in prom.query(expr) if float(r["value"][1]) > 0}


def _scraped(prom: PromServer) -> dict[str, set[str]]:
    """run -> every status it was scraped with in the last 15 minutes."""
    out: dict[str, set[str]] = {}
    for r in prom.query("count by (run, status) (count_over_time(rlvitals_run_status[15m]))"):
        out.setdefault(r["metric"]["run"], set()).add(r["metric"]["status"])
    return out


def _for_runs(fired: set[Fired], runs: tuple[str, ...] | set[str]) -> set[Fired]:
    return {f for f in fired if f.run in runs}


def test_history_never_pages_a_hang_does_and_a_restart_reads_quiet_logs_as_history(
    stack: dict[str, Any], builtin: registry.Registry
) -> None:
    prom, tail, logs = stack["prom"], stack["tail"], stack["logs"]
    rules = _rules(builtin)
    seen: set[Fired] = set()
    timings: dict[str, float] = {}

    # 1. history at the tail's start: every completed log recorded ended at the first poll
    first_pass: set[Fired] = set()
    deadline = time.monotonic() + 60
    while True:
        store = _store_statuses(tail.store) if (tail.store / "outbox.sqlite").exists() else {}
        if all(store.get(n, (None,))[0] == "ended" for n in HISTORY):
            break
        assert time.monotonic() < deadline, (store, tail.output())
        first_pass |= _evaluate(prom, rules)  # while the first pass reads: nothing may fire
        time.sleep(0.2)
    timings["history recorded ended, after /metrics served"] = time.time() - stack["serving"]
    timings["tail start (exec to /metrics)"] = stack["serving"] - stack["t0"]
    for name in HISTORY:
        state, status, reason = store[name]
        assert (state, status) == ("ended", RunStatus.ENDED), (name, store[name])
        assert "already quiet when this reader first read them" in reason, (name, reason)
    with Outbox(tail.store / "outbox.sqlite") as outbox:
        ended_at = {r.run: r.state_at for r in outbox.runs() if r.run in HISTORY}
    quiet = {n: at - stack["written"] for n, at in ended_at.items() if at is not None}
    assert len(quiet) == len(HISTORY), ended_at
    # ended at the first read, between the two windows: as history, not for being quiet long
    assert all(STALL_S <= q < ENDED_S for q in quiet.values()), quiet
    timings["history quiet when ended (max)"] = max(quiet.values())
    assert not set(HISTORY) & set(tail.statuses()), tail.statuses()
    # No run alert. The exporter's own may: the pass keeps the tail busy enough that a scrape
    # can outlast the 1 s timeout of the 1 s interval (its target then reads down for it).
    assert first_pass <= {Fired(UNHEALTHY, "")}, first_pass

    # 2. a job that hangs while logging: its log grows while followed, then stops; the process
    # still runs and holds it open (a thread of this test that closed its file was stalled here
    # before issue 36: the follower, not the trainer, was taken for the job)
    (logs / HANG).mkdir()
    hang_log = logs / HANG / "progress.jsonl"
    hang_log.write_text(_jsonl(0, time.time()) + _jsonl(1, time.time()), encoding="utf-8")
    done = logs.parent / "hang.done"
    writer = subprocess.Popen(
        [sys.executable, "-c", _HANGING, str(hang_log), str(done)],
        stdout=subprocess.DEVNULL,
    )
    stack["hung"] = writer
    # while it writes (and for less than the stall window after), nothing fires for it
    while not done.exists():
        assert writer.poll() is None, "the hanging writer exited"
        fired = _evaluate(prom, rules)
        seen |= fired
        assert not fired, fired
        time.sleep(0.5)
    last_write = [float(done.read_text())]
    stopped = last_write[0]
    assert tail.statuses().get(HANG, ("",))[0] == "live", tail.statuses()
    fired, ok = _poll(
        prom,
        rules,
        lambda f: Fired(STALLED, HANG) in f,
        STALL_S + SCRAPE_DELAY_S,
        seen,
    )
    fired_at = time.time()
    assert ok, f"no stall for {HANG} within {STALL_S + SCRAPE_DELAY_S} s: {fired}\n{tail.output()}"
    timings["stall fired after the last line"] = fired_at - stopped
    # the tail judges by its own reads: never before the stall window passed since the last line
    assert fired_at - stopped >= STALL_S, timings
    assert fired == {Fired(STALLED, HANG)}, fired  # exactly: the history never fires
    status, reason = tail.statuses()[HANG]
    assert status == "stalled" and reason == "", (status, reason)
    assert _ever(prom, "stalled") == {HANG}
    store = _store_statuses(tail.store)
    # the tail holds it, and the process it saw writing its log still runs and holds it open
    assert store[HANG][1] == RunStatus.STALLED, store[HANG]
    assert f"pid {writer.pid}" in store[HANG][2], store[HANG]

    # 3. the exporter restarts (SIGTERM, then the same command)
    first_output = tail.output()
    stopping = time.monotonic()
    assert tail.stop() == 0, tail.output()
    timings["tail stop (SIGTERM to exit)"] = time.monotonic() - stopping
    store = _store_statuses(tail.store)
    # the tail let go of the hang's run without recording an end: nobody holds it, and it has
    # been quiet past the stall window, so it reads ended (derived, not recorded)
    assert store[HANG][0] is None and store[HANG][1] == RunStatus.ENDED, store[HANG]
    assert "no process holds the run" in store[HANG][2], store[HANG]
    # while it is down: its target reads down (exporter unhealthy) and its series go stale,
    # so the hang's stall resolves; no run alert
    gap, ok = _poll(prom, rules, lambda f: Fired(UNHEALTHY, "") in f, SCRAPE_DELAY_S, set())
    assert ok and gap == {Fired(UNHEALTHY, "")}, gap
    restarting = time.monotonic()
    tail.start()
    timings["tail restart (exec to /metrics)"] = time.monotonic() - restarting
    restarted = time.time()
    _wait_up(prom)
    # for two stall windows after the restart, with the new tail scraped: nothing fires
    fired, _ = _poll(prom, rules, lambda f: False, 2 * STALL_S + SCRAPE_DELAY_S, seen)
    assert time.time() - restarted >= 2 * STALL_S
    assert fired == set(), fired
    served = tail.statuses()
    assert not set(served) & {*HISTORY, HANG}, served
    second_output = tail.output()
    # the new tail goes on from the saved positions; it reads nothing new, starts no run
    assert "file(s) go on from where the last reader stopped" in second_output, second_output
    assert "framework" not in second_output, second_output
    store = _store_statuses(tail.store)
    for name in HISTORY:
        assert store[name][0] == "ended" and store[name][1] == RunStatus.ENDED, store[name]
    assert store[HANG][0] is None and store[HANG][1] == RunStatus.ENDED, store[HANG]
    # over the whole test, the restart's gap aside: the stall rule fired for the hang only
    assert seen == {Fired(STALLED, HANG)}, seen
    assert _ever(prom, "stalled") == {HANG}
    print("timings:", {k: round(v, 2) for k, v in timings.items()})
    print("fired in the first pass:", sorted(first_pass, key=str))
    print("fired at any later evaluation:", sorted(seen, key=str))
    print("statuses ever scraped:", {k: sorted(v) for k, v in sorted(_scraped(prom).items())})
    print("first tail:\n" + first_output + "\nsecond tail:\n" + second_output)


# A job that logs a line every 0.3 s for 3 s, says when it wrote its last one (in a file), then
# hangs holding its log open.
_HANGING = textwrap.dedent(
    """
    import json, sys, time
    log = open(sys.argv[1], "a")
    for step in range(2, 12):
        time.sleep(0.3)
        log.write(json.dumps({"time/total_timesteps": 2048 * (step + 1),
                              "rollout/ep_rew_mean": 10.0 + 0.1 * step,
                              "train/approx_kl": 0.01, "train/clip_fraction": 0.1,
                              "train/entropy_loss": -1.2, "wall_time": time.time()}) + "\\n")
        log.flush()
    open(sys.argv[2], "w").write(repr(time.time()))
    time.sleep(3600)
    """
)

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import exporter
    from exporter import ExporterSettings

    store, name, how, repo = sys.argv[1:]
    assert exporter.__file__.startswith(repo), exporter.__file__  # this checkout's code
    settings = ExporterSettings(
        store=Path(store), prometheus_port=None, stall_after_s={stall}, ended_after_s={ended}
    )
    run = exporter.init(name, settings=settings, config={{}})
    for step in range(5):
        run.log(step, {{"policy_kl": 0.01, "clip_fraction": 0.1}})
    assert run.flush(10)
    if how == "crash":
        raise RuntimeError("{crash}")
    run.finish()
    """
).format(stall=STALL_S, ended=ENDED_S, crash=CRASH_TEXT)


def _train(tail: Tail, name: str, how: str) -> subprocess.CompletedProcess[str]:
    env = tail.env()
    del env["RLVITALS_PROMETHEUS_PORT"]  # no endpoint of its own: the sidecar serves the store
    return subprocess.run(
        [sys.executable, "-c", _WRITER, str(tail.store), name, how, str(REPO)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_run_that_raises_in_another_process_fires_the_crash_alert(
    stack: dict[str, Any], builtin: registry.Registry
) -> None:
    prom, tail = stack["prom"], stack["tail"]
    rules = _rules(builtin)
    seen: set[Fired] = set()
    done = _train(tail, "finished-elsewhere", "finish")
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    crashed = _train(tail, "crashy", "crash")
    crashed_at = time.monotonic()
    assert crashed.returncode == 1, crashed.stderr
    assert f"RuntimeError: {CRASH_TEXT}" in crashed.stderr, crashed.stderr  # the hook chains
    reason = f"uncaught RuntimeError: {CRASH_TEXT}"
    assert tail.statuses().get("crashy") == ("crashed", reason), tail.statuses()
    assert "finished-elsewhere" not in tail.statuses(), tail.statuses()
    fired, ok = _poll(
        prom, rules, lambda f: Fired(CRASHED, "crashy") in f, SCRAPE_DELAY_S + 5, seen
    )
    assert ok, f"no crash alert for crashy: {fired}"
    print(
        "crash alert after the process exited:",
        round(time.monotonic() - crashed_at, 2),
        "s; process ran",
        round(crashed_at - started, 2),
        "s",
    )
    assert fired == {Fired(CRASHED, "crashy")}, fired
    expr = next(r for r in rules if r["uid"] == CRASHED)["data"][0]["model"]["expr"]
    labels = [r["metric"] for r in prom.query(expr)]
    assert labels == [{"run": "crashy", "reason": reason}], labels
    # a few more scrapes: the finished run never fires, the crash stays raised
    fired, _ = _poll(prom, rules, lambda f: False, 3, seen)
    assert fired == {Fired(CRASHED, "crashy")}, fired
    assert _for_runs(seen, {"finished-elsewhere"}) == set(), seen
    assert "finished-elsewhere" not in _ever(prom, "stalled") | _ever(prom, "crashed")
    store = _store_statuses(tail.store)
    assert store["finished-elsewhere"][:2] == ("finished", RunStatus.FINISHED), store
    assert store["crashy"][:2] == ("crashed", RunStatus.CRASHED), store
