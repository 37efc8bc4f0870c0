"""What the store keeps about each run beside its data: the tags and notes a person wrote and the
colour the run was given when it was created; and what the forwarder to InfluxDB said it is doing
(`read_forwarding`). Read from the embedded store.

They live in the outbox's `runs` table (`exporter.store.run_admin` writes tags and notes,
`exporter.store.run_colors` chooses the colour) whichever store the datasource reads history
from. A run the outbox does not hold (InfluxDB only) has no tags or notes, and its colour is the
one creation would have given it in the store's run order (`run_colors`). Read-only, one open
per request, like `history.embedded`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.store.outbox import tags_from_json
from exporter.store.run_colors import display_colors, fill_colors

__all__ = ["RunMeta", "page_colors", "read_forwarding", "read_meta", "run_colors", "with_meta"]

_RECENT = 3600.0  # seconds a stopped forwarder's last word is still shown


@dataclass(frozen=True)
class RunMeta:
    tags: tuple[str, ...] = ()
    notes: str = ""
    color: str | None = None


def read_meta(outbox: Path) -> dict[str, RunMeta]:
    """Each run's tags, notes and colour; empty when the file is missing or unreadable (the
    history store says why); a file from before colours gives None for them."""
    if not outbox.exists():
        return {}
    try:
        with closing(
            sqlite3.connect(f"{outbox.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        ) as db:
            have = {str(r[1]) for r in db.execute("PRAGMA table_info(runs)").fetchall()}
            columns = ", ".join(c if c in have else "NULL" for c in ("tags", "notes", "color"))
            rows = db.execute(f"SELECT run, {columns} FROM runs").fetchall()
    except sqlite3.Error:
        return {}
    return {
        str(r[0]): RunMeta(
            tags_from_json(r[1]), str(r[2] or ""), None if r[3] is None else str(r[3])
        )
        for r in rows
    }


def run_colors(runs: Sequence[str], meta: dict[str, RunMeta]) -> dict[str, str]:
    """Each run's colour: the stored one, else what creation would have given it (`runs` in the
    store's order, oldest first)."""
    stored = [meta[r].color if r in meta else None for r in runs]
    return dict(zip(runs, fill_colors(stored), strict=True))


def page_colors(
    shown: Sequence[str], runs: Sequence[str], meta: dict[str, RunMeta]
) -> dict[str, str]:
    """The colours of runs shown together on a page: their own, picked again only where two
    share one (`display_colors`)."""
    return display_colors(shown, run_colors(runs, meta), runs)


def with_meta(summary: dict[str, Any], meta: dict[str, RunMeta], color: str) -> dict[str, Any]:
    """A run list row (`run_summary`) with the run's `tags`, `notes` and `color`."""
    found = meta.get(str(summary["run"]), RunMeta())
    return {**summary, "tags": list(found.tags), "notes": found.notes, "color": color}


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
