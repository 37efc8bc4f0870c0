"""Run management in the store: delete a run, rename it, and the notes and tags a person gives it.

Each change is one write transaction (`Outbox.maintenance`): all of it or nothing. A run is keyed
by name in every table that has a `run` column (found from the file's own schema, so a table
added later is not forgotten): delete removes its rows from each, rename changes the name in
each. A followed log file's read position carries the run it was read into
(`source_positions.run`), so after a rename `tail` goes on appending to the new name (see
`exporter.ingest.commands`), and a delete forgets the position (the logs read again make the run
again). Positions stored before runs were recorded with them belong to no run and are left.

A run whose writer lease a live process holds (training, an import, a tail) is neither deleted
nor renamed: that process would go on writing the old name. A dead holder's lease goes with the
run.

Notes are free text (`MAX_NOTES` characters); tags are short words (`tag_problem`), kept as a
sorted JSON list in `runs.tags`.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
import time
import unicodedata
from collections.abc import Iterable, Sequence

from ..errors import ExporterError
from ..lease import LEASE_COLUMNS, Lease, holder_alive, lease_from_row
from . import running_stats
from .outbox import Outbox, tags_from_json

__all__ = [
    "MAX_NOTES",
    "MAX_TAGS",
    "BadValue",
    "NameTaken",
    "RunAdminError",
    "RunInUse",
    "UnknownRun",
    "check_deletable",
    "delete_run",
    "name_problem",
    "rename_run",
    "set_notes",
    "set_tags",
    "tag_problem",
    "unknown_run",
]

MAX_NOTES = 10_000
"""Characters a run's notes may hold."""
MAX_TAGS = 32
"""Tags a run may carry."""
_MAX_TAG = 64
_MAX_NAME = 256


class RunAdminError(ExporterError):
    """A change to a run that is refused; the message says why and what to do instead."""


class UnknownRun(RunAdminError):
    """No run of that name in the store."""


class NameTaken(RunAdminError):
    """A rename onto a name the store already holds."""


class RunInUse(RunAdminError):
    """A live process holds the run's writer lease; `holder` says which ("pid 12 on host")."""

    def __init__(self, message: str, *, holder: str) -> None:
        self.holder = holder
        super().__init__(message)


class BadValue(RunAdminError):
    """A new name, a tag or notes the store does not take."""


def _controls(text: str) -> bool:
    return any(unicodedata.category(c).startswith("C") for c in text)


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a run's new name, or None. The rules of a logged run's name: line
    protocol cannot carry a control character or a trailing backslash in a tag value."""
    if not name.strip():
        return "a run name must not be empty"
    if name != name.strip():
        return f"run name {name!r} starts or ends with spaces; drop them"
    if _controls(name):
        return f"run name {name!r} holds a control character (a newline, a tab, NUL)"
    if name.endswith("\\"):
        return f"run name {name!r} ends in a backslash, which InfluxDB cannot store; drop it"
    if len(name) > _MAX_NAME:
        return f"run name {name[:40]!r}... is {len(name)} characters; names stop at {_MAX_NAME}"
    return None


def tag_problem(tag: str) -> str | None:
    """Why `tag` is no tag, or None: a tag is one word, 1 to 64 characters, without spaces,
    commas or control characters (the filter box and the CLI separate tags by them)."""
    if not tag:
        return "a tag must not be empty"
    if len(tag) > _MAX_TAG:
        return f"tag {tag[:20]!r}... is {len(tag)} characters; tags stop at {_MAX_TAG}"
    if any(c.isspace() or c == "," for c in tag) or _controls(tag):
        return f"tag {tag!r} holds a space, comma or control character; a tag is one word"
    return None


def unknown_run(run: str, known: Iterable[str]) -> str:
    """The message for a run the store does not hold, with the close names it does."""
    close = difflib.get_close_matches(run, list(known), n=3, cutoff=0.6)
    hint = (
        f"; did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else "; `rlvitals runs` lists the runs"
    )
    return f"no run named {run!r} in the store{hint}"


def _keyed_tables(db: sqlite3.Connection) -> list[str]:
    """Every table of the file with a `run` column."""
    names = [
        str(r[0])
        for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return [n for n in names if any(c[1] == "run" for c in db.execute(f"PRAGMA table_info({n})"))]


def _known(db: sqlite3.Connection) -> list[str]:
    return [str(r[0]) for r in db.execute("SELECT run FROM runs ORDER BY run")]


def _require(db: sqlite3.Connection, run: str) -> None:
    if db.execute("SELECT 1 FROM runs WHERE run = ?", (run,)).fetchone() is None:
        raise UnknownRun(unknown_run(run, _known(db)))


def _free_of_writer(db: sqlite3.Connection, run: str, what: str, ttl_s: float) -> None:
    """Refuse when a live process holds one of `run`'s leases (its writer's, or a rank's);
    dead holders' leases are dropped."""
    rows = db.execute(f"SELECT {LEASE_COLUMNS} FROM leases WHERE run = ?", (run,)).fetchall()
    for row in rows:
        lease = lease_from_row(row)
        if holder_alive(lease, time.time(), ttl_s):
            raise _in_use(run, lease, what)
    db.execute("DELETE FROM leases WHERE run = ?", (run,))


