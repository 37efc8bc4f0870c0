"""What logging costs a training loop, measured inside one run: segments that log and segments
that do not, alternating, compared pair by pair.

`bench_training_loop.py` compares a loop alone with the same loop logging, a few seconds apart.
On this project's VM the machine's own speed moves between two such runs by more than the 5 %
being measured (the loop thread's CPU per step changes with it). Here one loop runs for the whole
measurement with the logger open; it logs in every other segment of `--segment` seconds and not
in the others. Each segment's first `--settle` seconds are left out (what the last segment logged
is still being stored and sent), and each logging segment is compared with the mean of the two
quiet segments beside it, so a drift slower than a few seconds cancels out.

  rlvitals         exporter.init(...).log() into the embedded store
  rlvitals+influx  the same with the forwarder sending to a local InfluxDB (Debian influxd)
  floor            dict copy + deque.append: the control (should read about 0 %)

The quiet segments are not "no logger": the exporter's threads and the forwarder child are
alive and idle. What is measured is the cost of logging, which is what a run pays.

Run: python bench/bench_loop_segments.py [--loops python,numpy] [--rate 1000] [--pairs 15]
     [--segment 2.0] [--settle 0.6] [--loggers floor,rlvitals,rlvitals+influx]
Prints, per loop and logger, the median slowdown over the pairs and its quartiles. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import collections
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_training_loop import _calibrate
from local_influx import start_influx
from workload import metric_names, step_values

import exporter
import registry

Log = Callable[[int, dict[str, float]], None]


def _segments(
    work: Callable[[], None], log: Log, names: list[str], args: argparse.Namespace
) -> list[float]:
    """Seconds per step of each segment's settled part, logging in the odd ones."""
    per_step: list[float] = []
    step = 0
    for segment in range(2 * args.pairs + 1):
        logging_now = segment % 2 == 1
        start = time.perf_counter()
        settled_at = start + args.settle
        end = start + args.segment
        counted, counted_from = 0, 0.0
        while True:
            work()
            if logging_now:
                log(step, step_values(names, step))
            step += 1
            now = time.perf_counter()
            if now >= settled_at:
                if counted == 0:
                    counted_from = now
                counted += 1
            if now >= end:
                break
        per_step.append((now - counted_from) / max(1, counted - 1))
    return per_step


def _floor(kept: collections.deque[object]) -> Log:
    """The control: a dict copy and a deque append (the least any logger can do)."""

    def log(step: int, values: dict[str, float]) -> None:
        kept.append((step, dict(values)))

    return log


def _slowdowns(per_step: list[float]) -> list[float]:
    """Each logging segment against the mean of the quiet ones on either side, in %."""
    return [
        100 * (per_step[i] / ((per_step[i - 1] + per_step[i + 1]) / 2) - 1)
        for i in range(1, len(per_step) - 1, 2)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="python,numpy")
    parser.add_argument("--rate", type=float, default=1000.0, help="target steps/s of the loop")
    parser.add_argument("--pairs", type=int, default=15, help="logging segments per logger")
    parser.add_argument("--segment", type=float, default=2.0, help="seconds a segment")
    parser.add_argument("--settle", type=float, default=0.6, help="seconds left out of each")
    parser.add_argument("--loggers", default="floor,rlvitals,rlvitals+influx")
    args = parser.parse_args()
    logging.getLogger("exporter").setLevel(logging.ERROR)
    reg = registry.load()
    names = metric_names(reg, 30)[:30]
    print(
        f"{len(names)} registered metrics per step; {args.pairs} logging segments of "
        f"{args.segment:g} s (first {args.settle:g} s left out), each against the quiet ones "
        "beside it\n"
    )
    print(f"{'loop':<8} {'logger':<16} {'slowdown':>9}  {'quartiles':>15}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = start_influx(tmp)
        try:
            for kind in args.loops.split(","):
                work = _calibrate(kind, args.rate)
                for who in args.loggers.split(","):
                    store = tmp / f"{kind}-{who.replace('+', '-')}"
                    run = None
                    log: Log
                    if who == "floor":
                        log = _floor(collections.deque())
                    else:
                        settings = exporter.ExporterSettings(store=store, policy="warn")
                        if who == "rlvitals+influx":
                            if server is None:
                                continue
                            settings = settings.replace(
                                influx_url=server.url, influx_database="bench"
                            )
                        run = exporter.init(
                            store.name, registry=reg, settings=settings, framework="sb3"
                        )
                        run.flush(60)  # the forwarder child started and ready
                        log = run.log
                    per_step = _segments(work, log, names, args)
                    if run is not None:
                        run.finish()
                    found = _slowdowns(per_step)
                    q = statistics.quantiles(found, n=4)
                    print(
                        f"{kind:<8} {who:<16} {statistics.median(found):>8.1f}%  "
                        f"{q[0]:>6.1f} .. {q[2]:>5.1f}%",
                        flush=True,
                    )
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
