"""What logging costs a training loop, and how soon what it logged is stored.

A training loop of a fixed rate logs 30 registered metrics per step (fresh steps only, the keys an
SB3 PPO run logs plus other registered ids). The same loop runs, in one process and one run of this
script, with each logger in turn:

  none           the loop alone: the baseline every slowdown is measured against
  neighbour      no logger: another process keeps a second core busy meanwhile (what the
                 machine alone does to the loop's wall time; on this project's VM it speeds it)
  floor          dict copy + deque.append (the least any background logger can do)
  rlvitals       exporter.init(...).log() into the embedded store (worker thread meanwhile)
  rlvitals+influx  the same with the forwarder sending to a real local InfluxDB (Debian influxd)
  wandb offline  wandb.log(values, step=...) with WANDB_MODE=offline, if wandb is installed
  SummaryWriter  torch.utils.tensorboard, 30 add_scalar calls per step, if torch is installed

Two kinds of loop, because they stress a background thread differently:
  numpy   each step multiplies float64 matrices (BLAS releases the GIL, like a torch forward pass)
  python  each step runs pure-Python arithmetic (the GIL is held almost all the time: a worker
          thread can only run when the interpreter switches, every 5 ms by default)

For rlvitals a second process polls the outbox (`run_progress`) every 50 ms while the loop runs;
the report gives the largest storage lag seen (how long after being logged a step was stored)
and how many steps were still unstored when the loop ended.

Run: python bench/bench_training_loop.py [--seconds 5] [--rates 100,1000,5000] [--rounds 3]
     [--loops numpy,python] [--loggers floor,rlvitals,...]
Prints one table; read the ratios (slowdown %), not absolute times. Beside each wall-clock
slowdown, "loop CPU" is the change in the loop thread's own CPU time: what the logger's calls
cost it, without GIL waits and host effects. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import multiprocessing as mp
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from local_influx import start_influx
from workload import metric_names as _names
from workload import step_values as _values

import exporter
import registry

_ROOT = Path(__file__).resolve().parents[1]

Logger = tuple[Callable[[int, dict[str, float]], None], Callable[[], None]]


# -- the work of one training step -----------------------------------------------------------


def _numpy_work(units: int) -> Callable[[], None]:
    a = np.random.default_rng(0).standard_normal((64, 64))

    def work() -> None:
        for _ in range(units):
            a.dot(a)

    return work


def _python_work(units: int) -> Callable[[], None]:
    def work() -> None:
        x = 0
        for i in range(units):
            x += i * i % 7

    return work


_WORK = {"numpy": _numpy_work, "python": _python_work}


def _calibrate(kind: str, rate: float) -> Callable[[], None]:
    """Work units for one step of `1/rate` seconds, measured on this machine now: the best of
    several timings (a shared machine makes single ones slow: too little work per step, a
    loop far above the rate asked for), then checked on a second of steps and scaled once."""
    units = 1
    while True:
        work = _WORK[kind](units)
        per = _best_time(work, 20)
        if per > 2e-4 or units > 1 << 24:
            break
        units *= 2
    units = max(1, round(units * (1.0 / rate) / per))
    per = _best_time(_WORK[kind](units), max(20, int(rate / 5)))
    return _WORK[kind](max(1, round(units * (1.0 / rate) / per)))


def _best_time(work: Callable[[], None], calls: int) -> float:
    """Seconds per call, the best of 5 runs of `calls` calls."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


# -- loggers -----------------------------------------------------------------------------------


def _floor() -> Logger:
    dq: collections.deque[object] = collections.deque()
    return (lambda step, values: dq.append((step, dict(values)))), dq.clear


