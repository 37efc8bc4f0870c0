"""The ranks of a run as the store recorded them: each rank's writer lease and its end.

A run logged by several ranks of one job (`exporter.job`) keeps a lease per (run, rank) in
`leases` and, once a rank ended, its end in `rank_ends`; a run logged without a rank keeps its
one lease under `NO_RANK` and its end in `runs`. Read here for the outbox and for the
datasource's embedded store alike (`exporter.lifecycle.RankRecord` is what both hand the one
lifecycle). A file from before ranks has neither: every run in it reads as unranked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..lease import LEASE_COLUMNS, lease_from_row
from ..lifecycle import RankRecord
from ..schema import NO_RANK

__all__ = ["rank_records", "ranks_by_run"]

_LEASES = f"SELECT run, rank, {LEASE_COLUMNS} FROM leases WHERE rank != {NO_RANK}"
_ENDS = "SELECT run, rank, state, reason, state_at FROM rank_ends"


def _rows(db: sqlite3.Connection, sql: str, run: str | None) -> list[Sequence[Any]]:
    where = (" AND run = ?" if "WHERE" in sql else " WHERE run = ?") if run is not None else ""
    try:
        return db.execute(sql + where, () if run is None else (run,)).fetchall()
    except sqlite3.OperationalError:  # a file from before ranks: no such column or table
        return []


def ranks_by_run(
    db: sqlite3.Connection, run: str | None = None
) -> dict[str, tuple[RankRecord, ...]]:
    """Every ranked run's ranks (or one run's), each with its lease or its end, by rank. A rank
    holding a lease again after an end (a restarted worker) is read by its lease."""
    found: dict[str, dict[int, RankRecord]] = {}
    for name, rank, state, reason, at in _rows(db, _ENDS, run):
        found.setdefault(str(name), {})[int(rank)] = RankRecord(
            int(rank), str(state), None if reason is None else str(reason), at
        )
    for row in _rows(db, _LEASES, run):
        found.setdefault(str(row[0]), {})[int(row[1])] = RankRecord(
            int(row[1]), lease=lease_from_row(row[2:])
        )
    return {name: tuple(ranks[r] for r in sorted(ranks)) for name, ranks in found.items() if ranks}


def rank_records(db: sqlite3.Connection, run: str) -> tuple[RankRecord, ...]:
    """One run's ranks (empty for a run logged without a rank)."""
    return ranks_by_run(db, run).get(run, ())
