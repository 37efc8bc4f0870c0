"""A whole-run sketch of a log being imported, shown until the import has stored every value.

Storing a long log's every value takes a while (a 300,000-step TensorBoard file of 10 tags, 3M
values: some 20 s at the store's 150-200k values a second), while its chart can be drawn from a
thousand of its steps. `rlvitals import` / `serve LOGDIR` read such a sample spread over the whole
file first (`exporter.sources.tb_sample`, for a console log `console_sample`), translated as the
run's own rows are, and keep it here,
in `sample_preview` beside the samples; readers (`grafana.datasource.history.embedded`) draw the
part of a series the samples do not reach yet from it, so the whole run is on screen at once and
fills in with every value as they are stored. Nothing else reads it: statistics, rollups, cards,
InfluxDB and the run's last step are the stored samples'. The import drops a run's sketch once its
log is stored (`drop`); `rlvitals runs delete/rename` treat it as any table keyed by run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from ..schema import RUN_CONFIG, SPREAD, SampleRow

__all__ = ["PREVIEW_TABLE", "drop", "preview_rows", "write"]

PREVIEW_TABLE = "sample_preview"
_CREATE = f"""CREATE TABLE IF NOT EXISTS {PREVIEW_TABLE} (
    run TEXT NOT NULL,
    field TEXT NOT NULL,
    step INTEGER NOT NULL,
    measurement TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run, field, step)
) WITHOUT ROWID"""


def preview_rows(rows: Iterable[SampleRow]) -> list[tuple[str, str, int, str, float]]:
    """The rows a sketch keeps: a metric's finite number at a step (not the run config, not the
    spread of several values at one step), as (run, field, step, measurement, value)."""
    out = []
    for run, _rank, step, measurement, _gpu, field, value, _wall in rows:
        if measurement in (RUN_CONFIG, SPREAD) or not isinstance(value, int | float):
            continue
        v = float(value)
        if v == v and abs(v) != float("inf"):
            out.append((run, field, int(step), measurement, v))
    return out


def write(db: sqlite3.Connection, run: str, rows: Iterable[SampleRow]) -> int:
    """Inside a write transaction: `run`'s sketch replaced by `rows`; how many were kept."""
    db.execute(_CREATE)
    db.execute(f"DELETE FROM {PREVIEW_TABLE} WHERE run = ?", (run,))
    kept = [r for r in preview_rows(rows) if r[0] == run]
    db.executemany(
        f"INSERT OR REPLACE INTO {PREVIEW_TABLE} (run, field, step, measurement, value) "
        "VALUES (?, ?, ?, ?, ?)",
        kept,
    )
    return len(kept)


def drop(db: sqlite3.Connection, run: str) -> None:
    """Inside a write transaction: `run`'s sketch gone (its log is stored)."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (PREVIEW_TABLE,)
    ).fetchone()
    if exists:
        db.execute(f"DELETE FROM {PREVIEW_TABLE} WHERE run = ?", (run,))
