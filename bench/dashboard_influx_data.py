"""A team's InfluxDB for the dashboard benchmark: 20 runs x 200,000 steps x 30 metrics.

Written once into a real InfluxDB 1.x (Debian's `influxd`, `bench/local_influx.py`) kept under
`bench/results/`, then reused. The points are what the exporter writes (one line per registry
group, run and step; timestamp = step in seconds; fields the canonical ids, `step`, `wall_time`;
the names from `exporter.schema` and the registry; three of the 30 are members of the
`reward_component` name family) and beside them the step rollups the exporter
keeps (`exporter.influx.rollups`: per field and block of 64 and 4096 steps, count, sum, min, max,
last step and mean, in `rollup_measurement(level)`, and each run's marker). They are written as line
protocol here, summed with numpy, because the exporter's own writer would take hours for 120M
values on this machine; the data-path test (tests/grafana/test_dashboards_data_path.py) reads
rollups the real exporter made, so the queries are checked on those.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from workload import metric_names

import registry
from exporter.influx.lineprotocol import escape_field_key
from exporter.influx.rollups import ROLLUP_VERSION
from exporter.schema import (
    EVENTS,
    KIND_TAG,
    MARKER_VERSION_FIELD,
    ROLLUP_LEVELS,
    ROLLUP_MARKER,
    ROLLUP_MEAN,
    RUN_TAG,
    STEP_FIELD,
    TEXT_FIELD,
    WALL_TIME_FIELD,
    rollup_key,
    rollup_measurement,
)
from exporter.translate.derive import NONFINITE_FIELD

__all__ = ["DATABASE", "bench_runs", "load", "measurements"]

DATABASE = "bench"
_CHUNK = 8192  # steps per write request and measurement (a multiple of every rollup level)
_DONE = "loaded.txt"


def bench_runs(count: int) -> list[str]:
    """Sweep-like run names: `grpo-qwen-lr<lr>-s<seed>`."""
    lrs = ("1e-6", "3e-6", "1e-5", "3e-5")
    return [
        f"grpo-qwen-lr{lrs[i // 5 % 4]}-s{i % 5}" + (f"-{i // 20}" if i >= 20 else "")
        for i in range(count)
    ]


REWARD_PARTS = ("accuracy", "format", "length")
"""Members of the `reward_component` name family every run logs: a language-model run's reward
split by reward function, drawn on the reward dashboard (TRL's `rewards/<func>`)."""


def measurements(reg: registry.Registry) -> dict[str, list[str]]:
    """Registry group -> stored fields: 30 metrics, the first 27 bench/workload.py logs and
    three reward components (`REWARD_PARTS`), plus the exporter's per-step `nonfinite_count`."""
    names = metric_names(reg, 30 - len(REWARD_PARTS))
    ids = dict.fromkeys(reg.resolve(n, framework="sb3").metric for n in names)
    # the registry's first name family: the reward components (weighted into the raw reward)
    family = next(m for m in reg.metrics if m.pattern is not None and m.pattern.weight_config)
    for part in REWARD_PARTS:
        ids[f"{family.id}/{part}"] = None
    ids[NONFINITE_FIELD] = None
    out: dict[str, list[str]] = {}
    for metric_id in ids:
        group = reg.metric(metric_id.split("/")[0]).group
        out.setdefault(group, []).append(metric_id)
    return out


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(f"{url}/write?db={DATABASE}&precision=s", data=body)
    with urllib.request.urlopen(req, timeout=300) as r:
        r.read()


def _values(run_index: int, field_index: int, steps: np.ndarray) -> np.ndarray:
    """A smooth curve with noise, different for every run and field, inside (0, 1)."""
    rng = np.random.default_rng(run_index * 1000 + field_index)
    t = steps / 200_000
    base = 0.3 + 0.2 * np.sin(t * (3 + field_index) + run_index)
    return np.clip(base + rng.normal(0, 0.02, steps.size), 0.001, 0.999)


def _raw_lines(
    measurement: str, run: str, fields: Sequence[str], steps: np.ndarray, cols: list[np.ndarray]
) -> bytes:
    keys = [escape_field_key(f) for f in fields]
    fmt = (
        f"{measurement},{RUN_TAG}={run} "
        + ",".join(f"{k}=%.6g" for k in keys)
        + f",{STEP_FIELD}=%di,{WALL_TIME_FIELD}=%.3f %d"
    )
    wall = 1.7e9 + steps * 0.05
    rows = zip(*cols, steps, wall, steps, strict=True)
    return ("\n".join(fmt % tuple(r) for r in rows) + "\n").encode()


def _rollup_lines(
    run: str, fields: Sequence[str], steps: np.ndarray, cols: list[np.ndarray]
) -> bytes:
    out: list[str] = []
    for level in ROLLUP_LEVELS:
        blocks = steps // level
        starts = np.flatnonzero(np.r_[True, blocks[1:] != blocks[:-1]])
        parts_by_block: list[list[str]] = [[] for _ in starts]
        for name, col in zip(fields, cols, strict=True):
            n = np.diff(np.r_[starts, steps.size])
            total = np.add.reduceat(col, starts)
            low = np.minimum.reduceat(col, starts)
            high = np.maximum.reduceat(col, starts)
            last = steps[np.r_[starts[1:], steps.size] - 1]
            stats = ("n", "sum", "min", "max", "last", ROLLUP_MEAN)
            k = [escape_field_key(rollup_key(s, name)) for s in stats]
            for i in range(starts.size):
                parts_by_block[i].append(
                    f"{k[0]}={int(n[i])}i,{k[1]}={float(total[i])!r},{k[2]}={float(low[i])!r},"
                    f"{k[3]}={float(high[i])!r},{k[4]}={int(last[i])}i,"
                    f"{k[5]}={float(total[i]) / int(n[i])!r}"
                )
        meas = rollup_measurement(level)
        for i, s in enumerate(starts):
            out.append(f"{meas},{RUN_TAG}={run} {','.join(parts_by_block[i])} {blocks[s] * level}")
    return ("\n".join(out) + "\n").encode()


def _chunks(steps: int) -> Iterator[np.ndarray]:
    for lo in range(0, steps, _CHUNK):
        yield np.arange(lo, min(steps, lo + _CHUNK), dtype=np.int64)


def load(url: str, root: Path, reg: registry.Registry, runs: int, steps: int) -> dict[str, Any]:
    """Write the runs once (a file under `root` says they are complete)."""
    done = root / _DONE
    names = bench_runs(runs)
    what = f"{runs} runs x {steps} steps"
    if done.exists() and done.read_text() == what:
        return {"runs": names, "loaded": False}
    tables = measurements(reg)
    index = {f: i for i, f in enumerate(f for fs in tables.values() for f in fs)}
    for r, run in enumerate(names):
        for chunk in _chunks(steps):
            body = bytearray()
            all_fields: list[str] = []
            all_cols: list[np.ndarray] = []
            for measurement, fields in tables.items():
                cols = [
                    np.zeros(chunk.size) if f == NONFINITE_FIELD else _values(r, index[f], chunk)
                    for f in fields
                ]
                body += _raw_lines(measurement, run, fields, chunk, cols)
                all_fields += fields
                all_cols += cols
            _post(url, bytes(body))
            # the 4096-step blocks are whole within a chunk (a multiple of 4096 steps)
            _post(url, _rollup_lines(run, all_fields, chunk, all_cols))
        events = "\n".join(
            f"{EVENTS},{KIND_TAG}=checkpoint,{RUN_TAG}={run} {STEP_FIELD}={s}i,"
            f'{TEXT_FIELD}="saved",{WALL_TIME_FIELD}=1.7e9 {s}'
            for s in range(0, steps, 20_000)
        )
        marker = f"{ROLLUP_MARKER},{RUN_TAG}={run} {MARKER_VERSION_FIELD}={ROLLUP_VERSION}i 0"
        _post(url, f"{events}\n{marker}\n".encode())
        print(f"  loaded {run}", flush=True)
    done.write_text(what)
    return {"runs": names, "loaded": True}
