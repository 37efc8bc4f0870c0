"""What a person wrote about the runs (their tags and notes), and what the forwarder to InfluxDB
said it is doing (`read_forwarding`), read from the embedded store.

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

__all__ = ["RunMeta", "read_forwarding", "read_meta", "with_meta"]

_RECENT = 3600.0  # seconds a stopped forwarder's last word is still shown


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


def read_forwarding(outbox: Path, now: float) -> dict[str, Any] | None:
    """What the store's forwarder to InfluxDB said last (`exporter.store.outbox.ForwarderState`,
    noted every few seconds): its state, the rows waiting, how long the oldest has waited, its
    rate. None when nothing forwards this store (or it stopped over an hour ago with nothing
    left)."""
    if not outbox.exists():
        return None
    try:
        with closing(
            sqlite3.connect(f"{outbox.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        ) as db:
            row = db.execute(
                "SELECT pid, state, detail, backlog, oldest, rate, updated FROM forwarders "
                "ORDER BY updated DESC LIMIT 1"
            ).fetchone()
    except sqlite3.Error:  # no forwarder ever sent this store
        return None
    if row is None:
        return None
    pid, state, detail, backlog, oldest, rate, updated = row
    if state not in ("sending", "failing", "draining") and (now - updated > _RECENT or not backlog):
        return None
    return {
        "pid": pid,
        "state": state,
        "detail": detail,
        "backlog": backlog,
        "oldest_age": None if oldest is None or not backlog else max(0.0, now - oldest),
        "rate": rate,
        "updated_age": max(0.0, now - updated),
    }
