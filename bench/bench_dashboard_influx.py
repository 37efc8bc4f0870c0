"""The generated Grafana dashboards' InfluxQL at a team's scale: 20 runs x 200,000 steps x 30
metrics in a real InfluxDB 1.x (`dashboard_influx_data.py`, written once under bench/results/).

For every dashboard with charts (English; the Chinese ones ask the same queries), with all 20
runs selected, the queries Grafana would send on a load: the hidden variables (`logged`, `dense`,
`bucket`), computed by InfluxDB and substituted in order as Grafana does
(tests/grafana/grafana_interp.py), then every target of every chart. Each statement is timed as
InfluxDB answers it over HTTP (`epoch=ms`, as Grafana's backend asks). Reported per dashboard:
the p50/p95 of a statement, and of the whole page: the variables one after another, then the
panels six at a time (`PANELS_IN_FLIGHT`), and the most rows a series received.

Beside it, what a user had before this change: the same charts reading every raw point (the raw
target of each chart with its gate open, the bucket from `max("step")` over the raw points):
fewer rounds, it is slow.

Run: python bench/bench_dashboard_influx.py [--runs 20] [--steps 200000] [--rounds 5]
     [--raw-rounds 1] [--data bench/results/dashboard-influx]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dashboard_influx_data import DATABASE, load
from local_influx import start_influx

import registry
from grafana.dashboards_gen import dashboard_files

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests" / "grafana"))
from grafana_interp import Selection, interpolate, resolve_hidden

_CHOSEN = {"smoothing": ("10", "10"), "step_from": ("0", "0")}
PANELS_IN_FLIGHT = 6
"""Panels whose queries are in flight at once, as a browser sends a page's panel requests (six
connections per host over HTTP/1.1); a panel's targets run one after another (Grafana's InfluxDB
backend runs a request's queries in turn)."""


def _query(url: str, q: str) -> tuple[float, dict[str, Any]]:
    params = urllib.parse.urlencode({"db": DATABASE, "q": q, "epoch": "ms"})
    t = time.perf_counter()
    with urllib.request.urlopen(f"{url}/query?{params}", timeout=600) as r:
        body: dict[str, Any] = json.loads(r.read())
    elapsed = time.perf_counter() - t
    result = body["results"][0]
    assert "error" not in result, (q, result["error"])
    return elapsed, body


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def _rows_per_series(body: dict[str, Any]) -> int:
    return max((len(s["values"]) for s in body["results"][0].get("series", [])), default=0)


def _page(
    url: str, dashboard: dict[str, Any], runs: list[str], raw: bool
) -> tuple[float, list[float], int]:
    """One page load: (total seconds, each statement's seconds, most rows any series had)."""
    timings: list[float] = []
    if raw:
        # what the dashboards asked before: the bucket from every raw step, no rollups
        var = next(v for v in dashboard["templating"]["list"] if v["name"] == "bucket")
        measurement = var["query"].split('FROM "')[-1].split('"')[0]
        old = (
            f'SELECT ceil((max("step") - 0 + 1) / 1000) FROM "{measurement}" '
            f'WHERE "run" =~ /^{_regex(runs)}$/ AND time >= 0s'
        )
        seconds, body = _query(url, old)
        timings.append(seconds)
        bucket = str(body["results"][0]["series"][0]["values"][0][1])
        sel = Selection(
            runs=runs,
            single={**_CHOSEN, "bucket": (bucket, bucket), "logged": ("1", "1"), "dense": ("", "")},
        )
    else:
        times: list[float] = []

        def timed(q: str) -> dict[str, Any]:
            seconds, body = _query(url, q)
            times.append(seconds)
            return body

        sel = resolve_hidden(dashboard, runs, _CHOSEN, timed)
        timings += times
    panels = [p for p in dashboard["panels"] if p.get("type") == "trend"]

    def panel_queries(panel: dict[str, Any]) -> list[tuple[float, int]]:
        out = []
        for target in panel["targets"]:
            if "query" not in target:  # not InfluxDB's (the run colours' Infinity request)
                continue
            if raw and len(target["refId"]) > 1:  # only the raw-point targets, gate open
                continue
            seconds, body = _query(url, interpolate(target["query"], sel))
            out.append((seconds, _rows_per_series(body)))
        return out

    t = time.perf_counter()
    with ThreadPoolExecutor(PANELS_IN_FLIGHT) as pool:
        done = list(pool.map(panel_queries, panels))
    page = sum(timings) + time.perf_counter() - t
    timings += [s for d in done for s, _ in d]
    most = max((n for d in done for _, n in d), default=0)
    return page, timings, most


def _regex(runs: list[str]) -> str:
    return "(" + "|".join(r.replace(".", "\\.").replace("-", "-") for r in runs) + ")"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--raw-rounds", type=int, default=1)
    ap.add_argument("--data", type=Path, default=Path("bench/results/dashboard-influx"))
    ap.add_argument("--pages", default="", help="comma-separated page keys (default: all)")
    args = ap.parse_args()
    reg = registry.load()
    args.data.mkdir(parents=True, exist_ok=True)
    server = start_influx(args.data, DATABASE)
    if server is None:
        sys.exit("influxd is not installed (Debian's influxdb package)")
    try:
        t = time.perf_counter()
        info = load(server.url, args.data, reg, args.runs, args.steps)
        if info["loaded"]:
            print(f"loaded in {time.perf_counter() - t:.0f} s")
        runs = info["runs"]
        files = dashboard_files(reg, ("en",))
        wanted = {p for p in args.pages.split(",") if p}
        print(f"\n{args.runs} runs x {args.steps:,} steps x 30 metrics, all runs selected")
        print(
            f"{'dashboard':<12} {'reads':<6} {'page p50':>9} {'page p95':>9} "
            f"{'stmt p50':>9} {'stmt p95':>9} {'stmts':>6} {'rows/series':>12}"
        )
        for path, text in sorted(files.items()):
            dashboard = json.loads(text)
            key = Path(path).stem
            if not any(p.get("type") == "trend" for p in dashboard["panels"]):
                continue
            if wanted and key not in wanted:
                continue
            _page(server.url, dashboard, runs, raw=False)  # warm the caches
            for raw, rounds in ((False, args.rounds), (True, args.raw_rounds)):
                if rounds <= 0:
                    continue
                pages, stmts, most = [], [], 0
                for _ in range(rounds):
                    total, timings, rows = _page(server.url, dashboard, runs, raw)
                    pages.append(total)
                    stmts += timings
                    most = max(most, rows)
                print(
                    f"{key:<12} {'raw' if raw else 'gated':<6} {statistics.median(pages):9.2f} "
                    f"{_pct(pages, 0.95):9.2f} {statistics.median(stmts):9.3f} "
                    f"{_pct(stmts, 0.95):9.3f} {len(stmts) // rounds:6d} {most:12d}",
                    flush=True,
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
