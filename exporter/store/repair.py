"""Salvage a damaged outbox: `rlvitals doctor --repair`.

One sqlite file holds every run, so one damaged page (a truncated copy, a failing disk) can make
reads of every run fail with "database disk image is malformed". The repair builds a new file:
each table sqlite can still read whole is copied as it is; the rows of a table it cannot are read
from its surviving leaf pages (`salvage`), each checked against the table's declared columns.
The running statistics and rollups are then computed from the rows that came back (they are
derived, never salvaged), the new file must pass sqlite's integrity check, and only then is it
swapped in. The damaged file is kept beside it (`outbox.sqlite.damaged-<time>`, with its
write-ahead log), never deleted; what a lost page held is gone, and the report says how many rows
each table got back.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OutboxError
from . import salvage
from .outbox import DATA_TABLES, Outbox, create_data_tables

__all__ = ["RepairError", "RepairReport", "check_store", "repair_store"]

_SUFFIXES = ("", "-wal", "-shm")


class RepairError(OutboxError):
    """The store cannot be repaired; the message says why and what to do."""


@dataclass(frozen=True)
class RepairReport:
    """What a repair found and did. `repaired` is False when the store was not damaged.

    `copied`: tables read whole; `salvaged`: table -> rows read from its pages."""

    path: Path
    repaired: bool
    problem: str
    kept: Path | None = None
    runs: int = 0
    copied: tuple[str, ...] = ()
    salvaged: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)


def check_store(path: Path) -> str | None:
    """What sqlite's integrity check finds wrong with the store, or None when it is sound (or
    absent). Reads every page: seconds for a large file, so not a health probe."""
    if not path.exists():
        return None
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute("PRAGMA integrity_check(20)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    found = [str(r[0]) for r in rows]
    return None if found == ["ok"] else "; ".join(found)


def repair_store(path: Path) -> RepairReport:
    """Salvage `path` into a new file and swap it in (see the module docstring). Raises
    RepairError when another process has the store open or the salvaged file fails its own
    check; then nothing was changed."""
    problem = check_store(path)
    if problem is None:
        return RepairReport(path, False, "the store is sound (sqlite integrity check: ok)")
    _require_unused(path)
    with suppress(sqlite3.Error), closing(sqlite3.connect(path)) as db:
        # pages still in the write-ahead log go into the file, where the page scan reads them
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = path.with_name(f"{path.name}.recovering-{stamp}")
    _remove(fresh)
    try:
        copied, salvaged = _rebuild(path, fresh)
        with Outbox(fresh) as box:  # computes the running statistics and rollups once
            runs = len(box.runs())
        still = check_store(fresh)
        if still is not None:
            raise RepairError(f"the salvaged copy {fresh} fails its own check ({still})")
        with closing(sqlite3.connect(fresh)) as db:
            rows = {
                t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in (*DATA_TABLES, "samples")
            }
    except (OSError, ValueError, OutboxError, sqlite3.Error) as exc:
        _remove(fresh)
        if isinstance(exc, RepairError):
            raise
        raise RepairError(
            f"the salvage of {path} could not be completed ({exc}); the store was left as it was"
        ) from exc
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in _SUFFIXES:  # the damaged file and its log move aside together
        with suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{kept}{suffix}")
    os.rename(fresh, path)
    return RepairReport(path, True, problem, kept, runs, copied, salvaged, rows)


def _remove(path: Path) -> None:
    for suffix in _SUFFIXES:
        with suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def _require_unused(path: Path) -> None:
    """Refuse while another process has the file open: it would go on writing the damaged file
    after the swap. In WAL mode every connection holds a shared lock on the database, so an
    exclusive one is granted only when no one else is connected."""
    try:
        with closing(sqlite3.connect(path, timeout=0.5)) as db:
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("BEGIN EXCLUSIVE")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise RepairError(
                f"{path} is in use by another process (a training run, `rlvitals tail` or "
                "`serve`): stop them, then run `rlvitals doctor --repair` again"
            ) from None
    except sqlite3.DatabaseError:
        pass  # a file too damaged to lock is not being written either


@dataclass(frozen=True)
class _Column:
    name: str
    kind: str  # declared type, upper case ("" for none)
    required: bool  # NOT NULL
    rowid: bool  # INTEGER PRIMARY KEY: the record holds NULL, the value is the rowid


def _columns(db: sqlite3.Connection, table: str) -> tuple[_Column, ...]:
    info = db.execute(f"PRAGMA table_info({table})").fetchall()
    single_pk = sum(1 for r in info if r[5]) == 1
    return tuple(
        _Column(r[1], str(r[2]).upper(), bool(r[3]), single_pk and bool(r[5]) and r[2] == "INTEGER")
        for r in info
    )


def _fits(values: Sequence[salvage.Value], columns: Sequence[_Column]) -> bool:
    """Whether a record is a row of a table with these columns: as many values (fewer when the
    missing trailing columns may be NULL: added by ALTER TABLE after the row was written), each
    of its column's type. sqlite writes a REAL that holds a whole number as an integer."""
    if len(values) > len(columns):
        return False
    if any(c.required for c in columns[len(values) :]):
        return False
    for value, column in zip(values, columns, strict=False):
        if value is None:
            if column.required and not column.rowid:
                return False
            continue
        if column.rowid:
            return False
        kind = column.kind
        if kind == "TEXT" and not isinstance(value, str):
            return False
        if kind == "INTEGER" and not isinstance(value, int):
            return False
        if kind == "REAL" and not isinstance(value, int | float):
            return False
        if kind == "BLOB" and not isinstance(value, bytes):
            return False
    return True


