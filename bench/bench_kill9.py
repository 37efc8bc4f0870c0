"""The kill -9 loss window: how much of what a training process logged is lost when it is killed.

A child process logs steps of 30 metrics through the real exporter (embedded store) and writes the
last step it logged to shared memory after each `log()`; the parent kills it with SIGKILL at a
random moment and compares that step with the last step found in the outbox. Lost = logged but
not stored, in steps and in seconds of logging. Paces: a step every 1 ms (a fast RL loop) and every
0.1 ms (faster than any trainer steps); `cold` kills within half a second of the first log.

Run: python bench/bench_kill9.py [--trials N]. Prints per-trial figures and the median / max.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import exporter
import registry

_MINI = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mini_registry"
NAMES = ["losses/clipfrac", "losses/value_loss"] + [f"custom/metric_{i:02d}" for i in range(28)]


def _child(store: str, pace: float, last: Any, interval: float) -> None:
    logging.disable(logging.WARNING)  # 28 unregistered names: one warning each otherwise
    reg = registry.load(_MINI)
    settings = exporter.ExporterSettings(store=Path(store), policy="warn", commit_interval=interval)
    run = exporter.init("k9", registry=reg, settings=settings)
    values = dict.fromkeys(NAMES, 0.5)
    step = 0
    while True:
        run.log(step, values)
        last.value = step
        step += 1
        if pace:
            time.sleep(pace)


def _trial(pace: float, kill_after: float, interval: float) -> tuple[int, int, float]:
    with tempfile.TemporaryDirectory() as store:
        last = multiprocessing.Value("q", -1, lock=False)
        proc = multiprocessing.Process(target=_child, args=(store, pace, last, interval))
        proc.start()
        started = time.monotonic()
        while last.value < 0 and time.monotonic() - started < 30:
            time.sleep(0.001)
        first_log = time.monotonic()
        time.sleep(kill_after)
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join()
        logged = int(last.value)
        elapsed = time.monotonic() - first_log
        path = Path(store) / "outbox.sqlite"
        stored = -1
        if path.exists():
            with exporter.Outbox(path) as box:
                steps, _ = box.series("k9", "clip_fraction")
                stored = int(steps[-1]) if len(steps) else -1
        lost = logged - stored
        rate = (logged + 1) / max(elapsed, 1e-9)
        return logged + 1, lost, lost / rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    random.seed(7)
    cases = [
        ("a step every 1 ms, killed after 1-3 s", 0.001, (1.0, 3.0)),
        ("a step every 0.1 ms, killed after 1-3 s", 0.0001, (1.0, 3.0)),
        ("a step every 1 ms, cold (killed 0.05-0.5 s after the first log)", 0.001, (0.05, 0.5)),
    ]
    intervals = (exporter.ExporterSettings().commit_interval, 0.01)
    for (label, pace, window), interval in [(c, i) for c in cases for i in intervals]:
        label = f"{label}, RLVITALS_COMMIT_INTERVAL={interval:g}"
        results = [_trial(pace, random.uniform(*window), interval) for _ in range(args.trials)]
        losses = [r[1] for r in results]
        seconds = [r[2] for r in results]
        for logged, lost, sec in results:
            print(f"  {label}: logged {logged:,} steps, lost {lost:,} ({sec * 1000:.0f} ms)")
        print(
            f"{label}: lost steps median {statistics.median(losses):,.0f} max {max(losses):,}; "
            f"seconds median {statistics.median(seconds) * 1000:.0f} ms max {max(seconds) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