def _summary_writer(tmp: Path) -> Logger | None:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    writer: Any = SummaryWriter(str(tmp / "tb"))

    def log(step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            writer.add_scalar(name, value, step)

    return log, writer.close


def _wandb(tmp: Path) -> Logger | None:
    try:
        import wandb
    except ImportError:
        return None
    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_DIR"] = str(tmp)
    os.environ["WANDB_SILENT"] = "true"
    run = wandb.init(project="bench", mode="offline")
    return (lambda step, values: run.log(values, step=step)), run.finish


def _poll_progress(path: str, run: str, stop: Any, out: Any, ready: Any) -> None:
    """In its own process: (wall time, last stored step) every 50 ms while the loop runs."""
    seen: list[tuple[float, int]] = []
    db: sqlite3.Connection | None = None
    ready.set()
    while not stop.is_set():
        try:
            if db is None:
                db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
            row = db.execute("SELECT max(step) FROM run_progress WHERE run = ?", (run,)).fetchone()
            if row and row[0] is not None:
                seen.append((time.time(), int(row[0])))
        except sqlite3.Error:
            db = None
        time.sleep(0.05)
    out.put(seen)


@dataclass
class _Lag:
    max_lag_s: float
    unstored_at_end: int
    dropped: int


@contextlib.contextmanager
def _rlvitals(
    reg: registry.Registry,
    tmp: Path,
    name: str,
    influx_url: str | None,
    commit_interval: float | None = None,
) -> Iterator[tuple[Logger, Callable[[list[float]], _Lag]]]:
    settings = exporter.ExporterSettings(store=tmp / name, policy="warn")
    if commit_interval is not None:
        settings = settings.replace(commit_interval=commit_interval)
    if influx_url:
        settings = settings.replace(influx_url=influx_url, influx_database="bench")
    run = exporter.init(name, registry=reg, settings=settings, framework="sb3")
    ctx = mp.get_context("spawn")
    stop, out, ready = ctx.Event(), ctx.Queue(), ctx.Event()
    poller = ctx.Process(
        target=_poll_progress,
        args=(str(settings.outbox_path), name, stop, out, ready),
        daemon=True,
    )
    poller.start()
    # Started before the loop, as the neighbour is: the poller's interpreter and the forwarder
    # child's (a flush waits for its first pass) start up once per run, 0.3-0.5 s of a core
    # each, which inside a 3-s loop was most of what the forwarder seemed to cost it.
    ready.wait(30)
    run.flush(60)

    def lag(logged_at: list[float]) -> _Lag:
        stop.set()
        seen: list[tuple[float, int]] = out.get(timeout=30)
        poller.join(10)
        worst = 0.0
        for wall, stored in seen:
            # The oldest step not yet stored at `wall` had waited wall - logged_at[stored + 1].
            nxt = stored + 1
            if nxt < len(logged_at) and logged_at[nxt] <= wall:
                worst = max(worst, wall - logged_at[nxt])
        last = seen[-1][1] if seen else -1
        return _Lag(worst, max(0, len(logged_at) - 1 - last), run.stats.dropped)

    try:
        yield (run.log, lambda: None), lag
    finally:
        run.finish(120)


def _loop(
    work: Callable[[], None],
    log: Callable[[int, dict[str, float]], None] | None,
    payloads: list[dict[str, float]],
    rate: float,
) -> tuple[float, list[float]]:
    """Run len(payloads) steps as fast as the work allows; seconds taken, wall time per step.
    The loop thread's own CPU seconds go to `_LAST_CPU` (what the logger's calls cost it)."""
    logged_at = [0.0] * len(payloads)
    start, cpu = time.perf_counter(), time.thread_time()
    for step, values in enumerate(payloads):
        work()
        if log is not None:
            log(step, values)
        logged_at[step] = time.time()
    _LAST_CPU[0] = time.thread_time() - cpu
    return time.perf_counter() - start, logged_at


_LAST_CPU = [0.0]


def _burn(stop: Any) -> None:
    """A neighbour: one core kept busy by another process that logs nothing."""
    while not stop.is_set():
        for _ in range(100_000):
            pass


@contextlib.contextmanager
def _neighbour() -> Iterator[None]:
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_burn, args=(stop,), daemon=True)
    proc.start()
    time.sleep(0.5)  # started and busy before the loop
    try:
        yield
    finally:
        stop.set()
        proc.join(10)


def _worker_rate(reg: registry.Registry, tmp: Path, names: list[str], steps: int) -> str:
    """How fast the worker stores when the caller logs as fast as it can: steps/s from the
    first log() until flush() says everything is in the outbox."""
    settings = exporter.ExporterSettings(store=tmp / "worker-rate", queue_size=steps + 10)
    run = exporter.init("worker-rate", registry=reg, settings=settings, framework="sb3")
    payloads = [_values(names, s) for s in range(steps)]
    start = time.perf_counter()
    for step, values in enumerate(payloads):
        run.log(step, values)
    flushed = run.flush(600)
    took = time.perf_counter() - start
    stats = run.stats
    run.finish()
    return (
        f"worker alone: {steps / took:,.0f} steps/s x {len(names)} metrics stored "
        f"({steps:,} steps in {took:.2f} s, flushed {flushed}, dropped {stats.dropped})"
    )


