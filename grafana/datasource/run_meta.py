"""What a person wrote about the runs: their tags and notes, read from the embedded store.

They live in the outbox's `runs` table (`exporter.store.run_admin` writes them) whichever store
the datasource reads history from; a server without that file (InfluxDB only) has none to show.
Read-only, one open per request, like `history.embedded`.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.store.outbox import tags_from_json

__all__ = ["RunMeta", "read_meta", "with_meta"]


@dataclass(frozen=True)
class RunMeta:
    tags: tuple[str, ...] = ()
    notes: str = ""


def read_meta(outbox: Path) -> dict[str, RunMeta]:
    """Each run's tags and notes (runs with neither are absent); empty when the file is
    missing, from before notes and tags, or unreadable (the history store says why)."""
    if not outbox.exists():
        return {}
    try:
        with closing(
            sqlite3.connect(f"{outbox.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        ) as db:
            rows = db.execute(
                "SELECT run, tags, notes FROM runs WHERE tags IS NOT NULL OR notes IS NOT NULL"
            ).fetchall()
    except sqlite3.Error:
        return {}
    return {str(r[0]): RunMeta(tags_from_json(r[1]), str(r[2] or "")) for r in rows}


def with_meta(summary: dict[str, Any], meta: dict[str, RunMeta]) -> dict[str, Any]:
    """A run list row (`run_summary`) with the run's `tags` and `notes`."""
    found = meta.get(str(summary["run"]), RunMeta())
    return {**summary, "tags": list(found.tags), "notes": found.notes}
