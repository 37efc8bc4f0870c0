"""What rejecting costs the worker: its store rate for in-range values against mixes with values
outside the registry's physical limits, non-finite values and malformed ones (issue 39).

A loop logs N steps x 10 values as fast as it can (the queue holds them all), then `flush()` waits
until the worker stored, rejected or counted every one; the rate is steps over that time. The
mixes put a bad value in about a quarter of the steps, as the issue's loop did. The in-range row
is what a user gets anyway, so each mix is reported as a ratio of it.

Run: python bench/bench_rejections.py [--steps N] [--rounds R]. Best of R rounds per row.
"""

from __future__ import annotations

import argparse
import logging
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workload import metric_names

import exporter
import registry

Mix = Callable[[int, dict[str, float]], dict[str, object]]


def _limited(reg: registry.Registry, names: list[str]) -> list[tuple[str, float]]:
    """Names among `names` with a lower physical limit, and a value below it."""
    out = []
    for name in names:
        limits = reg.metric(reg.resolve(name, "sb3").metric).limits
        if limits.min is not None:
            # the logged value whose canonical value is below the limit (transforms aside:
            # the names chosen here have none or a positive scale)
            out.append((name, limits.min - 1.0))
    return out


def _rate(reg: registry.Registry, names: list[str], steps: int, mix: Mix) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = exporter.ExporterSettings(store=Path(tmp), queue_size=steps + 10)
        run = exporter.init("bench", registry=reg, settings=settings, framework="sb3")
        payloads = [mix(s, dict.fromkeys(names, 0.5)) for s in range(steps)]
        start = time.perf_counter()
        for step, values in enumerate(payloads):
            run.log(step, values)
        ok = run.flush(600)
        elapsed = time.perf_counter() - start
        stats = run.stats
        run.finish()
    counts = (
        f"accepted {stats.accepted}, rejected {stats.rejected}, "
        f"non-finite {stats.nonfinite_total}, dropped {stats.dropped}"
    )
    return (steps / elapsed if ok else math.nan), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("exporter").setLevel(logging.CRITICAL)
    reg = registry.load()
    names = metric_names(reg)[:10]
    limited = _limited(reg, names)

    def in_range(step: int, values: dict[str, float]) -> dict[str, object]:
        return dict(values)

    def out_of_range(step: int, values: dict[str, float]) -> dict[str, object]:
        out: dict[str, object] = dict(values)
        if step % 4 == 0:
            name, below = limited[step // 4 % len(limited)]
            out[name] = below
        return out

    def out_of_range_many(step: int, values: dict[str, float]) -> dict[str, object]:
        out: dict[str, object] = dict(values)
        for k, (name, below) in enumerate(limited):
            if (step + k) % 4 == 0:
                out[name] = below
        return out

    def nonfinite(step: int, values: dict[str, float]) -> dict[str, object]:
        out: dict[str, object] = dict(values)
        if step % 4 == 0:
            out[names[step // 4 % len(names)]] = math.nan
        return out

    def malformed(step: int, values: dict[str, float]) -> dict[str, object]:
        out: dict[str, object] = dict(values)
        if step % 4 == 0:
            out[names[step // 4 % len(names)]] = "n/a"
        return out

    mixes: list[tuple[str, Mix]] = [
        ("in range (baseline)", in_range),
        ("1 value of 10 out of range in 1/4 of steps", out_of_range),
        (f"each of {len(limited)} limited names out of range in 1/4 of steps", out_of_range_many),
        ("1 value NaN in 1/4 of steps", nonfinite),
        ("1 value a string in 1/4 of steps", malformed),
    ]
    rows = []
    for label, mix in mixes:
        best, counts = 0.0, ""
        for _ in range(args.rounds):
            rate, counts = _rate(reg, names, args.steps, mix)
            best = max(best, rate)
        rows.append((label, best, counts))
    base = rows[0][1]
    width = max(len(label) for label, _, _ in rows)
    print(f"{args.steps} steps x {len(names)} values, worker store rate, best of {args.rounds}\n")
    print(f"{'values logged':<{width}}  {'steps/s':>9}  {'x in range':>10}  counts")
    for label, rate, counts in rows:
        print(f"{label:<{width}}  {rate:>9.0f}  {rate / base:>10.2f}  {counts}")


if __name__ == "__main__":
    main()
