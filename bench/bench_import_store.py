"""Import throughput into the embedded store: `rlvitals import` of a long event file, against the
way it went before (each step a `Run.log` call) and against the store alone.

    python bench/bench_import_store.py [--steps 1000000] [--rounds 3]

The event file is `bench_serve_logdir.py`'s big run (2 tags every step, one event per scalar as
SB3's SummaryWriter output writes it), made once under bench/results/import-store-cache/. Each
round runs, each in a process of its own on a new store:

  columns   `rlvitals import FILE --run big --store S` as it is: the reader's steps go to the run
            as columns (`Run.log_block`), translated and stored as columnar blocks
  one by one  the same command with `Run.log_block` replaced by a `Run.log` call per step (what
            an import did before; the worker still groups calls of the same names into blocks)
  store     the same samples (the 2 values and the derived `nonfinite_count` of every step) written
            straight with `Outbox.write` as 2048-step blocks: no reading, no translation, no
            queue, what the store itself costs (its floor)

and prints each one's time (the median of the rounds), the values read per second and the ratios,
with the CPU seconds the process used. A shared 2-core machine varies by tens of percent from one
run to the next: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_serve_logdir import BIG_TAGS, write_big_run  # noqa: E402

_ONE_BY_ONE = """
import sys
from exporter import run
def log_block(self, block):
    for record in block.records():
        self.log(record.step, record.values, wall_time=record.wall_time)
run.Run.log_block = log_block
from rlvitals.cli import main
sys.exit(main(sys.argv[1:]))
"""

_STORE = """
import sys
import numpy as np
from exporter.schema import SampleBlock
from exporter.store.outbox import Outbox
steps, store = int(sys.argv[1]), sys.argv[2]
columns = [("reward", "", "episodic_return"), ("policy", "", "policy_kl"),
           ("health", "", "nonfinite_count")]
box = Outbox(store + "/outbox.sqlite")
for lo in range(0, steps, 2048):
    at = np.arange(lo, min(steps, lo + 2048))
    value = (0.5 + (at % 1000) * 1e-4).astype(np.float32).astype(np.float64)
    values = np.stack([value, value, np.zeros_like(value)], axis=1)
    block = SampleBlock("big", -1, at.tolist(), (1.7e9 + at / 1000).tolist(), columns, values)
    assert box.write([], blocks=[(0, block)], progress=[("big", -1, int(at[-1]))])
box.close()
"""


def make_log(folder: Path, steps: int) -> Path:
    """The big run of bench_serve_logdir.py, `steps` long (made once)."""
    path = folder / "events.out.tfevents.1700000000.bench.1.0"
    done = folder / f"done-{steps}"
    if done.exists():
        return path
    write_big_run(folder, steps)
    done.write_text("")
    return path


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env["PYTHONPATH"] = str(ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    log = make_log(ROOT / "bench" / "results" / "import-store-cache", args.steps)
    values = args.steps * len(BIG_TAGS)
    cli = [sys.executable, "-m", "rlvitals", "import", str(log), "--run", "big", "--store"]
    ways = {
        "columns": lambda store: [*cli, store],
        "one by one": lambda store: [sys.executable, "-c", _ONE_BY_ONE, *cli[3:], store],
        "store": lambda store: [sys.executable, "-c", _STORE, str(args.steps), store],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for r in range(args.rounds):
        for name, argv in ways.items():
            with tempfile.TemporaryDirectory() as tmp:
                times[name].append(_timed(argv(tmp)))
            wall, cpu = times[name][-1]
            print(f"round {r + 1} {name:11} {wall:6.1f} s (cpu {cpu:.1f} s)", flush=True)
    print(f"\n{args.steps:,} steps x {len(BIG_TAGS)} tags, medians of {args.rounds} rounds")
    print(f"{'':12}{'time':>9}{'cpu':>9}{'values/s':>12}{'/ columns':>11}")
    ours = statistics.median(w for w, _ in times["columns"])
    for name, got in times.items():
        wall = statistics.median(w for w, _ in got)
        cpu = statistics.median(c for _, c in got)
        print(f"{name:12}{wall:7.1f} s{cpu:7.1f} s{values / wall:12,.0f}{wall / ours:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
