"""Helpers for the tests that hold the columnar path (`Run.log_block`, `BlockTranslator`, an
import as columns) to the step-by-step one: a block built from plain steps, and an outbox's
rows in one order so two stores compare equal when they hold the same thing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from exporter.sources.scalar_block import ScalarBlock

Steps = list[tuple[int, list[tuple[str, float]], float]]
"""(step, [(name, value), ...], wall time) per logged step."""


def block_of(steps: Steps) -> ScalarBlock:
    """The block a reader would hand over for these steps, names numbered as first seen."""
    names: list[str] = []
    ids: dict[str, int] = {}
    tags: list[int] = []
    values: list[float] = []
    starts = [0]
    for _, pairs, _ in steps:
        for name, value in pairs:
            tags.append(ids.setdefault(name, len(ids)))
            if len(names) < len(ids):
                names.append(name)
            values.append(value)
        starts.append(len(tags))
    return ScalarBlock.build(
        names,
        np.array([s for s, _, _ in steps], dtype=np.int64),
        np.array([w for _, _, w in steps], dtype=np.float64),
        np.array(starts, dtype=np.int64),
        np.array(tags, dtype=np.int64),
        np.array(values, dtype=np.float64),
    )


def stored_rows(outbox: Path) -> tuple[list[Any], ...]:
    """The samples, events, running statistics and rollups of an outbox file, ordered. The
    run_config row's wall time is left out: it is the time of the call that noted the
    transforms, which two ways of logging do not share."""
    db = sqlite3.connect(outbox)
    try:
        samples = db.execute(
            "SELECT run, rank, step, measurement, gpu, field, value, wall_time FROM samples "
            "ORDER BY 1, 2, 3, 4, 5, 6"
        ).fetchall()
        return (
            [r if r[3] != "run_config" else r[:7] for r in samples],
            db.execute(
                "SELECT run, rank, step, kind, text, fields, wall_time FROM events "
                "ORDER BY 1, 2, 3, 4"
            ).fetchall(),
            db.execute("SELECT * FROM sample_stats ORDER BY 1, 2, 3, 4, 5").fetchall(),
            db.execute("SELECT * FROM sample_rollups ORDER BY 1, 2, 3, 4").fetchall(),
        )
    finally:
        db.close()
