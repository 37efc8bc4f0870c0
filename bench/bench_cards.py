"""Diagnosis cards for 30 metrics over a 1,000,000-step run: embedded store and InfluxDB.

For each store the same run (every metric logged at every step) is loaded once, then timed:
  card       GET /api/cards?run=R&metric=M through the Flask app (in-process test client:
             request parsing, run check, history fetch, diagnosis, JSON), 30 metrics x rounds
  fetch      the history fetch alone: the windows that card reads (metric + related + rule
             inputs, last RLVITALS_DATASOURCE_CARD_WINDOW points each) and the run config
  all        GET /api/cards?run=R (every core metric in one request), --all-requests times in a
             row: its p95 is read from that many (of 5, the p95 is the slowest)
  series     GET /api/series?run=R&metric=M&points=1000 (downsampled in the database)
  full       pulling one metric's whole history into Python (what the datasource never does)
Prints p50/p95 in milliseconds and card/fetch ratios, measured in one run. Goal: card p95 under
200 ms on the embedded store.

InfluxDB is measured twice in the same server: the run as raw points POSTed without rollups (what
an older exporter left: the datasource scans raw points) and the same run imported through
`rlvitals import`'s writer (`DirectRun`), which keeps step rollups in InfluxDB
(`exporter.influx.rollups`). "cold" is the first request of each kind on a new datasource (a
fresh process: nothing folded in memory), "warm" every later one. The writer's cost of keeping
rollups is measured as an A/B import of --writer-steps steps into two fresh databases (rollups
on, rollups off) and the same through a training process's outbox and forwarder.

Run: python bench/bench_cards.py [--steps 1000000] [--metrics 30] [--rounds 5] [--data DIR]
     [--all-requests 30] [--no-influx] [--writer-steps 100000]. The loaded stores are kept under --data and reused.
"""

from __future__ import annotations

import argparse
import math
import shutil
import socket
import sqlite3
import statistics
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import exporter
import registry
from exporter.config import ExporterSettings
from exporter.influx.direct import DirectRun
from exporter.influx.rollups import InfluxRollups
from exporter.schema import NO_RANK
from exporter.store.outbox import Outbox
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.cards import card_inputs
from grafana.datasource.history import HistoryStore, open_history

RUN = "bench"
DB = "rlvitals_bench"
DB_ROLLUPS = "rlvitals_bench_rollups"
CONFIG = {"clip_epsilon": 0.2, "n_actions": 4}
_CHUNK = 20_000


def _metrics(reg: registry.Registry, count: int) -> list[registry.Metric]:
    chosen = [m for m in reg.core_metrics() if m.pattern is None]
    chosen += [m for m in reg.metrics if not m.core and m.pattern is None]
    return chosen[:count]


def _values(index: int, start: int, stop: int) -> np.ndarray:
    rng = np.random.default_rng(index * 1_000_003 + start)
    steps = np.arange(start, stop, dtype=np.float64)
    # inside every metric's physical limits ([0, 1] for fractions): none is refused on import
    level = 0.5 + 0.3 * np.sin(steps / (50_000 + 7_000 * index) + index)
    return level + rng.normal(0.0, 0.03, steps.size)