def _rebuild(damaged: Path, fresh: Path) -> tuple[tuple[str, ...], dict[str, int]]:
    """Fill `fresh` with the data tables' rows from `damaged`: whole tables where sqlite reads
    them, page by page where it cannot. Returns (tables copied whole, rows salvaged by table)."""
    copied: list[str] = []
    broken: list[str] = []
    with closing(sqlite3.connect(fresh, isolation_level=None)) as out:
        create_data_tables(out)
        out.execute("BEGIN")
        with closing(sqlite3.connect(f"{damaged.resolve().as_uri()}?mode=ro", uri=True)) as src:
            for table in DATA_TABLES:
                try:
                    rows = src.execute(f"SELECT * FROM {table}").fetchall()
                except sqlite3.DatabaseError:
                    broken.append(table)
                    continue
                _insert(out, table, _columns(out, table), [(None, r) for r in rows])
                copied.append(table)
            skip = _walkable_pages(src, copied)
        salvaged = _salvage(damaged, out, broken, skip) if broken else {}
        _restore_sequence(out)
        out.execute("COMMIT")
    return tuple(copied), salvaged


def _walkable_pages(src: sqlite3.Connection, tables: Sequence[str]) -> set[int]:
    """Pages of the b-trees sqlite can still walk (tables read whole, their indexes, the
    schema): a page scan must not take their rows for another table's."""
    pages: set[int] = set()
    names = ["sqlite_schema", "sqlite_master", *tables]
    with suppress(sqlite3.DatabaseError):
        names += [
            r[0]
            for r in src.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
        ]
    for name in names:
        with suppress(sqlite3.DatabaseError):
            pages.update(
                r[0] for r in src.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,))
            )
    return pages


def _salvage(
    damaged: Path, out: sqlite3.Connection, tables: Sequence[str], skip: set[int]
) -> dict[str, int]:
    """Rows of `tables` read from the damaged file's leaf pages. A record is taken for a table
    only when it fits that table and no other table of the file (data or derived): a row that
    could be either is left out rather than put in the wrong place."""
    shapes = {t: _columns(out, t) for t in tables}
    decoys = _derived_shapes(out)
    found: dict[str, list[tuple[int | None, tuple[salvage.Value, ...]]]] = {t: [] for t in tables}
    with open(damaged, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        fl = salvage.layout(data)  # type: ignore[arg-type]
        skip = skip | salvage.freelist_pages(data, fl)  # type: ignore[arg-type]
        for rowid, values in salvage.leaf_records(data, fl, skip):  # type: ignore[arg-type]
            fits = [t for t, cols in shapes.items() if _fits(values, cols)]
            others = [t for t, cols in decoys.items() if t not in shapes and _fits(values, cols)]
            if len(fits) == 1 and not others:
                found[fits[0]].append((rowid, values))
    for table, rows in found.items():
        _insert(out, table, shapes[table], rows)
    return {t: len(rows) for t, rows in found.items()}


def _derived_shapes(out: sqlite3.Connection) -> dict[str, tuple[_Column, ...]]:
    """Every other rowid table an outbox holds, whose leaf pages a scan also meets: the
    sequence counter and the running statistics' tables (made in a scratch database)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scratch.sqlite"
        Outbox(path).close()
        with closing(sqlite3.connect(path)) as db:
            names = [
                r[0]
                for r in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND sql NOT LIKE '%WITHOUT ROWID%'"
                )
            ]
            return {n: _columns(db, n) for n in names if n not in DATA_TABLES}


def _insert(
    out: sqlite3.Connection,
    table: str,
    columns: Sequence[_Column],
    rows: Sequence[tuple[int | None, Sequence[salvage.Value]]],
) -> None:
    names = ", ".join(c.name for c in columns)
    marks = ", ".join("?" * len(columns))
    statement = f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"
    full: list[list[salvage.Value]] = []
    for rowid, values in rows:
        row = list(values) + [None] * (len(columns) - len(values))
        for i, column in enumerate(columns):
            if column.rowid and row[i] is None:
                row[i] = rowid
        full.append(row)
    out.executemany(statement, full)


def _restore_sequence(out: sqlite3.Connection) -> None:
    """The row counter: past every number a salvaged row carries, so new rows never reuse one."""
    (top,) = out.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM samples), 0), "
        "coalesce((SELECT max(seq) FROM events), 0))"
    ).fetchone()
    out.execute("INSERT OR REPLACE INTO sequence (id, n) VALUES (0, ?)", (int(top),))
