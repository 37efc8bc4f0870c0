"""A long verl console log, imported and served, beside a TensorBoard file of the same values.

    python bench/bench_console_import.py [--steps 20000] [--keys 120] [--rounds 3]

The files (made once, kept under bench/results/console-import-cache/): a verl console log of
`--steps` lines of `--keys` pairs each, as verl >= 0.5 prints them behind Ray's coloured prefix
(values as `np.float64(...)`), and an event file holding the same values one scalar per event
(as torch's SummaryWriter.add_scalar writes them; verl's TensorBoard backend does so). Measured,
each in a fresh store, rounds alternating between the two:

  import    `rlvitals import FILE` from start to exit: seconds, and microseconds per value
  on page   `rlvitals serve FOLDER` from the process start until the run's page has the whole
            run: `/api/runs` lists it at its last step and a `/api/series` of one of its
            metrics reaches the last step (issue 34's goal: under 10 s for 20,000 x 120)
  chart     the same serve, until that `/api/series` first reaches the last step: drawn from
            the import's whole-run sketch (`exporter/store/preview.py`) while the values are
            stored; the run's last step in `/api/runs` is the stored values' only

Prints medians and the ratio console / TensorBoard (per value: under 1 means the console log
imports faster). The machine's load average is printed beside them: it is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve_logdir import _event_file, _free_port, _get, _scalar

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / "results" / "console-import-cache"
NAMED = (  # verl's own keys, the rest numbered (a long line is mostly per-stage timings)
    "actor/entropy",
    "actor/pg_loss",
    "actor/ppo_kl",
    "actor/pg_clipfrac",
    "actor/grad_norm",
    "actor/lr",
    "actor/kl_loss",
    "critic/score/mean",
    "critic/rewards/mean",
    "critic/advantages/mean",
    "response_length/mean",
    "response_length/clip_ratio",
    "timing_s/step",
    "timing_s/gen",
    "training/global_step",
)


def _keys(count: int) -> list[str]:
    return [*NAMED, *(f"timing_per_worker/w{i}" for i in range(count - len(NAMED)))]


def make_files(steps: int, count: int) -> tuple[Path, Path]:
    """(the console log's folder, the event file's folder), made once per size."""
    want = {"steps": steps, "keys": count}
    done = CACHE / "done.json"
    console, tb = CACHE / "verl-console", CACHE / "verl-tb"
    if done.exists() and json.loads(done.read_text()) == want:
        return console, tb
    shutil.rmtree(CACHE, ignore_errors=True)
    console.mkdir(parents=True)
    keys = _keys(count)
    rng = random.Random(0)
    path = _event_file(tb)
    with open(console / "train.log", "w") as log, open(path, "ab") as events:
        for step in range(1, steps + 1):
            values = [round(rng.random(), 6) for _ in keys]
            pairs = " - ".join(f"{k}:np.float64({v})" for k, v in zip(keys, values, strict=True))
            log.write(f"\x1b[36m(TaskRunner pid=4242)\x1b[0m step:{step} - {pairs}\n")
            events.write(b"".join(_scalar(step, k, v) for k, v in zip(keys, values, strict=True)))
    done.write_text(json.dumps(want))
    return console, tb


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def time_import(folder: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "rlvitals", "import", str(folder), "--store", tmp]
        start = time.perf_counter()
        subprocess.run(argv, env=_env(), check=True, capture_output=True)
        return time.perf_counter() - start


def time_on_page(folder: Path, steps: int) -> tuple[float, float]:
    """(chart, on page): seconds from the process start, see the module doc."""
    run = folder.name
    chart: float | None = None
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        argv = [sys.executable, "-m", "rlvitals", "serve", str(folder), "--store", tmp]
        argv += ["--port", str(port)]
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"serve exited ({proc.returncode})")
                runs = _get(base + "/api/runs")
                listed = {r["run"]: r for r in runs["runs"]} if isinstance(runs, dict) else {}
                stored = listed.get(run, {}).get("last_step") == steps
                if stored or chart is None:
                    series = _get(f"{base}/api/series?run={run}&metric=policy_entropy&points=1000")
                    rows = series.get("rows") if isinstance(series, dict) else None
                    if rows and rows[-1]["step"] == steps:
                        now = time.perf_counter() - start
                        chart = now if chart is None else chart
                        if stored:
                            return chart, now
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    console, tb = make_files(args.steps, args.keys)
    values = args.steps * args.keys
    imports: dict[str, list[float]] = {"console": [], "tensorboard": []}
    pages: list[float] = []
    charts: list[float] = []
    for _ in range(args.rounds):
        imports["console"].append(time_import(console / "train.log"))
        imports["tensorboard"].append(time_import(tb))
        chart, page = time_on_page(console, args.steps)
        charts.append(chart)
        pages.append(page)
    c, t = (statistics.median(imports[k]) for k in ("console", "tensorboard"))
    print(f"{args.steps:,} steps x {args.keys} keys = {values:,} values; load {os.getloadavg()}")
    print("| measure | console log | TensorBoard file | ratio |")
    print("| --- | --- | --- | --- |")
    print(f"| import, s (median of {args.rounds}) | {c:.1f} | {t:.1f} | {c / t:.2f} |")
    print(
        f"| import, us per value | {c / values * 1e6:.2f} | {t / values * 1e6:.2f} | {c / t:.2f} |"
    )
    each = ", ".join(f"{p:.1f}" for p in pages)
    print(
        f"| serve: whole run on its page, s (median; each) | {statistics.median(pages):.1f} ({each}) | | |"
    )
    each = ", ".join(f"{x:.1f}" for x in charts)
    print(
        f"| serve: whole-run chart, s (median; each) | {statistics.median(charts):.1f} ({each}) | | |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
