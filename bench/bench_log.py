"""Caller-side cost of `Run.log()` with 30 metrics per step, against the alternatives available here.

Compared (whatever is installed is used, and the table says which):
  floor        copy the dict and put it on a queue.Queue (the least any background logger can do);
               also with a deque, which is what Run.log uses (bounded by a length check)
  rlvitals     exporter Run.log() (policy warn, embedded store; the worker thread runs meanwhile)
  SummaryWriter  30 add_scalar calls: torch.utils.tensorboard, else tensorboardX, else
               tensorboard's own EventFileWriter with one Summary proto per scalar
  wandb        wandb.log in offline mode, if wandb is installed

Run: python bench/bench_log.py [--steps N]. Prints microseconds per step and ratios, one run.
"""

from __future__ import annotations

import argparse
import collections
import queue
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_influx import start_influx
from workload import metric_names, step_values

import exporter
import registry


def _time(per_step: Callable[[int, dict[str, float]], None], steps: int, names: list[str]) -> float:
    """Best of three passes, in microseconds per step (values are built outside the timing).
    Each pass logs steps the previous ones did not: a logger that ignores or overwrites a
    step it has seen (wandb; rlvitals' resume path) would otherwise be timed on that path."""
    payloads = [step_values(names, s) for s in range(steps)]
    best = float("inf")
    for rep in range(3):
        start = time.perf_counter()
        for step, values in enumerate(payloads, start=rep * steps):
            per_step(step, values)
        best = min(best, (time.perf_counter() - start) / steps * 1e6)
    return best


def _summary_writer(
    logdir: str,
) -> tuple[str, Callable[[int, dict[str, float]], None], Callable[[], None]]:
    try:
        from torch.utils.tensorboard import SummaryWriter

        writer: Any = SummaryWriter(logdir)
        label = "torch.utils.tensorboard SummaryWriter"
    except ImportError:
        try:
            from tensorboardX import SummaryWriter

            writer = SummaryWriter(logdir)
            label = "tensorboardX SummaryWriter"
        except ImportError:
            return _tensorboard_event_writer(logdir)

    def log(step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            writer.add_scalar(name, value, step)

    return label, log, writer.close


def _tensorboard_event_writer(
    logdir: str,
) -> tuple[str, Callable[[int, dict[str, float]], None], Callable[[], None]]:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(logdir)

    def log(step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            summary = Summary(value=[Summary.Value(tag=name, simple_value=value)])
            writer.add_event(Event(summary=summary, step=step, wall_time=time.time()))

    return "tensorboard EventFileWriter (one Summary per scalar)", log, writer.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args()
    steps: int = args.steps
    reg = registry.load()
    names = metric_names(reg)
    rows: list[tuple[str, float]] = []

    q: queue.Queue[object] = queue.Queue(maxsize=10 * steps)

    def floor(step: int, values: dict[str, float]) -> None:
        q.put_nowait((step, dict(values)))

    rows.append(("floor: dict copy + queue.Queue.put_nowait", _time(floor, steps, names)))
    dq: collections.deque[object] = collections.deque()

    def floor_deque(step: int, values: dict[str, float]) -> None:
        dq.append((step, dict(values)))

    rows.append(("floor: dict copy + deque.append", _time(floor_deque, steps, names)))

    with tempfile.TemporaryDirectory() as tmp:
        settings = exporter.ExporterSettings(
            store=Path(tmp) / "store", policy="warn", queue_size=10 * steps
        )
        import logging

        logging.getLogger("exporter").setLevel(logging.ERROR)
        with exporter.init("bench", registry=reg, settings=settings, framework="sb3") as run:
            rows.append(("rlvitals Run.log (warn policy)", _time(run.log, steps, names)))
            run.flush(120)
            stats = run.stats
        server = start_influx(Path(tmp))
        if server is not None:
            # the forwarder sends meanwhile (in its own process): what log() costs then
            sending = settings.replace(
                store=Path(tmp) / "store-influx", influx_url=server.url, influx_database="bench"
            )
            with exporter.init("bench", registry=reg, settings=sending, framework="sb3") as run:
                rows.append(
                    ("rlvitals Run.log, forwarding to InfluxDB", _time(run.log, steps, names))
                )
                run.flush(300)
            server.stop()
        label, tb_log, tb_close = _summary_writer(str(Path(tmp) / "tb"))
        rows.append((f"{label}: 30 x add_scalar", _time(tb_log, max(200, steps // 20), names)))
        tb_close()
        try:
            import os

            import wandb

            os.environ["WANDB_MODE"] = "offline"
            os.environ["WANDB_DIR"] = tmp
            wrun = wandb.init(project="bench", mode="offline")
            rows.append(
                (
                    "wandb.log (offline)",
                    _time(lambda s, v: wrun.log(v, step=s), max(200, steps // 20), names),
                )
            )
            wrun.finish()
        except ImportError:
            rows.append(("wandb.log (offline): wandb not installed", float("nan")))

    ours = rows[2][1]
    width = max(len(name) for name, _ in rows)
    print(
        f"{steps} steps x {len(names)} registered metrics per step; best of 3; microseconds per step\n"
    )
    print(f"{'method':<{width}}  {'us/step':>10}  {'x rlvitals':>10}")
    for name, us in rows:
        print(f"{name:<{width}}  {us:>10.2f}  {us / ours:>10.2f}")
    print(
        f"\nrlvitals stored {stats.accepted + stats.unregistered} samples "
        f"(accepted {stats.accepted}, unregistered {stats.unregistered}, dropped {stats.dropped})"
    )
    print(
        f"goals: >=100x cheaper than SummaryWriter, within 10x of the floor "
        f"(rlvitals / floor = {ours / rows[0][1]:.1f}x)"
    )


if __name__ == "__main__":
    main()
