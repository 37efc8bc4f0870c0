"""Deleting and renaming a long run in the embedded store (`exporter.store.run_admin`).

A store holds two runs of --steps steps and --fields fields each (rows written by the outbox, so
statistics and rollups are kept as in training). Timed, each on a fresh copy of the store:
  delete       `delete_run` as shipped: the statistics deleted whole, the per-row triggers
               dropped while the samples go (and made again, in the same transaction)
  delete_trig  the same rows deleted with the triggers left on (each deleted row then runs the
               statements that take it out of the statistics): what the shipped way avoids
  rename       `rename_run`: an UPDATE of the name in every table
  rename_copy  the samples copied under the new name in key order and the old ones deleted
               (triggers suspended) instead: no faster (1.0-1.3x the time measured), not shipped
Prints seconds and the ratios delete_trig / delete and rename_copy / rename; the other run is
checked untouched.

Run: python bench/bench_run_admin.py [--steps 200000] [--fields 4]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from exporter.schema import NO_RANK
from exporter.store import run_admin, running_stats
from exporter.store.outbox import Outbox


def _fill(path: Path, steps: int, fields: int) -> None:
    with Outbox(path) as box:
        for run in ("big", "other"):
            box.claim_run(run)
            for lo in range(0, steps, 20_000):
                rows = [
                    (run, NO_RANK, s, "policy", "", f"f{j}", float(s % 97), float(s))
                    for s in range(lo, min(steps, lo + 20_000))
                    for j in range(fields)
                ]
                box.write(rows, progress=[(run, NO_RANK, rows[-1][2])])


def _timed(source: Path, work: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "outbox.sqlite"
        shutil.copy(source, path)
        with Outbox(path) as box:
            other = box.stats("other")
            started = time.perf_counter()
            if work == "delete":
                run_admin.delete_run(box, "big")
            elif work == "rename":
                run_admin.rename_run(box, "big", "big-renamed")
            elif work == "rename_copy":
                with box.maintenance() as db:
                    db.execute(
                        "INSERT INTO samples SELECT 'big-renamed', rank, step, measurement, gpu, "
                        "field, value, wall_time, seq, sent FROM samples WHERE run = 'big' "
                        "ORDER BY field, step, rank, measurement, gpu"
                    )
                    running_stats.delete_samples(db, "big")
            else:  # triggers left on
                with box.maintenance() as db:
                    db.execute("DELETE FROM samples WHERE run = 'big'")
            elapsed = time.perf_counter() - started
            assert box.stats("other") == other
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--fields", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "outbox.sqlite"
        _fill(source, args.steps, args.fields)
        rows = args.steps * args.fields
        works = ("delete", "delete_trig", "rename", "rename_copy")
        times = {w: _timed(source, w) for w in works}
    print(f"run of {args.steps:,} steps x {args.fields} fields = {rows:,} samples")
    for work, seconds in times.items():
        print(f"  {work:<12} {seconds:7.2f} s  ({rows / seconds:,.0f} samples/s)")
    print(f"  delete_trig / delete = {times['delete_trig'] / times['delete']:.1f}x")
    print(f"  rename_copy / rename = {times['rename_copy'] / times['rename']:.1f}x")


if __name__ == "__main__":
    main()