def _load_embedded(path: Path, metrics: list[registry.Metric], steps: int) -> None:
    if path.exists():
        t = time.perf_counter()
        Outbox(path).close()  # a file from before the running statistics gets them here, once
        print(f"embedded: store opened by the exporter in {time.perf_counter() - t:.1f} s")
        return
    tmp = path.with_suffix(".loading")
    if tmp.exists():
        tmp.unlink()
    Outbox(tmp).close()  # the exporter's schema
    db = sqlite3.connect(tmp, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    db.execute(
        "INSERT INTO runs (run, project, config, framework, created) VALUES (?, NULL, ?, NULL, 0)",
        (RUN, '{"clip_epsilon": 0.2, "n_actions": 4}'),
    )
    sql = (
        "INSERT INTO samples (run, rank, step, measurement, gpu, field, value, wall_time, seq, sent) "
        "VALUES (?, ?, ?, ?, '', ?, ?, ?, 1, 1)"
    )
    for start in range(0, steps, _CHUNK):
        stop = min(steps, start + _CHUNK)
        db.execute("BEGIN")
        for i, m in enumerate(metrics):
            vals = _values(i, start, stop)
            db.executemany(
                sql,
                (
                    (RUN, NO_RANK, s, m.group, m.id, float(v), float(s))
                    for s, v in zip(range(start, stop), vals.tolist(), strict=True)
                ),
            )
        db.execute("COMMIT")
        print(f"\rembedded: {stop:,}/{steps:,} steps", end="", flush=True)
    db.execute(
        "INSERT INTO events (run, rank, step, kind, text, fields, wall_time, seq, sent) "
        "VALUES (?, -1, 1000, 'checkpoint', 'saved', '{}', 0, 1, 1)",
        (RUN,),
    )
    db.close()
    t = time.perf_counter()
    with Outbox(tmp) as box:  # rows written without the outbox: sum them once
        box.rebuild_statistics()
    print(f"\nembedded: running statistics built in {time.perf_counter() - t:.1f} s")
    tmp.rename(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _influxd(root: Path) -> Iterator[str]:
    port, rpc = _free_port(), _free_port()
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "influxdb.conf"
    conf.write_text(
        f'reporting-disabled = true\nbind-address = "127.0.0.1:{rpc}"\n'
        f'[meta]\n  dir = "{root}/meta"\n  logging-enabled = false\n'
        f'[data]\n  dir = "{root}/data"\n  wal-dir = "{root}/wal"\n  query-log-enabled = false\n'
        f'[http]\n  bind-address = "127.0.0.1:{port}"\n  log-enabled = false\n'
        '[logging]\n  level = "warn"\n[monitor]\n  store-enabled = false\n'
    )
    with (root / "influxd.log").open("ab") as log:
        proc = subprocess.Popen(["influxd", "-config", str(conf)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ping", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"influxd did not start; see {root}/influxd.log") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def _post(url: str, data: bytes) -> None:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=120) as r:
        r.read()


def _load_influx(url: str, marker: Path, metrics: list[registry.Metric], steps: int) -> None:
    if marker.exists():
        return
    _post(f"{url}/query", urllib.parse.urlencode({"q": f'CREATE DATABASE "{DB}"'}).encode())
    write = f"{url}/write?db={DB}&precision=s"
    groups = sorted({m.group for m in metrics})
    for start in range(0, steps, 5_000):
        stop = min(steps, start + 5_000)
        cols = {m.id: _values(i, start, stop).tolist() for i, m in enumerate(metrics)}
        lines = []
        for g in groups:
            ids = [m.id for m in metrics if m.group == g]
            for k, s in enumerate(range(start, stop)):
                fields = ",".join(f"{f}={cols[f][k]!r}" for f in ids)
                lines.append(f"{g},run={RUN} {fields},step={s}i,wall_time={s}.0 {s}")
        _post(write, "\n".join(lines).encode())
        print(f"\rinfluxdb: {stop:,}/{steps:,} steps", end="", flush=True)
    cfg = '{\\"clip_epsilon\\": 0.2, \\"n_actions\\": 4}'
    _post(write, f'run_config,run={RUN} config_json="{cfg}",step=0i 0'.encode())
    _post(write, f'events,run={RUN},kind=checkpoint text="saved",step=1000i 1000'.encode())
    marker.write_text("loaded\n")
    print()


def _import(
    url: str,
    database: str,
    store: Path,
    reg: registry.Registry,
    metrics: list[registry.Metric],
    steps: int,
    *,
    rollups: bool = True,
    run: str = RUN,
) -> tuple[float, float]:
    """`rlvitals import`'s writer over the run; (seconds, seconds spent keeping rollups)."""
    _post(f"{url}/query", urllib.parse.urlencode({"q": f'CREATE DATABASE "{database}"'}).encode())
    settings = ExporterSettings(store=store, influx_url=url, influx_database=database)
    spent = [0.0]
    original = InfluxRollups.sent

    def sent(self: InfluxRollups, *args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        original(self, *args, **kwargs)
        spent[0] += time.perf_counter() - t

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(InfluxRollups, "sent", sent))
        if not rollups:  # the same import with the rollups switched off
            stack.enter_context(mock.patch("exporter.influx.direct.make_rollups", lambda *_: None))
        t = time.perf_counter()
        direct = DirectRun(
            run, project=None, registry=reg, settings=settings, framework=None, config=CONFIG
        )
        ids = [m.id for m in metrics]
        for start in range(0, steps, 5_000):
            stop = min(steps, start + 5_000)
            cols = [_values(i, start, stop).tolist() for i in range(len(ids))]
            for k, step in enumerate(range(start, stop)):
                direct.log(step, {f: c[k] for f, c in zip(ids, cols, strict=True)}, wall_time=step)
            if run == RUN:
                print(f"\rinfluxdb (import): {stop:,}/{steps:,} steps", end="", flush=True)
        if not direct.flush(600):
            raise RuntimeError(f"import into {database} did not finish: {direct.failure}")
        direct.finish(600)
        return time.perf_counter() - t, spent[0]


def _forward(
    url: str,
    database: str,
    store: Path,
    reg: registry.Registry,
    metrics: list[registry.Metric],
    steps: int,
    *,
    rollups: bool,
) -> float:
    """A training process logging the run through its outbox; seconds until InfluxDB has it."""
    _post(f"{url}/query", urllib.parse.urlencode({"q": f'CREATE DATABASE "{database}"'}).encode())
    settings = ExporterSettings(store=store, influx_url=url, influx_database=database)
    with ExitStack() as stack:
        if not rollups:
            stack.enter_context(mock.patch("exporter.run.make_rollups", lambda *_: None))
        ids = [m.id for m in metrics]
        cols = [_values(i, 0, steps).tolist() for i in range(len(ids))]
        t = time.perf_counter()
        with exporter.init("fwd", registry=reg, settings=settings) as run:
            for k in range(steps):
                run.log(k, {f: c[k] for f, c in zip(ids, cols, strict=True)}, wall_time=k)
            if not run.flush(600):
                raise RuntimeError("the forwarder did not catch up")
        return time.perf_counter() - t


def _writer_cost(
    url: str, data: Path, reg: registry.Registry, metrics: list[registry.Metric], steps: int
) -> None:
    """Import and forwarder throughput with and without rollups, side by side."""
    values = steps * len(metrics)
    print(f"\nwriter cost of rollups ({steps:,} steps x {len(metrics)} metrics, fresh databases)")
    for label, on in (
        ("without rollups", False),
        ("with rollups", True),
        ("without, again", False),
    ):
        tag = uuid.uuid4().hex[:8]
        seconds, spent = _import(
            url, f"ab_{tag}", data / f"ab-{tag}", reg, metrics, steps, rollups=on, run="ab"
        )
        print(
            f"  import {label:<16} {seconds:6.1f} s  {values / seconds:>9,.0f} values/s"
            + (f"  (rollups: {spent:.1f} s on the sender thread)" if on else "")
        )
    fwd = max(1_000, steps // 5)
    for label, on in (("without rollups", False), ("with rollups", True)):
        tag = uuid.uuid4().hex[:8]
        seconds = _forward(url, f"fw_{tag}", data / f"fw-{tag}", reg, metrics, fwd, rollups=on)
        print(
            f"  forwarder {fwd:,} steps {label:<16} {seconds:6.1f} s  {fwd * len(metrics) / seconds:>9,.0f} values/s"
        )


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    if not ordered:  # --rounds 1: nothing warm
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _measure(
    name: str,
    reg: registry.Registry,
    config: DatasourceConfig,
    metrics: list[registry.Metric],
    rounds: int,
    all_requests: int,
    run: str = RUN,
) -> dict[str, list[float]]:
    # all cards first, on a datasource that has read nothing yet (a fresh process)
    first = create_app(config, reg, history=open_history(config, reg)).test_client()
    everything_cold = _timed(lambda: first.get(f"/api/cards?run={run}"), 1)
    everything = _timed(lambda: first.get(f"/api/cards?run={run}"), all_requests)
    store: HistoryStore = open_history(config, reg)
    client = create_app(config, reg, history=store).test_client()
    times: dict[str, list[float]] = {
        k: [] for k in ("card cold", "card", "fetch", "series cold", "series")
    }
    for i in range(rounds):
        for m in metrics:
            url = f"/api/cards?run={run}&metric={m.id}"
            t = time.perf_counter()
            r = client.get(url)
            times["card cold" if i == 0 else "card"].append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.data[:200]
            needed = card_inputs(reg, m.id)
            t = time.perf_counter()
            store.windows(run, needed, config.card_window)
            store.run_config(run)
            times["fetch"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r = client.get(f"/api/series?run={run}&metric={m.id}&points=1000&smoothing=0.6")
            times["series cold" if i == 0 else "series"].append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200 and len(r.get_json()["rows"]) <= 1000
    full = _timed(lambda: store.series(run, metrics[0].id, None, None, 10**8), 2)
    print(f"\n{name}")
    print(f"  {'what':<40}{'n':>5}{'p50 ms':>10}{'p95 ms':>10}")
    for label, xs in (
        ("card (1 metric, HTTP), cold", times["card cold"]),
        ("card (1 metric, HTTP), warm", times["card"]),
        ("history fetch alone (its windows)", times["fetch"]),
        ("all core cards (1 request), cold", everything_cold),
        ("all core cards (1 request), warm", everything),
        ("series, 1000 points (HTTP), cold", times["series cold"]),
        ("series, 1000 points (HTTP), warm", times["series"]),
        ("full history of 1 metric", full),
    ):
        print(f"  {label:<40}{len(xs):>5}{_pct(xs, 0.5):>10.1f}{_pct(xs, 0.95):>10.1f}")
    card = times["card cold"] + times["card"]
    ratio50 = _pct(card, 0.5) / max(_pct(times["fetch"], 0.5), 1e-9)
    ratio95 = _pct(card, 0.95) / max(_pct(times["fetch"], 0.95), 1e-9)
    print(f"  card / fetch: p50 x{ratio50:.1f}, p95 x{ratio95:.1f}")
    return {"fetch": times["fetch"], "all": everything, "all cold": everything_cold, **times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--all-requests", type=int, default=30)
    parser.add_argument("--data", type=Path, default=Path("/tmp/rlvitals-bench-cards"))
    parser.add_argument("--no-influx", action="store_true")
    parser.add_argument("--writer-steps", type=int, default=100_000)
    args = parser.parse_args()
    reg = registry.load()
    metrics = _metrics(reg, args.metrics)
    data = args.data / f"{args.steps}x{len(metrics)}"
    data.mkdir(parents=True, exist_ok=True)
    print(f"{len(metrics)} metrics x {args.steps:,} steps; {args.rounds} rounds; data in {data}")
    _load_embedded(data / "outbox.sqlite", metrics, args.steps)
    results = {
        "embedded": _measure(
            "embedded store (sqlite outbox)",
            reg,
            DatasourceConfig(store=data),
            metrics,
            args.rounds,
            args.all_requests,
        )
    }
    if not args.no_influx and shutil.which("influxd"):
        with _influxd(data / "influxdb") as url:
            _load_influx(url, data / "influxdb" / "loaded", metrics, args.steps)
            marker = data / "influxdb" / "imported"
            if not marker.exists():
                seconds, spent = _import(
                    url, DB_ROLLUPS, data / "import-store", reg, metrics, args.steps
                )
                values = args.steps * len(metrics)
                marker.write_text(f"{seconds:.1f} s, rollups {spent:.1f} s\n")
                print(
                    f"\ninfluxdb (import): {values:,} values in {seconds:.1f} s "
                    f"({values / seconds:,.0f}/s; keeping rollups {spent:.1f} s of it on the sender)"
                )
            config = DatasourceConfig(
                store=data, influx_url=url, influx_database=DB, influx_timeout=120
            )
            results["influxdb"] = _measure(
                "InfluxDB 1.6, raw points only (no rollups: an older exporter's data)",
                reg,
                config,
                metrics,
                args.rounds,
                args.all_requests,
            )
            rolled = DatasourceConfig(
                store=data, influx_url=url, influx_database=DB_ROLLUPS, influx_timeout=120
            )
            results["influxdb rollups"] = _measure(
                "InfluxDB 1.6, imported by rlvitals (step rollups kept)",
                reg,
                rolled,
                metrics,
                args.rounds,
                args.all_requests,
            )
            worst = max(
                _pct(results["influxdb rollups"][k], 0.95) for k in ("card", "all", "series")
            )
            cold = max(
                max(results["influxdb rollups"][k])
                for k in ("card cold", "series cold", "all cold")
            )
            print(
                f"\ngoal InfluxDB cards/series p95 < 200 ms (warm): "
                f"{'met' if worst < 200 else 'NOT met'} ({worst:.1f} ms); "
                f"slowest cold request {cold:.1f} ms (goal < 1000 ms)"
            )
            if args.writer_steps:
                _writer_cost(url, data, reg, metrics, args.writer_steps)
    p95 = _pct(results["embedded"]["card"], 0.95)
    verdict = "met" if p95 < 200 else "NOT met"
    print(f"\ngoal p95 < 200 ms per card on the embedded store: {verdict} ({p95:.1f} ms)")
    print(
        f"median of card times, all stores: {statistics.median(x for r in results.values() for x in r['card']):.1f} ms"
    )


if __name__ == "__main__":
    main()
