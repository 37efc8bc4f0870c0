"""A long run with the forwarder on: does it keep up, and does everything arrive (issue 39)?

A paced loop logs `--rate` steps/s x `--metrics` registered metrics for `--seconds` (the issue's
soak: 2,000 x 20 for 15 minutes) with InfluxDB 1.x configured (a local Debian influxd). Every 10
s it prints the backlog (rows not yet sent, how long the oldest has waited), the forwarder's rate
as `/metrics` serves them, the store's size and the load average. At the end the run finishes
as a script does (a forwarder with rows left drains them, detached); the report says how long
after the training ended the last row reached InfluxDB, and counts every field's points there
against what was logged: 0 lost is the target.

Run: python bench/bench_soak.py [--seconds 900] [--rate 2000] [--metrics 20]
[--disk-budget-mb 8000]. The machine is
shared: read the figures beside the load average they were measured at.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from local_influx import start_influx
from workload import metric_names, step_values

import exporter
import registry


def _influx_count(server: object, database: str, measurement: str, field: str) -> int:
    rows = server.query(  # type: ignore[attr-defined]
        database, f'SELECT count("{field}") FROM "{measurement}" WHERE "run" = \'soak\''
    )
    return int(rows[0]["count"]) if rows else 0


def _drained(store: Path) -> tuple[str, int] | None:
    """The latest forwarder state in the store and its backlog."""
    db = sqlite3.connect(store / "outbox.sqlite")
    try:
        row = db.execute(
            "SELECT state, backlog FROM forwarders ORDER BY updated DESC LIMIT 1"
        ).fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        db.close()
    return None if row is None else (str(row[0]), int(row[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=900.0)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--metrics", type=int, default=20)
    # the store keeps every row (it is also the embedded store): ~4.7 MB/s at 2,000 x 20, so
    # 15 minutes need about 4.3 GB, past the exporter's 1,024 MB default budget
    parser.add_argument("--disk-budget-mb", type=float, default=8000.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    reg = registry.load()
    names = metric_names(reg, args.metrics)[: args.metrics]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = start_influx(tmp, database="soak")
        if server is None:
            print("influxd is not installed: nothing to measure")
            return
        store = tmp / "store"
        settings = exporter.ExporterSettings(
            store=store,
            influx_url=server.url,
            influx_database="soak",
            disk_budget_mb=args.disk_budget_mb,
        )
        endpoint = exporter.MetricsEndpoint()
        run = exporter.init(
            "soak", registry=reg, settings=settings, framework="sb3", endpoint=endpoint
        )
        print(
            f"{args.rate:,.0f} steps/s x {len(names)} metrics for {args.seconds:,.0f} s, "
            f"forwarder to a local InfluxDB 1.x, {os.cpu_count()} cores\n"
        )
        print(
            f"{'t (s)':>6} {'step':>9} {'backlog':>9} {'oldest (s)':>10} {'sent/s':>9} "
            f"{'store MB':>9}  load average"
        )
        start = time.monotonic()
        step = 0
        next_report = 10.0
        peak_backlog = 0
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= args.seconds:
                break
            due = int(elapsed * args.rate)
            while step < due:
                run.log(step, step_values(names, step))
                step += 1
            if elapsed >= next_report:
                next_report += 10.0
                live = run.live()
                peak_backlog = max(peak_backlog, live.backlog)
                size = sum(f.stat().st_size for f in store.glob("outbox.sqlite*")) / 2**20
                load = os.getloadavg()
                oldest = (
                    "-" if live.backlog_oldest_age is None else f"{live.backlog_oldest_age:.1f}"
                )
                rate = "-" if live.forward_rate is None else f"{live.forward_rate:,.0f}"
                print(
                    f"{elapsed:>6.0f} {step:>9,} {live.backlog:>9,} {oldest:>10} {rate:>9} "
                    f"{size:>9.1f}  {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
                    flush=True,
                )
            time.sleep(0.001)
        logged = step
        ended = time.monotonic()
        stats = run.stats
        run.finish(10.0)
        # drained: by the run itself within finish(), or by its detached forwarder
        state = None
        while time.monotonic() - ended < 1800:
            state = _drained(store)
            if state is not None and (
                state[0] in ("drained", "stopped") or (state[0] == "sending" and state[1] == 0)
            ):
                break
            time.sleep(1.0)
        drained_after = time.monotonic() - ended
        counted = {
            n: _influx_count(
                server,
                "soak",
                reg.metric(reg.resolve(n, "sb3").metric).group,
                reg.resolve(n, "sb3").field,
            )
            for n in names
        }
        server.stop()
    missing = {n: logged - c for n, c in counted.items() if c != logged}
    load = os.getloadavg()
    print(
        f"\nlogged {logged:,} steps x {len(names)} metrics in {args.seconds:,.0f} s "
        f"({logged / args.seconds:,.0f} steps/s); dropped {stats.dropped}, rejected "
        f"{stats.rejected}; peak backlog {peak_backlog:,} rows"
    )
    print(
        f"last row in InfluxDB {drained_after:.1f} s after the training ended (finish() "
        f"included); final forwarder state {state}"
    )
    print(
        "every field complete in InfluxDB"
        if not missing
        else f"points missing in InfluxDB per name: {missing}"
    )
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