def check_deletable(outbox: Outbox, run: str, *, lease_ttl_s: float = 60.0) -> None:
    """Raise what `delete_run` would refuse for (an unknown run, a live writer), changing
    nothing: checked before the run's points are dropped from InfluxDB."""
    record = outbox.run(run)
    if record is None:
        raise UnknownRun(unknown_run(run, [r.run for r in outbox.runs()]))
    for lease in record.leases:
        if holder_alive(lease, time.time(), lease_ttl_s):
            raise _in_use(run, lease, "delete")


def _in_use(run: str, lease: Lease, what: str) -> RunInUse:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lease.since))
    why = "go on writing under the old name" if what == "rename" else "write the run again"
    return RunInUse(
        f"run {run!r} is being written by {lease.holder.describe()} ({lease.kind}, since "
        f"{since}); it would {why}. Stop that process first, then {what} the run",
        holder=lease.holder.describe(),
    )


def delete_run(outbox: Outbox, run: str, *, lease_ttl_s: float = 60.0) -> dict[str, int]:
    """Delete every row of `run` in one transaction; the rows deleted, by table."""
    with outbox.maintenance() as db:
        _require(db, run)
        _free_of_writer(db, run, "delete", lease_ttl_s)
        counts: dict[str, int] = {}
        counts["samples"] = running_stats.delete_samples(db, run)
        for table in _keyed_tables(db):
            if table != "samples":
                counts[table] = db.execute(f"DELETE FROM {table} WHERE run = ?", (run,)).rowcount
    return {t: n for t, n in counts.items() if n}


def rename_run(outbox: Outbox, old: str, new: str, *, lease_ttl_s: float = 60.0) -> None:
    """Rename `old` to `new` in every table, in one transaction."""
    problem = name_problem(new)
    if problem is not None:
        raise BadValue(problem)
    with outbox.maintenance() as db:
        _require(db, old)
        if old == new:
            raise NameTaken(f"run {old!r} already has that name")
        tables = _keyed_tables(db)
        for table in tables:
            if db.execute(f"SELECT 1 FROM {table} WHERE run = ? LIMIT 1", (new,)).fetchone():
                where = "" if table == "runs" else f" (rows of it are left in table {table})"
                raise NameTaken(
                    f"a run named {new!r} is already in the store{where}; pick another name, "
                    f"or delete that run first (`rlvitals runs delete {new}`)"
                )
        _free_of_writer(db, old, "rename", lease_ttl_s)
        # a run's points are renamed by their `run_fields` rows (the view `samples` is no table),
        # one row per field: their statistics' triggers fire on a change of `value` only
        for table in tables:
            db.execute(f"UPDATE {table} SET run = ? WHERE run = ?", (new, old))


def set_notes(outbox: Outbox, run: str, notes: str) -> str:
    """Replace `run`'s notes (empty text clears them); the notes stored."""
    if len(notes) > MAX_NOTES:
        raise BadValue(f"notes are {len(notes):,} characters; they stop at {MAX_NOTES:,}")
    if "\x00" in notes:
        raise BadValue("notes hold a NUL character")
    with outbox.maintenance() as db:
        _require(db, run)
        db.execute("UPDATE runs SET notes = ? WHERE run = ?", (notes or None, run))
    return notes


def set_tags(
    outbox: Outbox, run: str, add: Sequence[str] = (), remove: Sequence[str] = ()
) -> tuple[str, ...]:
    """Add and remove tags of `run` (removing one it lacks is no error); the tags it has now."""
    for tag in add:
        problem = tag_problem(tag)
        if problem is not None:
            raise BadValue(problem)
    with outbox.maintenance() as db:
        _require(db, run)
        (text,) = db.execute("SELECT tags FROM runs WHERE run = ?", (run,)).fetchone()
        tags = (set(tags_from_json(text)) | set(add)) - set(remove)
        if len(tags) > MAX_TAGS:
            raise BadValue(f"run {run!r} would carry {len(tags)} tags; a run carries {MAX_TAGS}")
        kept = tuple(sorted(tags))
        db.execute(
            "UPDATE runs SET tags = ? WHERE run = ?", (json.dumps(kept) if kept else None, run)
        )
    return kept
