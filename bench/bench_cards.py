"""Diagnosis cards for 30 metrics over a 1,000,000-step run: embedded store and InfluxDB.

For each store the same run (every metric logged at every step) is loaded once, then timed:
  card       GET /api/cards?run=R&metric=M through the Flask app (in-process test client:
             request parsing, run check, history fetch, diagnosis, JSON), 30 metrics x rounds
  fetch      the history fetch alone: the windows that card reads (metric + related + rule
             inputs, last RLVITALS_DATASOURCE_CARD_WINDOW points each) and the run config
  all        GET /api/cards?run=R (every core metric in one request)
  series     GET /api/series?run=R&metric=M&points=1000 (downsampled in the database)
  full       pulling one metric's whole history into Python (what the datasource never does)
Prints p50/p95 in milliseconds and card/fetch ratios, measured in one run. Goal: card p95 under
200 ms on the embedded store.

Run: python bench/bench_cards.py [--steps 1000000] [--metrics 30] [--rounds 5] [--data DIR]
     [--no-influx]. The loaded stores are kept under --data and reused by later runs.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import registry
from exporter.outbox import NO_RANK, Outbox
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.cards import card_inputs
from grafana.datasource.history import HistoryStore, open_history

RUN = "bench"
DB = "rlvitals_bench"
_CHUNK = 20_000


def _metrics(reg: registry.Registry, count: int) -> list[registry.Metric]:
    chosen = [m for m in reg.core_metrics() if m.pattern is None]
    chosen += [m for m in reg.metrics if not m.core and m.pattern is None]
    return chosen[:count]


def _values(index: int, start: int, stop: int) -> np.ndarray:
    rng = np.random.default_rng(index * 1_000_003 + start)
    steps = np.arange(start, stop, dtype=np.float64)
    level = 1.0 + 0.5 * np.sin(steps / (50_000 + 7_000 * index) + index)
    return level + rng.normal(0.0, 0.05, steps.size)


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


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _measure(
    name: str,
    reg: registry.Registry,
    config: DatasourceConfig,
    metrics: list[registry.Metric],
    rounds: int,
) -> dict[str, list[float]]:
    store: HistoryStore = open_history(config, reg)
    client = create_app(config, reg, history=store).test_client()
    card: list[float] = []
    fetch: list[float] = []
    series: list[float] = []
    for _ in range(rounds):
        for m in metrics:
            url = f"/api/cards?run={RUN}&metric={m.id}"
            t = time.perf_counter()
            r = client.get(url)
            card.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.data[:200]
            needed = card_inputs(reg, m.id)
            t = time.perf_counter()
            store.windows(RUN, needed, config.card_window)
            store.run_config(RUN)
            fetch.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r = client.get(f"/api/series?run={RUN}&metric={m.id}&points=1000&smoothing=0.6")
            series.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200 and len(r.get_json()["rows"]) <= 1000
    everything = _timed(lambda: client.get(f"/api/cards?run={RUN}"), rounds)
    full = _timed(lambda: store.series(RUN, metrics[0].id, None, None, 10**8), 2)
    print(f"\n{name}")
    print(f"  {'what':<34}{'n':>5}{'p50 ms':>10}{'p95 ms':>10}")
    for label, xs in (
        ("card (1 metric, HTTP)", card),
        ("history fetch alone (its windows)", fetch),
        ("all core cards (1 request)", everything),
        ("series, 1000 points (HTTP)", series),
        ("full history of 1 metric", full),
    ):
        print(f"  {label:<34}{len(xs):>5}{_pct(xs, 0.5):>10.1f}{_pct(xs, 0.95):>10.1f}")
    ratio50 = _pct(card, 0.5) / max(_pct(fetch, 0.5), 1e-9)
    ratio95 = _pct(card, 0.95) / max(_pct(fetch, 0.95), 1e-9)
    print(f"  card / fetch: p50 x{ratio50:.1f}, p95 x{ratio95:.1f}")
    return {"card": card, "fetch": fetch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path("/tmp/rlvitals-bench-cards"))
    parser.add_argument("--no-influx", action="store_true")
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
        )
    }
    if not args.no_influx and shutil.which("influxd"):
        with _influxd(data / "influxdb") as url:
            _load_influx(url, data / "influxdb" / "loaded", metrics, args.steps)
            config = DatasourceConfig(
                store=data, influx_url=url, influx_database=DB, influx_timeout=120
            )
            results["influxdb"] = _measure(
                "InfluxDB 1.6 (InfluxQL over HTTP)", reg, config, metrics, args.rounds
            )
    p95 = _pct(results["embedded"]["card"], 0.95)
    verdict = "met" if p95 < 200 else "NOT met"
    print(f"\ngoal p95 < 200 ms per card on the embedded store: {verdict} ({p95:.1f} ms)")
    print(
        f"median of card times, all stores: {statistics.median(x for r in results.values() for x in r['card']):.1f} ms"
    )


if __name__ == "__main__":
    main()
