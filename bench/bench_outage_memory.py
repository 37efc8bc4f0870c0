"""Exporter memory while InfluxDB is unreachable for a long stream of steps.

RLVITALS_INFLUX_URL points at a loopback port nobody listens on, so every write fails and the
forwarder backs off while samples pile up in the outbox on disk. The table shows the process's
resident memory (VmRSS) as the outage grows: it should stay flat, bounded by the queue size and
batch size in the settings, not by how long the outage lasts.

Run: python bench/bench_outage_memory.py [--steps N] [--metrics M]
"""

from __future__ import annotations

import argparse
import logging
import socket
import tempfile
import time
from pathlib import Path

import exporter
import registry

_MINI = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mini_registry"


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--samples", type=int, default=6, help="rows in the table")
    args = parser.parse_args()
    logging.getLogger("exporter").setLevel(logging.CRITICAL)
    try:
        reg = registry.load()
    except registry.RegistryError:
        reg = registry.load(_MINI)
    names = [f"custom/metric_{i:02d}" for i in range(args.metrics)]
    every = max(1, args.steps // args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        settings = exporter.ExporterSettings(
            store=Path(tmp), influx_url=_dead_url(), policy="warn", queue_size=10000
        )
        rows: list[tuple[int, float, float, int, int, int]] = []
        start = time.perf_counter()
        baseline = rss_mb()
        with exporter.init("outage", registry=reg, settings=settings) as run:
            for step in range(args.steps):
                run.log(step, {name: step * 1e-3 + i for i, name in enumerate(names)})
                if (step + 1) % every == 0:
                    run.flush(timeout=0.0)
                    while run.live().queue_depth > 0:
                        time.sleep(0.01)
                    time.sleep(0.2)  # let the worker commit the batch it popped
                    live = run.live()
                    store_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 2**20
                    rows.append(
                        (
                            step + 1,
                            rss_mb(),
                            store_mb,
                            live.backlog,
                            live.stats.write_errors,
                            live.stats.dropped,
                        )
                    )
            elapsed = time.perf_counter() - start
            run.finish(timeout=0.5)
    print(
        f"InfluxDB unreachable for the whole run; {args.metrics} metrics per step; "
        f"queue_size {settings.queue_size}, batch_size {settings.batch_size}\n"
    )
    print(
        f"{'steps':>8}  {'RSS MB':>8}  {'outbox MB':>9}  {'backlog rows':>12}  {'write errors':>12}  {'dropped':>7}"
    )
    for step, rss, store, backlog, errors, dropped in rows:
        print(f"{step:>8}  {rss:>8.1f}  {store:>9.1f}  {backlog:>12}  {errors:>12}  {dropped:>7}")
    first, last = rows[0], rows[-1]
    print(
        f"\nRSS before the run {baseline:.1f} MB; RSS growth from the first to the last row: "
        f"{last[1] - first[1]:+.1f} MB while the backlog grew {last[3] / max(1, first[3]):.1f}x "
        f"(ratio last/first RSS = {last[1] / first[1]:.2f}); {elapsed:.0f} s"
    )


if __name__ == "__main__":
    main()
