"""How fast the forwarder sends a store's rows to InfluxDB 1.x, against what a user would do
instead and against how fast the worker fills the store (issue 39: the forwarder must keep up).

One process, one local InfluxDB (Debian's influxd), one run of this script:

  worker     `Run.log` as fast as the caller can, until `flush(sent=False)`: rows/s into the store
  forwarder  a store holding those rows, then the forwarder (its child process, as a training run
             starts it) until everything is sent: rows/s to InfluxDB, rollups included, from
             the child ready (its sending rate: what keeping up with the worker asks of it)
  fwd + start  the same, counting the child's start too (a new Python importing the exporter,
             paid once per run while the training starts; printed on its own below)
  raw POST   the same rows rendered to line protocol once, beforehand, then POSTed to /write in
             batches of the same size by this process (urllib): the least any sender can cost

Run: python bench/bench_forwarder.py [--steps N] [--metrics M] [--rounds R] [--batch ROWS].
Best of R rounds.
Read the ratios; the machine is shared, so the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
import urllib.request
from pathlib import Path

from local_influx import start_influx
from workload import metric_names, step_values

import exporter
import registry
from exporter.influx.forward_process import ForwarderProcess
from exporter.influx.forwarder import LineRenderer
from exporter.influx.lineprotocol import join_lines
from exporter.store.outbox import Outbox


def _fill(reg: registry.Registry, store: Path, names: list[str], steps: int) -> tuple[int, float]:
    """Rows stored and the worker's rate (rows/s) storing them."""
    settings = exporter.ExporterSettings(store=store, queue_size=steps + 10)
    run = exporter.init("bench", registry=reg, settings=settings, framework="sb3")
    payloads = [step_values(names, s) for s in range(steps)]
    start = time.perf_counter()
    for step, values in enumerate(payloads):
        run.log(step, values)
    assert run.flush(600)
    took = time.perf_counter() - start
    run.finish()
    box = Outbox(settings.outbox_path)
    rows = box.backlog()
    box.close()
    return rows, rows / took


def _forward(
    store: Path, url: str, database: str, rows: int, batch: int
) -> tuple[float, float, float]:
    """The forwarder child sending a store's backlog (until flush says all is sent): rows/s from
    the child ready, rows/s from its start, and the seconds it took to be ready (a new Python
    importing the exporter: paid once, when a run starts, while the training starts too)."""
    settings = exporter.ExporterSettings(
        store=store, influx_url=url, influx_database=database, batch_size=batch
    )
    counters = exporter.counts.RunCounters()
    child = ForwarderProcess(settings, counters)
    start = time.perf_counter()
    child.start()
    while not child.ready:
        time.sleep(0.001)
    ready = time.perf_counter()
    ok = child.flush(900)
    done = time.perf_counter()
    child.stop(30)
    assert ok, "the forwarder did not finish"
    return rows / (done - ready), rows / (done - start), ready - start


def _raw_post(store: Path, url: str, database: str, batch: int) -> float:
    """rows/s of POSTing the store's rows, rendered beforehand, in `batch`-row requests."""
    box = Outbox(store / "outbox.sqlite")
    bodies: list[bytes] = []
    count = 0
    renderer = LineRenderer()
    projects = box.projects()
    while True:
        rows, seq = box.pending_rows(batch)
        if not rows:
            break
        bodies.append(join_lines(renderer.render(rows, (), projects)))
        count += len(rows)
        box.mark_ranges(seq, None, state=1)
    box.close()
    target = f"{url}/write?db={database}&precision=s"
    start = time.perf_counter()
    for body in bodies:
        request = urllib.request.Request(target, data=body, method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--batch", type=int, default=None, help="rows a request (default: the exporter's)"
    )
    args = parser.parse_args()
    logging.getLogger("exporter").setLevel(logging.ERROR)
    reg = registry.load()
    names = metric_names(reg, args.metrics)[: args.metrics]
    batch = args.batch or exporter.ExporterSettings().batch_size
    best = {"worker": 0.0, "forwarder": 0.0, "fwd + start": 0.0, "raw POST": 0.0}
    startups: list[float] = []
    rows = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = start_influx(tmp)
        if server is None:
            print("influxd is not installed: nothing to measure")
            return
        try:
            for r in range(args.rounds):
                for who in ("forwarder", "raw POST"):
                    store = tmp / f"{who.replace(' ', '-')}-{r}"
                    rows, worker = _fill(reg, store, names, args.steps)
                    best["worker"] = max(best["worker"], worker)
                    database = f"b_{who.replace(' ', '_')}_{r}"
                    server.post_query(f'CREATE DATABASE "{database}"')
                    if who == "forwarder":
                        rate, with_start, startup = _forward(
                            store, server.url, database, rows, batch
                        )
                        best["fwd + start"] = max(best["fwd + start"], with_start)
                        startups.append(startup)
                    else:
                        rate = _raw_post(store, server.url, database, batch)
                    best[who] = max(best[who], rate)
        finally:
            server.stop()
    load = os.getloadavg()
    print(
        f"{args.steps:,} steps x {len(names)} metrics = {rows:,} rows per round (with the "
        f"derived ones); batches of {batch:,} rows; best of {args.rounds}; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores\n"
    )
    print(f"{'who':<11} {'rows/s':>10}  {'x raw POST':>10}  {'x worker':>9}")
    for who, rate in best.items():
        print(
            f"{who:<11} {rate:>10,.0f}  {rate / best['raw POST']:>10.2f}  "
            f"{rate / best['worker']:>9.2f}"
        )
    print(f"\nthe forwarder child ready {min(startups):.2f}-{max(startups):.2f} s after its start")


if __name__ == "__main__":
    main()
