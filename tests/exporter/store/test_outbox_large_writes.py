"""A large write (an import's batch: thousands of steps of a hundred keys) stores every value as
a small one does, and gives back the page cache it took for its transaction: the writer's
connection keeps sqlite's default between writes (a training process's store stays small)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from exporter import Outbox
from exporter.schema import NO_RANK, UNREGISTERED, SampleBlock

STEPS, KEYS = 400, 120  # 48,000 values: an import-sized write


def _block(first: int) -> SampleBlock:
    steps = list(range(first, first + STEPS))
    values = np.arange(STEPS * KEYS, dtype=np.float64).reshape(STEPS, KEYS) / 7 + first
    return SampleBlock(
        run="r",
        rank=NO_RANK,
        steps=steps,
        wall_times=[1.7e9 + s for s in steps],
        columns=[(UNREGISTERED, "", f"timing_per_worker/w{j}") for j in range(KEYS)],
        values=values,
    )


def _cache_size(box: Outbox) -> int:
    return int(box._db.execute("PRAGMA cache_size").fetchone()[0])


def test_a_large_write_stores_every_value_and_gives_its_cache_back(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    with Outbox(path) as box:
        default = _cache_size(box)
        blocks = [_block(0), _block(STEPS)]
        for block in blocks:
            assert box.write([], blocks=[(0, block)])
            assert _cache_size(box) == default
    with sqlite3.connect(path) as db:
        stored = db.execute(
            "SELECT step, field, value FROM samples WHERE run = 'r' ORDER BY step, field"
        ).fetchall()
        stats = db.execute(
            "SELECT sum(n), min(first_step), max(last_step) FROM sample_stats WHERE run = 'r'"
        ).fetchone()
    want = sorted(
        (step, field, float(block.values[i, j]))
        for block in blocks
        for i, step in enumerate(block.steps)
        for j, (_, _, field) in enumerate(block.columns)
    )
    assert stored == want
    assert stats == (2 * STEPS * KEYS, 0, 2 * STEPS - 1)