def _cpu(values: list[float]) -> str:
    """The loop thread's own CPU time, median change: what the logger's calls cost it,
    without the waits and the host's effects the wall-clock slowdown also holds."""
    return f"loop CPU {_median(values) * 100:+.1f}%"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="loop length per logger")
    parser.add_argument("--rates", default="100,1000,5000", help="target steps/s, comma-separated")
    parser.add_argument("--loops", default="numpy,python", help="numpy and/or python")
    parser.add_argument("--rounds", type=int, default=3, help="baseline/logger pairs per cell")
    parser.add_argument(
        "--loggers",
        default="neighbour,floor,SummaryWriter,wandb offline,rlvitals,rlvitals+influx",
        help="which loggers to measure, comma-separated (neighbour: no logger, a busy process "
        "on another core, to show what the machine alone does to the loop)",
    )
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=None,
        help="the worker's commit interval for rlvitals (default: the exporter's)",
    )
    args = parser.parse_args()
    logging.getLogger("exporter").setLevel(logging.ERROR)
    reg = registry.load()
    names = _names(reg)
    wanted = set(args.loggers.split(","))
    rows: list[tuple[str, float, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = start_influx(tmp)
        worker = _worker_rate(reg, tmp, names, 50_000)
        try:
            for kind in args.loops.split(","):
                for rate in [float(r) for r in args.rates.split(",")]:
                    steps = int(rate * args.seconds)
                    payloads = [_values(names, s) for s in range(steps)]
                    work = _calibrate(kind, rate)
                    base, _ = _loop(work, None, payloads, rate)
                    label = f"{kind} loop, {steps / base:,.0f} steps/s"
                    rows.append((label, 0.0, "none", "", ""))
                    candidates: list[tuple[str, Callable[[], Any]]] = [
                        ("floor", _floor),
                        ("SummaryWriter", lambda: _summary_writer(tmp)),
                        ("wandb offline", lambda: _wandb(tmp)),
                    ]
                    if "neighbour" in wanted:
                        # the machine, not a logger: a busy process on the other core. On this
                        # project's VM it makes the loop faster, not slower (host power states),
                        # so slowdowns of a few percent here are within what the host does
                        near: list[float] = []
                        near_cpu: list[float] = []
                        for _ in range(args.rounds):
                            alone, _ = _loop(work, None, payloads, rate)
                            cpu_alone = _LAST_CPU[0]
                            with _neighbour():
                                took, _ = _loop(work, None, payloads, rate)
                            near.append(took / alone - 1)
                            near_cpu.append(_LAST_CPU[0] / cpu_alone - 1)
                        rows.append((label, _median(near), "neighbour", _cpu(near_cpu), ""))
                    for who, make in candidates:
                        if who not in wanted:
                            continue
                        slowdowns: list[float] = []
                        cpus: list[float] = []
                        for _ in range(args.rounds):
                            # the baseline next to each measurement: a shared machine drifts
                            alone, _ = _loop(work, None, payloads, rate)
                            cpu_alone = _LAST_CPU[0]
                            logger = make()
                            if logger is None:
                                break
                            took, _ = _loop(work, logger[0], payloads, rate)
                            cpus.append(_LAST_CPU[0] / cpu_alone - 1)
                            logger[1]()
                            slowdowns.append(took / alone - 1)
                        if not slowdowns:
                            rows.append((label, float("nan"), who, "not installed", ""))
                            continue
                        rows.append((label, _median(slowdowns), who, _cpu(cpus), ""))
                    targets = [("rlvitals", None)]
                    if server is not None:
                        targets.append(("rlvitals+influx", server.url))
                    for who, url in targets:
                        if who not in wanted:
                            continue
                        slowdowns, lags, unstored, dropped = [], [], [], 0
                        cpus = []
                        for r in range(args.rounds):
                            name = f"{who}-{kind}-{int(rate)}-{r}".replace("+", "-")
                            alone, _ = _loop(work, None, payloads, rate)
                            cpu_alone = _LAST_CPU[0]
                            with _rlvitals(reg, tmp, name, url, args.commit_interval) as (
                                logger,
                                lag,
                            ):
                                took, logged_at = _loop(work, logger[0], payloads, rate)
                                cpus.append(_LAST_CPU[0] / cpu_alone - 1)
                                measured = lag(logged_at)
                            slowdowns.append(took / alone - 1)
                            lags.append(measured.max_lag_s)
                            unstored.append(measured.unstored_at_end)
                            dropped += measured.dropped
                        rows.append(
                            (
                                label,
                                _median(slowdowns),
                                who,
                                f"{_cpu(cpus)}  max lag {max(lags):.2f} s",
                                f"unstored at end <= {max(unstored)}, dropped {dropped}",
                            )
                        )
        finally:
            if server is not None:
                server.stop()
    print(f"{len(names)} registered metrics per step, {args.seconds:g} s per loop")
    print(f"slowdown: median over {args.rounds} rounds of (loop with logger / loop alone - 1)")
    print(worker + "\n")
    print(f"{'loop':<28} {'logger':<16} {'slowdown':>9}  storage")
    for label, slow, who, lag_s, rest in rows:
        shown = "" if who == "none" else f"{slow * 100:8.1f}%"
        print(f"{label:<28} {who:<16} {shown:>9}  {lag_s} {rest}".rstrip())


if __name__ == "__main__":
    main()
