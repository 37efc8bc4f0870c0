"""The run page of a 1,000,000-step run in headless Chromium: time until every chart is drawn.

Uses the store `bench_dashboard.py` loads (run it first), serves it with the real app on a free
port and opens `/run?run=bench` in Debian's chromium through PyPI playwright (never `playwright
install`), `--rounds` times; prints p50 / max seconds to `body[data-ready]`, the charts drawn and
the points each holds, and a drag-zoom's time until the zoomed range is drawn.

Run: python bench/bench_dashboard_browser.py [--steps 1000000] [--metrics 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

import registry
from grafana.datasource import DatasourceConfig, create_app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--metrics", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path("bench/results/dashboard-data"))
    args = ap.parse_args()
    store = args.data / f"embedded-{args.steps}-{args.metrics}"
    if not (store / "outbox.sqlite").exists():
        raise SystemExit(f"no store at {store}: run bench/bench_dashboard.py first")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = create_app(DatasourceConfig(store=store), registry.load())
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/run?run=bench"
    loads, zooms = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        for _ in range(args.rounds):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            loads.append(time.perf_counter() - t)
            charts, points = page.evaluate(
                "() => [rlvitalsDash.charts.size,"
                " Math.max(...Array.from(rlvitalsDash.charts.values()).map(u => u.data[0].length))]"
            )
            t = time.perf_counter()
            page.fill("#range-from", str(args.steps // 2))
            page.fill("#range-to", str(args.steps // 2 + 9_999))
            page.click("#range-apply")
            page.wait_for_function(
                f"() => Array.from(rlvitalsDash.charts.values()).every(u => u.data[0][0] >= {args.steps // 2})",
                timeout=120_000,
            )
            zooms.append(time.perf_counter() - t)
            page.close()
        browser.close()
    server.shutdown()
    print(
        f"{args.steps:,} steps x {args.metrics} metrics: {charts} charts of up to {points} points"
    )
    print(f"  page drawn     p50 {statistics.median(loads):.2f} s   max {max(loads):.2f} s")
    print(f"  10k-step zoom  p50 {statistics.median(zooms):.2f} s   max {max(zooms):.2f} s")


if __name__ == "__main__":
    main()
