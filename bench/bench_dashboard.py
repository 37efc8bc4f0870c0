"""What the live dashboard's run page asks of the embedded store on a 1,000,000-step run.

The run (every metric logged at every step; the same loader as bench_cards.py) is loaded once,
then timed through the Flask app (in-process test client):
  fields     GET /api/fields?run=R                        (every field, grouped, with tooltips)
  series     GET /api/field_series?run=R&field=F&points=1000, whole run (rollups in SQL, plus the
             256-seek wall clock)
  zoom       the same for a 10,000-step range in the middle of the run (a drag-zoom)
  cards      GET /api/card_html?run=R                     (the report's card of every metric)
  page       fields + series of every metric + cards: the data of one page load or live refresh
  full       the alternative: one metric's whole history pulled into Python (Outbox.series)
Prints p50/p95 in milliseconds and the full/series ratio, measured in one run.

Run: python bench/bench_dashboard.py [--steps 1000000] [--metrics 8] [--rounds 5] [--data DIR]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench_cards import RUN, _load_embedded, _metrics  # the same 1M-step run as the cards bench

import registry
from exporter.store.outbox import Outbox
from grafana.datasource import DatasourceConfig, create_app


def _time(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--metrics", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", type=Path, default=Path("bench/results/dashboard-data"))
    args = ap.parse_args()
    reg = registry.load()
    metrics = _metrics(reg, args.metrics)
    store = args.data / f"embedded-{args.steps}-{args.metrics}"
    store.mkdir(parents=True, exist_ok=True)
    _load_embedded(store / "outbox.sqlite", metrics, args.steps)
    client = create_app(DatasourceConfig(store=store), reg).test_client()

    def get(url: str) -> object:
        r = client.get(url)
        assert r.status_code == 200, (url, r.get_data(as_text=True)[:300])
        return r.get_json()

    ids = [m.id for m in metrics]
    mid = args.steps // 2

    def page() -> None:
        get(f"/api/fields?run={RUN}")
        for f in ids:
            get(f"/api/field_series?run={RUN}&field={f}&points=1000")
        get(f"/api/card_html?run={RUN}")

    def full() -> None:
        with Outbox(store / "outbox.sqlite") as box:
            steps, _ = box.series(RUN, ids[0])
            assert steps.size == args.steps

    rows = {
        "fields": _time(lambda: get(f"/api/fields?run={RUN}"), args.rounds),
        "series": _time(
            lambda: get(f"/api/field_series?run={RUN}&field={ids[0]}&points=1000"), args.rounds
        ),
        "zoom": _time(
            lambda: get(
                f"/api/field_series?run={RUN}&field={ids[0]}&points=1000&from={mid}&to={mid + 9999}"
            ),
            args.rounds,
        ),
        "cards": _time(lambda: get(f"/api/card_html?run={RUN}"), args.rounds),
        "page": _time(page, args.rounds),
        "full": _time(full, max(2, args.rounds // 2)),
    }
    print(f"\n{args.steps:,} steps x {len(ids)} metrics, embedded store, {args.rounds} rounds")
    for name, (p50, p95) in rows.items():
        print(f"  {name:<7} p50 {p50:9.1f} ms   p95 {p95:9.1f} ms")
    print(f"  full / series (p50): {rows['full'][0] / rows['series'][0]:.1f}x")


if __name__ == "__main__":
    main()
