"""The durable local outbox: one sqlite file (WAL mode) holding samples, events and runs.

Every sample is keyed (run, rank, step, measurement, gpu, field): logging the same key again
overwrites the value and marks it unsent, so a replayed step is one point, not two. Every row
written takes the next number of one sequence (a write transaction takes a block of them), so the
unsent rows read in sequence order form a range, and the points sent form a prefix of the
sequence: the forwarder marks a batch of points sent by moving one watermark to the batch's last
number (`points_sent_upto`; the `samples` view reads a point at or below it as sent), not by
writing every row. Numbers are taken inside the write transaction, so no row can later appear
below a number already read. A row re-logged while its batch was in flight got a number past that
range and is sent again. Events, few, are marked one by one. (Files written before per-row
numbers share one number per transaction; reads never split such a group, so ranges stay exact.)

A point is stored under numbers: its run and field are one row of `run_fields`, its measurement,
rank and device one row of `tag_sets`, and `points` is keyed (run_field, step, tag_set), so one
field of a run is a range of the key, walked in step order, and a row costs its numbers, not its
names (a 120-key console log: 60 bytes a row instead of 150). `samples` is the view that names
them again: every reader reads it; writers write `points`. A file from before the numbers is
moved into them once, on open (`_numbered_keys`). The same file is the embedded
store the datasource and report read (`runs`, `series`, `events`, `latest`), and it keeps what log
sources have read (`source_positions`, stored in the transaction of the samples read up to there)
and the last step each run logged (`run_progress`, for telling a resume from a restart). Several
runs, and several processes, can share one file.

Running statistics (per series: count, sum, sum of squares, first/last step, min/max seen) and
step rollups (64- and 4096-step blocks) are kept in the same file and transaction as the samples,
exact under re-logging: see `running_stats`. A file from before them gets them once, on open.

Why one module past 2,000 lines: everything here writes or reads the file through the one
connection, lock and transaction discipline of `Outbox` (busy waits, a vanished file, a full
disk, the budget), and the SQL that shares its tables sits beside it. What stands on its own
is out already: `running_stats`, `preview`, `ranks`, `run_admin`, `repair` and `salvage`.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from ..errors import OutboxError, RunHeld
from ..job import Job
from ..lease import LEASE_COLUMNS, OLD_LEASE_COLUMNS, Holder, Lease, holder_alive, lease_from_row
from ..lifecycle import Lifecycle, RankRecord, Recorded, gone_without_end
from ..schema import (
    NO_RANK,
    NOT_METRICS,
    RANK_END,
    RUN_CONFIG,
    SPREAD,
    STATE_FIELD,
    TRANSFORMS_FIELD,
    EventRow,
    FieldTransform,
    PendingPoints,
    SampleBlock,
    SampleRow,
    SourcePosition,
    transforms_from_json,
)
from . import preview, running_stats
from .ranks import rank_records, ranks_by_run
from .run_colors import fill_colors, least_used

__all__ = [
    "DATA_TABLES",
    "Claim",
    "EventRecord",
    "ForwarderState",
    "Outbox",
    "PendingEvent",
    "PendingSample",
    "RejectKey",
    "RunRecord",
    "SeriesStats",
    "StoredField",
    "create_data_tables",
    "tags_from_json",
]

_log = logging.getLogger(__name__)

ROW_BYTES = 256
"""Bytes of data a stored row costs at most, about (row, key, rollups; 60-70 on average since
keys are numbered): what the disk budget check counts a row as until the file holds enough rows
to measure it."""

_NOT_METRICS = "NOT IN (" + ", ".join(f"'{m}'" for m in sorted(NOT_METRICS)) + ")"
"""SQL: a measurement holding registry metrics (not the run config, spread or unregistered)."""
# What a line InfluxDB refused came from: ("sample", run, rank, step, measurement, gpu) for a
# point, ("event", run, rank, step, kind, "") for an event.
RejectKey = tuple[str, str, int, int, str, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY,
    project TEXT,
    config TEXT NOT NULL DEFAULT '{}',
    framework TEXT,
    created REAL NOT NULL,
    finished REAL,
    last_activity REAL,
    state TEXT,
    state_reason TEXT,
    state_at REAL,
    arrived REAL,
    notes TEXT,
    tags TEXT,
    job TEXT,
    color TEXT
);
CREATE TABLE IF NOT EXISTS leases (
    run TEXT NOT NULL,
    rank INTEGER NOT NULL DEFAULT -1,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started INTEGER,
    kind TEXT NOT NULL,
    since REAL NOT NULL,
    renewed REAL NOT NULL,
    writer_pid INTEGER,
    writer_started INTEGER,
    writer_open INTEGER,
    PRIMARY KEY (run, rank)
);
CREATE TABLE IF NOT EXISTS rank_ends (
    run TEXT NOT NULL,
    rank INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    state_at REAL NOT NULL,
    PRIMARY KEY (run, rank)
);
CREATE TABLE IF NOT EXISTS run_fields (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    field TEXT NOT NULL,
    UNIQUE (run, field)
);
CREATE TABLE IF NOT EXISTS tag_sets (
    id INTEGER PRIMARY KEY,
    measurement TEXT NOT NULL,
    rank INTEGER NOT NULL,
    gpu TEXT NOT NULL,
    UNIQUE (measurement, rank, gpu)
);
CREATE TABLE IF NOT EXISTS points (
    run_field INTEGER NOT NULL,
    step INTEGER NOT NULL,
    tag_set INTEGER NOT NULL,
    value,
    wall_time REAL NOT NULL,
    seq INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_field, step, tag_set)
);
CREATE INDEX IF NOT EXISTS points_unsent ON points(seq) WHERE sent = 0;
CREATE TABLE IF NOT EXISTS points_sent_upto (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO points_sent_upto (id, seq) VALUES (0, 0);
CREATE VIEW IF NOT EXISTS samples AS
SELECT f.run AS run, t.rank AS rank, p.step AS step, t.measurement AS measurement, t.gpu AS gpu,
       f.field AS field, p.value AS value, p.wall_time AS wall_time, p.seq AS seq,
       CASE WHEN p.sent = 0 AND p.seq <= (SELECT seq FROM points_sent_upto WHERE id = 0)
            THEN 1 ELSE p.sent END AS sent
FROM points p JOIN run_fields f ON f.id = p.run_field JOIN tag_sets t ON t.id = p.tag_set;
CREATE TRIGGER IF NOT EXISTS samples_insert INSTEAD OF INSERT ON samples
BEGIN
INSERT INTO run_fields (run, field) VALUES (NEW.run, NEW.field) ON CONFLICT DO NOTHING;
INSERT INTO tag_sets (measurement, rank, gpu) VALUES (NEW.measurement, NEW.rank, NEW.gpu)
ON CONFLICT DO NOTHING;
INSERT INTO points (run_field, step, tag_set, value, wall_time, seq, sent)
SELECT f.id, NEW.step, t.id, NEW.value, NEW.wall_time, NEW.seq, coalesce(NEW.sent, 0)
FROM run_fields f, tag_sets t
WHERE f.run = NEW.run AND f.field = NEW.field AND t.measurement = NEW.measurement
    AND t.rank = NEW.rank AND t.gpu = NEW.gpu
ON CONFLICT (run_field, step, tag_set) DO UPDATE SET value = excluded.value,
    wall_time = excluded.wall_time, seq = excluded.seq, sent = excluded.sent;
END;
CREATE TRIGGER IF NOT EXISTS samples_delete INSTEAD OF DELETE ON samples
BEGIN
DELETE FROM points
WHERE run_field = (SELECT id FROM run_fields WHERE run = OLD.run AND field = OLD.field)
    AND step = OLD.step
    AND tag_set = (SELECT id FROM tag_sets
                   WHERE measurement = OLD.measurement AND rank = OLD.rank AND gpu = OLD.gpu);
END;
CREATE TRIGGER IF NOT EXISTS samples_update INSTEAD OF UPDATE ON samples
BEGIN
SELECT RAISE(ABORT, 'samples: a row moves to another run, field or tags by a delete and an insert')
WHERE NEW.run IS NOT OLD.run OR NEW.field IS NOT OLD.field OR NEW.rank IS NOT OLD.rank
    OR NEW.measurement IS NOT OLD.measurement OR NEW.gpu IS NOT OLD.gpu;
UPDATE points SET step = NEW.step, value = NEW.value, wall_time = NEW.wall_time, seq = NEW.seq,
    sent = NEW.sent
WHERE run_field = (SELECT id FROM run_fields WHERE run = OLD.run AND field = OLD.field)
    AND step = OLD.step
    AND tag_set = (SELECT id FROM tag_sets
                   WHERE measurement = OLD.measurement AND rank = OLD.rank AND gpu = OLD.gpu);
END;
CREATE TABLE IF NOT EXISTS events (
    run TEXT NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    fields TEXT NOT NULL DEFAULT '{}',
    wall_time REAL NOT NULL,
    seq INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run, rank, step, kind)
);
CREATE INDEX IF NOT EXISTS events_unsent ON events(seq) WHERE sent = 0;
CREATE TABLE IF NOT EXISTS sequence (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
INSERT OR IGNORE INTO sequence (id, n) VALUES (0, 0);
CREATE TABLE IF NOT EXISTS source_positions (
    path TEXT PRIMARY KEY,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    head BLOB NOT NULL,
    mark BLOB NOT NULL,
    updated REAL NOT NULL,
    run TEXT
);
CREATE TABLE IF NOT EXISTS rejected (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    line TEXT NOT NULL,
    message TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_progress (
    run TEXT NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    PRIMARY KEY (run, rank)
);
"""

_OWED_TABLE = """CREATE TABLE IF NOT EXISTS rollups_owed (
    run TEXT NOT NULL,
    owner TEXT NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    PRIMARY KEY (run, owner)
)"""
"""InfluxDB rollups a sender owes for steps it sent (created by the first sender that owes)."""

_FORWARDERS_TABLE = """CREATE TABLE IF NOT EXISTS forwarders (
    owner TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started REAL NOT NULL,
    updated REAL NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL,
    sent INTEGER NOT NULL,
    rate REAL,
    backlog INTEGER NOT NULL,
    oldest REAL
)"""
"""What each forwarder sending this store is doing (`ForwarderState`), as it last said."""

DATA_TABLES = (
    "runs",
    "run_fields",
    "tag_sets",
    "points",
    "events",
    "source_positions",
    "rejected",
    "run_progress",
)
"""The tables holding what was logged and read; the others (the sequence counter, running
statistics, rollups) are derived from these. `samples` is the view of `points` under their `run_fields` and `tag_sets`."""


_WATERMARK = "(SELECT seq FROM points_sent_upto WHERE id = 0)"
"""SQL: the sequence number up to which the forwarders sent every point (`mark_ranges`)."""
_UNSENT_POINTS = f"x.sent = 0 AND x.seq > {_WATERMARK}"
"""Points not yet sent (`x`: the points table): unmarked and past the forwarders' watermark."""


def _closes_the_gap(db: sqlite3.Connection, first: int) -> bool:
    """Whether no unsent point lies between the watermark and `first` (a batch read from the
    watermark on): then marking the batch sent is moving the watermark to its end."""
    return (
        db.execute(
            f"SELECT 1 FROM points x WHERE {_UNSENT_POINTS} AND x.seq < ? LIMIT 1", (first,)
        ).fetchone()
        is None
    )


def _statements(script: str) -> list[str]:
    """The statements of a script, whole (a trigger's body holds semicolons of its own)."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    return out


def create_data_tables(db: sqlite3.Connection) -> None:
    """The outbox's tables in an empty file (the running statistics come when an `Outbox`
    opens it): what a salvage fills before the statistics are computed once."""
    db.executescript(_SCHEMA)


# A position keeps the run it was read into when the batch does not say (see `_batch_run`).
_UPSERT_POSITION = """
INSERT INTO source_positions (path, dev, ino, offset, lines, head, mark, updated, run)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (path) DO UPDATE SET dev = excluded.dev, ino = excluded.ino, offset = excluded.offset,
    lines = excluded.lines, head = excluded.head, mark = excluded.mark, updated = excluded.updated,
    run = coalesce(excluded.run, source_positions.run)
"""

_UPSERT_PROGRESS = """
INSERT INTO run_progress (run, rank, step) VALUES (?, ?, ?)
ON CONFLICT (run, rank) DO UPDATE SET step = excluded.step
"""

# A row's run and field get their number once (`run_fields`), its measurement, rank and device
# theirs (`tag_sets`), then the point goes under them: the key of a point is three integers, not
# the run's and field's names again in every row and index entry (bench/bench_console_import.py:
# 83 + 67 bytes a row before, the insert 3.9 us a row). The key keeps the order readers walk: a
# run's field, then its steps.
_INSERT_KEYS = (
    "INSERT INTO run_fields (run, field) VALUES (?, ?) ON CONFLICT DO NOTHING",
    "INSERT INTO tag_sets (measurement, rank, gpu) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
)
_UPSERT_POINT = """
INSERT INTO points (run_field, step, tag_set, value, wall_time, seq, sent)
VALUES ((SELECT id FROM run_fields WHERE run = ?1 AND field = ?6), ?3,
        (SELECT id FROM tag_sets WHERE measurement = ?4 AND rank = ?2 AND gpu = ?5),
        ?7, ?8, ?9, 0)
ON CONFLICT (run_field, step, tag_set) DO UPDATE SET
    value = excluded.value, wall_time = excluded.wall_time, seq = excluded.seq, sent = 0
"""

# A second health event at the same step adds its text instead of replacing the first.
_UPSERT_EVENT = """
INSERT INTO events (run, rank, step, kind, text, fields, wall_time, seq, sent)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)
ON CONFLICT (run, rank, step, kind) DO UPDATE SET
    text = CASE
        WHEN excluded.kind = 'health' AND instr(events.text, excluded.text) = 0
        THEN events.text || '; ' || excluded.text
        ELSE excluded.text END,
    fields = excluded.fields, wall_time = excluded.wall_time, seq = excluded.seq, sent = 0
"""

# The same upsert for a whole batch in one statement, its rows one JSON array: sqlite3 lets go of
# the GIL around every step it runs, and `executemany` runs one step per row, so in a training
# process whose loop holds the GIL each row would wait up to a switch interval (5 ms) to get it
# back. One statement is one step: the rows are stored while the training thread runs. (The
# statement is a row into `rows_call`, whose trigger numbers the series, then stores the points.)
_ROWS_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS rows_call (first INTEGER, rows TEXT)",
    """CREATE TEMP TRIGGER IF NOT EXISTS rows_call_apply AFTER INSERT ON rows_call
BEGIN
INSERT INTO run_fields (run, field)
SELECT DISTINCT json_extract(value, '$[0]'), json_extract(value, '$[5]')
FROM json_each(NEW.rows) WHERE true
ON CONFLICT DO NOTHING;
INSERT INTO tag_sets (measurement, rank, gpu)
SELECT DISTINCT json_extract(value, '$[3]'), json_extract(value, '$[1]'), json_extract(value, '$[4]')
FROM json_each(NEW.rows) WHERE true
ON CONFLICT DO NOTHING;
INSERT INTO points (run_field, step, tag_set, value, wall_time, seq, sent)
SELECT f.id, json_extract(j.value, '$[2]'), t.id, json_extract(j.value, '$[6]'),
       json_extract(j.value, '$[7]'), NEW.first + j.key, 0
FROM json_each(NEW.rows) j
JOIN run_fields f ON f.run = json_extract(j.value, '$[0]') AND f.field = json_extract(j.value, '$[5]')
JOIN tag_sets t ON t.measurement = json_extract(j.value, '$[3]')
    AND t.rank = json_extract(j.value, '$[1]') AND t.gpu = json_extract(j.value, '$[4]')
WHERE true
ON CONFLICT (run_field, step, tag_set) DO UPDATE SET
    value = excluded.value, wall_time = excluded.wall_time, seq = excluded.seq, sent = 0;
DELETE FROM rows_call;
END""",
)
_ROWS_CALL = "INSERT INTO temp.rows_call (first, rows) VALUES (:first, :rows)"

# A columnar block (`SampleBlock`) in one statement whatever its size: a row into `block_call`,
# whose trigger puts its steps and columns into two per-connection tables keyed by position, then
# every value, numbered in row-major order, joined to its step and column by the position it has
# in the JSON array (a null there is a hole: no sample, nothing stored, its number unused).
# One statement, not five: each lets go of the GIL and must take it back
# (see `running_stats._FOLD_CALL`). A trigger's INSERT and DELETE name their tables unqualified.
_BLOCK_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS block_steps "
    "(i INTEGER PRIMARY KEY, step INTEGER NOT NULL, wall_time REAL NOT NULL)",
    "CREATE TEMP TABLE IF NOT EXISTS block_columns (i INTEGER PRIMARY KEY, "
    "measurement TEXT NOT NULL, gpu TEXT NOT NULL, field TEXT NOT NULL, run_field INTEGER, "
    "tag_set INTEGER)",
    "CREATE TEMP TABLE IF NOT EXISTS block_call (run TEXT, rank INTEGER, first INTEGER, "
    "width INTEGER, steps TEXT, columns TEXT, vals TEXT)",
    """CREATE TEMP TRIGGER IF NOT EXISTS block_call_apply AFTER INSERT ON block_call
BEGIN
INSERT INTO block_steps (i, step, wall_time)
SELECT key, json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(NEW.steps);
INSERT INTO block_columns (i, measurement, gpu, field)
SELECT key, json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
FROM json_each(NEW.columns);
INSERT INTO run_fields (run, field) SELECT NEW.run, field FROM temp.block_columns WHERE true
ON CONFLICT DO NOTHING;
INSERT INTO tag_sets (measurement, rank, gpu)
SELECT measurement, NEW.rank, gpu FROM temp.block_columns WHERE true
ON CONFLICT DO NOTHING;
UPDATE block_columns SET
    run_field = (SELECT id FROM run_fields WHERE run = NEW.run AND field = block_columns.field),
    tag_set = (SELECT id FROM tag_sets WHERE measurement = block_columns.measurement
               AND rank = NEW.rank AND gpu = block_columns.gpu);
INSERT INTO points (run_field, step, tag_set, value, wall_time, seq, sent)
SELECT c.run_field, s.step, c.tag_set, v.value, s.wall_time, NEW.first + v.key, 0
FROM json_each(NEW.vals) v
JOIN temp.block_steps s ON s.i = v.key / NEW.width
JOIN temp.block_columns c ON c.i = v.key % NEW.width
WHERE v.type != 'null'
ON CONFLICT (run_field, step, tag_set) DO UPDATE SET
    value = excluded.value, wall_time = excluded.wall_time, seq = excluded.seq, sent = 0;
DELETE FROM block_steps;
DELETE FROM block_columns;
DELETE FROM block_call;
END""",
)
_BLOCK_CALL = """INSERT INTO temp.block_call (run, rank, first, width, steps, columns, vals)
VALUES (:run, :rank, :first, :width, :steps, :columns, :values)"""

# Numbers whose decimal text is hard to read back exactly (subnormals, the largest double, halfway
# cases, 2**53 + 1): the JSON statement is used only when this sqlite reads every one back as the
# same double, since an old sqlite's text-to-double conversion may round differently.
_HARD_FLOATS = (
    5e-324,
    2.2250738585072014e-308,
    2.225073858507201e-308,
    1.7976931348623157e308,
    8.98846567431158e307,
    0.1,
    0.30000000000000004,
    1.0000000000000002,
    9007199254740992.0,
    1e23,
    123456789012345680.0,
    7e-10,
    1e-7,
    1e16,
    -0.0,
    0.0,
)

_NUMERIC = "typeof(value) IN ('real', 'integer')"

# Highest step of a run and rank: per field, the last step of its points (an index walk from
# each field's end), so a long run is not scanned row by row.
_MAX_STEP = f"""
SELECT max((SELECT p.step FROM points p JOIN tag_sets t ON t.id = p.tag_set
            WHERE p.run_field = f.id AND t.rank = :rank AND t.measurement != '{RUN_CONFIG}'
            ORDER BY p.step DESC LIMIT 1))
FROM run_fields f WHERE f.run = :run
"""


@dataclass(frozen=True)
class SeriesStats:
    """Running statistics of one series (run, field, rank, measurement, gpu) over every finite
    value stored: kept by the outbox's triggers, exact under re-logging (min/max are the lowest
    and highest value ever seen, including overwritten ones)."""

    run: str
    field: str
    rank: int | None
    measurement: str
    gpu: str
    count: int
    total: float
    total_sq: float
    first_step: int
    last_step: int
    min_seen: float
    max_seen: float

    @property
    def mean(self) -> float:
        return self.total / self.count


@dataclass(frozen=True)
class StoredField:
    """One field a run has stored, in which measurement: a registry group, `unregistered`
    (a name the registry does not know, kept as logged), `spread` (count/min/max of a step
    that logged several values) or `run_config`."""

    measurement: str
    field: str
    count: int
    first_step: int
    last_step: int


@dataclass(frozen=True)
class ForwarderState:
    """What a forwarder said it was doing, as of `updated` (every few seconds while it runs).

    `state`: sending, failing (InfluxDB refuses; `detail` says how), draining (the training
    process exited: it sends what is left for a bounded time), drained, stopped (`detail`: what
    was left). `sent`: rows and events it sent since it started; `rate`: rows/s lately;
    `backlog`: rows of the store not yet sent; `oldest`: the wall time the oldest of them was
    logged at."""

    owner: str
    pid: int
    host: str
    started: float
    updated: float
    state: str
    detail: str
    sent: int
    rate: float | None
    backlog: int
    oldest: float | None


@dataclass(frozen=True)
class RunRecord:
    run: str
    project: str | None
    config: Mapping[str, Any]
    framework: str | None
    created: float
    finished: float | None = None
    """Wall time the run was marked finished (`Run.finish()`, or the sidecar saw its logs end)."""
    last_activity: float | None = None
    """Wall time of the latest step the run logged (the trainer's clock: data, not activity)."""
    state: str | None = None
    """The recorded end (`finished`, `crashed`, `ended`) or `importing`; None while nothing
    ended it (see `lifecycle.py`)."""
    state_reason: str | None = None
    state_at: float | None = None
    arrived: float | None = None
    """When rows of the run last reached the store (store clock)."""
    lease: Lease | None = None
    """The live writer's lease, if one is held."""
    notes: str = ""
    """What a person wrote about the run (`rlvitals runs note`, the run page)."""
    tags: tuple[str, ...] = ()
    """Its tags, sorted (`rlvitals runs tag`, the run list)."""
    ranks: tuple[RankRecord, ...] = ()
    """A run several ranks of one job log: each rank's lease or end (`exporter.job`)."""
    job: str | None = None
    """The key of the job whose ranks log it (`exporter.job.Job.key`), None for one process."""
    color: str | None = None
    """Its colour on every chart, chosen when it was created (`run_colors`)."""

    @property
    def recorded(self) -> Recorded:
        """What `Lifecycle.status` reads."""
        # a file from before arrivals were recorded: the newest step's wall time stands in
        arrived = self.arrived if self.arrived is not None else self.last_activity
        return Recorded(
            self.state, self.state_reason, self.state_at, arrived, self.lease, self.ranks
        )

    @property
    def leases(self) -> tuple[Lease, ...]:
        """Every writer lease held on the run: its one writer's, or each rank's."""
        own = () if self.lease is None else (self.lease,)
        return own + tuple(r.lease for r in self.ranks if r.lease is not None)


@dataclass(frozen=True)
class Claim:
    """The name a starting writer got, whether it goes on with a stored run, and the lease it
    took over from a writer that had died (None if there was none)."""

    name: str
    resumed: bool
    took_over: Lease | None = None
    recorded: bool = True
    """False when the store stayed locked: the name was read, nothing was recorded (no run
    row, no lease, no place in the job) and the writer must claim it again."""


@dataclass(frozen=True)
class EventRecord:
    run: str
    rank: int | None
    step: int
    kind: str
    text: str
    fields: Mapping[str, Any]
    wall_time: float


@dataclass(frozen=True)
class PendingSample:
    """An unsent sample as the forwarder reads it (with its run's project)."""

    rowid: int
    seq: int
    run: str
    project: str | None
    rank: int | None
    step: int
    measurement: str
    gpu: str
    field: str
    value: float | str
    wall_time: float


@dataclass(frozen=True)
class PendingEvent:
    rowid: int
    seq: int
    run: str
    project: str | None
    rank: int | None
    step: int
    kind: str
    text: str
    fields: Mapping[str, Any]
    wall_time: float


_BUSY_TIMEOUT_MS = 30_000
"""How long a write waits for another process's write lock before giving up."""
_JOURNAL_LIMIT = 4 * 1024 * 1024
"""Bytes the write-ahead log is truncated to after a checkpoint (sqlite's journal_size_limit)."""
_LARGE_WRITE = 20_000
"""Rows from which a write gets `_LARGE_WRITE_CACHE_KIB` of page cache for its transaction."""
_LARGE_WRITE_CACHE_KIB = 64 * 1024
"""The page cache of a large write (an import's batch of 2,000 steps x 120 keys touches some
60 MB of table and index pages). With sqlite's default 2 MB the transaction spilled changed pages
to the log and read them back, storing a row in 4.3-5.4 us instead of 3.5-3.7 (a verl console
log's 2.4M values: 2-4 s less). Given back after the commit (`shrink_memory`): a training
process's small writes keep the default."""
_MEASURE = (
    "SELECT (SELECT page_count FROM pragma_page_count()), "
    "(SELECT freelist_count FROM pragma_freelist_count()), "
    "(SELECT n FROM sequence WHERE id = 0)"
)
"""Pages in use and rows numbered, in one trip to sqlite: what the disk budget is judged on at
every write (each trip is a GIL hand-off with the training loop)."""

_RUN_COLUMNS = (
    "runs.run, project, config, framework, created, finished, last_activity, state, "
    f"state_reason, state_at, arrived, {LEASE_COLUMNS}, runs.notes, runs.tags, runs.job, "
    "runs.color"
)
# the lease of a writer logging without a rank; the ranks' leases are read with their ends
_RUN_FROM = f"runs LEFT JOIN leases ON leases.run = runs.run AND leases.rank = {NO_RANK}"


_JOURNAL_SUFFIXES = ("-wal", "-shm")
_LIFECYCLE_COLUMNS = (
    ("finished", "REAL"),
    ("last_activity", "REAL"),
    ("state", "TEXT"),
    ("state_reason", "TEXT"),
    ("state_at", "REAL"),
    ("arrived", "REAL"),
    ("notes", "TEXT"),
    ("tags", "TEXT"),
    ("job", "TEXT"),
    ("color", "TEXT"),
)
_LEASES = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS leases") :].split(";")[0]
_RANK_ENDS = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS rank_ends") :].split(";")[0]


def _journal_identities(path: Path) -> tuple[tuple[int, int] | None, ...]:
    """(device, inode) of the write-ahead log and its index, each None when absent."""
    out: list[tuple[int, int] | None] = []
    for suffix in _JOURNAL_SUFFIXES:
        try:
            out.append(_identity(Path(f"{path}{suffix}")))
        except OSError:
            out.append(None)
    return tuple(out)


def _identity(path: Path) -> tuple[int, int]:
    """(device, inode) of the file: what a deleted or replaced store changes."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


_BUDGET_SLACK = 0.1
"""Share of the disk budget that must be free again before a store that filled takes rows."""
_FULL_MARGIN = 1024 * 1024
"""Free bytes that must appear after a full-disk failure before the next write is tried."""
_FULL_RETRY = 5.0
"""Seconds after which a write is tried at a full disk anyway."""


def _row_bytes(size: int, rows: int) -> float:
    """Bytes a row costs in a file of `size` bytes of data and `rows` rows numbered: measured
    (a tenth added for the pages a row's key and statistics add unevenly) once there are enough
    rows to say, `ROW_BYTES` before. A measured cost fills the budget in a batch or two; a fixed
    guess twice the real one would creep towards it, storing scattered steps on the way."""
    if rows < 1000:
        return float(ROW_BYTES)
    return min(2.0 * ROW_BYTES, max(32.0, 1.1 * size / rows))


def _free_bytes(folder: Path) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _is_full(exc: sqlite3.Error) -> bool:
    """sqlite's "database or disk is full" (SQLITE_FULL; its unix layer maps ENOSPC to it)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _run_record(row: Sequence[Any], ranks: tuple[RankRecord, ...] = ()) -> RunRecord:
    lease = None if row[11] is None else lease_from_row(row[11:20])
    return RunRecord(
        row[0],
        row[1],
        json.loads(row[2]),
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        row[9],
        row[10],
        lease,
        row[20] or "",
        tags_from_json(row[21]),
        ranks,
        row[22],
        row[23],
    )


def _new_color(db: sqlite3.Connection) -> str:
    """The colour a run created now gets: the palette's least used by the store's runs."""
    return least_used(r[0] for r in db.execute("SELECT color FROM runs"))


def _fill_colors(db: sqlite3.Connection) -> None:
    """Give the runs of a file from before run colours theirs, as creation would have (in
    creation order); inside a write transaction."""
    rows = db.execute("SELECT run, color FROM runs ORDER BY created, run").fetchall()
    if all(r[1] is not None for r in rows):
        return
    for (run, had), color in zip(rows, fill_colors([r[1] for r in rows]), strict=True):
        if had is None:
            db.execute("UPDATE runs SET color = ? WHERE run = ?", (color, run))


def tags_from_json(text: str | None) -> tuple[str, ...]:
    """A run's stored tags (a JSON list in `runs.tags`; NULL or damaged text: none)."""
    if not text:
        return ()
    try:
        tags = json.loads(text)
    except ValueError:
        return ()
    return tuple(sorted({t for t in tags if isinstance(t, str)})) if isinstance(tags, list) else ()


def _batch_run(
    samples: Sequence[SampleRow],
    progress: Sequence[tuple[str, int, int]],
    blocks: Sequence[tuple[int, SampleBlock]],
) -> str | None:
    """The one run a batch's rows belong to (a run's worker writes its read positions with its
    own rows), or None when it holds none or several: the position then keeps the run stored
    with it before. What `runs rename` and `runs delete` find a followed file's position by."""
    # a scan of every row, but only of batches with positions (a log reader's, not training's)
    runs = {run for run, _, _ in progress} | {b.run for _, b in blocks} | {r[0] for r in samples}
    return runs.pop() if len(runs) == 1 else None


def _lease(db: sqlite3.Connection, run: str, rank: int = NO_RANK) -> Lease | None:
    """The lease of `run`'s writer of `rank` (`NO_RANK`: the writer of a run without ranks)."""
    try:
        row = db.execute(
            f"SELECT {LEASE_COLUMNS} FROM leases WHERE run = ? AND rank = ?", (run, rank)
        ).fetchone()
    except sqlite3.OperationalError:
        # a file whose leases table has no writer or rank columns yet (the next writable open
        # adds them): its one lease per run is the writer's without a rank
        if rank != NO_RANK:
            return None
        row = db.execute(f"SELECT {OLD_LEASE_COLUMNS} FROM leases WHERE run = ?", (run,)).fetchone()
    return None if row is None else lease_from_row(row)


def _placed(db: sqlite3.Connection, run: str, rank: int) -> bool:
    """Whether `rank` already has a place in `run`: a lease, an end, or a step it logged."""
    return any(
        db.execute(
            f"SELECT 1 FROM {table} WHERE run = ? AND rank = ? LIMIT 1", (run, rank)
        ).fetchone()
        is not None
        for table in ("leases", "rank_ends", "run_progress")
    )


def _merged(
    samples: Sequence[SampleRow], blocks: Sequence[tuple[int, SampleBlock]]
) -> list[SampleRow]:
    """Rows and blocks as rows, in their order."""
    out: list[SampleRow] = []
    done = 0
    for at, block in blocks:
        out += samples[done:at]
        out += block.rows()
        done = at
    out += samples[done:]
    return out


def _written_twice(samples: Sequence[SampleRow], blocks: Sequence[SampleBlock]) -> bool:
    """Whether a block shares a key (run, rank, measurement, gpu, field and step) with another
    block or a row of the same batch: two calls at one step logging one name in two shapes.

    A sweep over each series' blocks in step order, and a search for each row: a batch whose
    calls were cut into hundreds of blocks (a NaN every few calls) took a quarter of the
    worker's time comparing every block with every other."""
    series: dict[tuple[str, int], list[tuple[int, int, frozenset[Any]]]] = {}
    for b in blocks:
        if b.steps:
            series.setdefault((b.run, b.rank), []).append(
                (b.steps[0], b.steps[-1], frozenset(b.columns))
            )
    starts: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for key, spans in series.items():
        spans.sort(key=lambda span: span[0])
        open_spans: list[tuple[int, frozenset[Any]]] = []  # (last step, columns) reaching here
        reach: list[int] = []  # the furthest last step of the spans up to each
        for lo, hi, columns in spans:
            open_spans = [(end, cols) for end, cols in open_spans if end >= lo]
            if any(cols & columns for _, cols in open_spans):
                return True
            open_spans.append((hi, columns))
            reach.append(max(hi, reach[-1]) if reach else hi)
        starts[key] = ([span[0] for span in spans], reach)
    for row in samples:
        found = starts.get((row[0], row[1]))
        if found is None:
            continue
        spans, (los, reach) = series[(row[0], row[1])], found
        step, column = row[2], (row[3], row[4], row[5])
        i = bisect.bisect_right(los, step) - 1
        while i >= 0 and reach[i] >= step:
            if spans[i][1] >= step and column in spans[i][2]:
                return True
            i -= 1
    return False


def _activity(
    samples: Sequence[SampleRow],
    progress: Sequence[tuple[str, int, int]],
    given: Mapping[str, float] | None,
    blocks: Sequence[tuple[int, SampleBlock]] = (),
) -> dict[str, float]:
    """Wall time of each progressing run's latest logged step: the caller's, or the latest of
    its rows and blocks (rows are in logging order, so the scan from the end stops at once in the
    common case)."""
    wanted = {run for run, _, _ in progress}
    found = {run: wall for run, wall in (given or {}).items() if run in wanted}
    from_rows: dict[str, float] = {}
    for row in reversed(samples):
        if len(from_rows) + len(found) >= len(wanted):
            break
        if row[0] in wanted and row[0] not in found and row[0] not in from_rows:
            from_rows[row[0]] = row[7]
    for _, block in blocks:
        if block.run in wanted and block.run not in found and block.wall_times:
            latest = max(block.wall_times)
            from_rows[block.run] = max(latest, from_rows.get(block.run, latest))
    return {**from_rows, **found}


def _rank(value: int) -> int | None:
    return None if value == NO_RANK else value


def _reads_json_exactly(db: sqlite3.Connection) -> bool:
    """Whether this sqlite has `json_each` and reads every `_HARD_FLOATS` text back exactly."""
    try:
        text = orjson.dumps([[x] for x in _HARD_FLOATS]).decode()
        got = [
            r[0]
            for r in db.execute("SELECT json_extract(value, '$[0]') FROM json_each(?)", (text,))
        ]
    except sqlite3.Error:
        return False
    return len(got) == len(_HARD_FLOATS) and all(
        type(g) is float and g == x and math.copysign(1, g) == math.copysign(1, x)
        for g, x in zip(got, _HARD_FLOATS, strict=True)
    )


def _json_rows(samples: Sequence[SampleRow]) -> str | None:
    """The rows as one JSON array for `_ROWS_CALL`, or None when JSON cannot carry them
    exactly (a non-finite float, an integer beyond 64 bits, a string that is not valid UTF-8):
    `executemany` then binds them one by one and refuses what sqlite cannot take."""
    try:
        text = orjson.dumps(samples, option=orjson.OPT_STRICT_INTEGER).decode()
    except (orjson.JSONEncodeError, UnicodeError):
        return None
    if "null" in text and any(
        type(row[6]) is float and not math.isfinite(row[6]) for row in samples
    ):
        return None
    return text


class Outbox:
    """A connection to the outbox file. Thread-safe; open one per thread for concurrency."""

    def __init__(self, path: Path | str, *, budget_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._over_budget_logged = False
        self._budget_hit = False  # rows were refused for the budget (see budget_reached)
        self._full: tuple[float, int] | None = None  # (monotonic time, free bytes) at a full disk
        self._full_logged = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA temp_store=MEMORY")
            # a log grown by one large transaction is cut back after the next checkpoint,
            # so the files stay near the data the budget counts
            self._db.execute(f"PRAGMA journal_size_limit={_JOURNAL_LIMIT}")
            if self._samples_table():
                self._numbered_keys()
            if not self._has_schema():
                # in one transaction: a reader of a new file sees every table or none (it
                # treats a file without `runs` as empty; with `runs` and not yet `points`, the
                # datasource's health said the store was unreadable)
                self._db.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nCOMMIT;")
            self._ensure_sent_upto()
            self._ensure_lifecycle_columns()
            self._ensure_stats()
            running_stats.prepare(self._db)
            for statement in (*_ROWS_TABLES, *_BLOCK_TABLES):
                self._db.execute(statement)
            self._json_writes = _reads_json_exactly(self._db)
            ((self._page_size,),) = self._db.execute("PRAGMA page_size").fetchall()
            self._identity = _identity(self.path)
            self._journal = _journal_identities(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise OutboxError(
                f"cannot open the outbox at {self.path}: {exc}. Check RLVITALS_STORE points to a "
                "writable folder on a local disk."
            ) from exc

    def vanished(self) -> str | None:
        """Why the file this connection writes is no longer the store at `path` ("deleted",
        "replaced"), or None. A connection keeps writing an unlinked or renamed file without an
        error, and nothing in it is read again: the caller must count what it stored as lost."""
        try:
            now = _identity(self.path)
        except FileNotFoundError:
            return "deleted"
        except OSError:
            return None  # cannot tell (a permission change): the next write says more
        return None if now == self._identity else "replaced"

    def set_aside_stale_journal(self) -> list[Path]:
        """After `close()` on a file that `vanished()`: rename the write-ahead log and its index
        this connection used, when they are still at the path, to `*.stale-<pid>-<time>`.

        SQLite pairs the file at a path with the `-wal` at that path, and it does not delete
        the log of a file that was renamed while open (see sqlite.org/howtocorrupt.html, "2.4
        Unlinking or renaming a database file while in use"); left there, the old file's pages
        would be read as the new file's. Only the files this connection saw are moved (same
        inode), so a log another process already started for the new file stays. Nothing is
        deleted: the old pages are kept beside the store."""
        moved: list[Path] = []
        stamp = f"stale-{os.getpid()}-{int(time.time())}"
        for suffix, seen in zip(_JOURNAL_SUFFIXES, self._journal, strict=True):
            name = Path(f"{self.path}{suffix}")
            try:
                if seen is None or _identity(name) != seen:
                    continue
                target = name.with_name(f"{name.name}.{stamp}")
                os.rename(name, target)
            except OSError:
                continue
            moved.append(target)
        if moved:
            _log.warning(
                "rlvitals outbox %s was replaced or deleted while open: its old write-ahead log "
                "was moved aside to %s so the file now at the path is read as it is",
                self.path,
                ", ".join(str(m) for m in moved),
            )
        return moved

    def _ensure_lifecycle_columns(self) -> None:
        """Give a `runs` table from before the recorded lifecycle its columns (NULL: unknown)
        and the file its leases table."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        for column, kind in _LIFECYCLE_COLUMNS:
            if column not in have:
                with suppress(sqlite3.OperationalError):  # another process added it first
                    self._db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
        if self._db.execute("SELECT 1 FROM runs WHERE color IS NULL LIMIT 1").fetchone():
            # runs from before run colours get theirs once (busy: the next open does it)
            with suppress(sqlite3.OperationalError), self._transaction() as db:
                _fill_colors(db)
        with suppress(sqlite3.OperationalError):  # busy: the next open adds it
            self._db.execute(_LEASES)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(leases)")}
        for column in ("writer_pid", "writer_started", "writer_open"):
            if have and column not in have:
                with suppress(sqlite3.OperationalError):  # another process added it first
                    self._db.execute(f"ALTER TABLE leases ADD COLUMN {column} INTEGER")
        if have and "rank" not in have:
            self._lease_per_rank()
        with suppress(sqlite3.OperationalError):  # busy: the next open adds it
            self._db.execute(_RANK_ENDS)
        # the run a read position was read into (`runs rename` / `delete` follow it); NULL in a
        # file from before: such a position is found by no run
        have = {row[1] for row in self._db.execute("PRAGMA table_info(source_positions)")}
        if have and "run" not in have:
            with suppress(sqlite3.OperationalError):
                self._db.execute("ALTER TABLE source_positions ADD COLUMN run TEXT")

    def _lease_per_rank(self) -> None:
        """A leases table from before ranks (one lease per run) rebuilt with a lease per (run,
        rank), its leases kept as those of writers without a rank. sqlite cannot change a
        table's key in place: the rows move to a new table, in one transaction."""
        with suppress(sqlite3.OperationalError), self._transaction() as db:  # busy: next open
            have = {row[1] for row in db.execute("PRAGMA table_info(leases)")}
            if "rank" in have:
                return  # another process rebuilt it first
            db.execute("ALTER TABLE leases RENAME TO leases_before_ranks")
            db.execute(_LEASES)
            columns = "run, pid, host, started, kind, since, renewed"
            db.execute(
                f"INSERT INTO leases ({columns}, rank) SELECT {columns}, {NO_RANK} "
                "FROM leases_before_ranks"
            )
            db.execute("DROP TABLE leases_before_ranks")

    def _samples_table(self, db: sqlite3.Connection | None = None) -> bool:
        """Whether the file is from before keys were numbered: its samples a table of their
        own, each row naming its run and field."""
        row = (
            (db or self._db)
            .execute("SELECT type FROM sqlite_master WHERE name = 'samples'")
            .fetchone()
        )
        return row is not None and row[0] == "table"

    def _numbered_keys(self) -> None:
        """Move a file's samples from the table of before into numbered keys and their points,
        in one transaction (other processes wait; a 2.4M-row file takes 6 s). The running
        statistics it kept stay (their triggers are made again, on `points`), and `samples`
        becomes the view of the same rows that every reader reads."""
        started = time.perf_counter()
        with self._transaction() as db:
            if not self._samples_table(db):
                return  # another process moved them first
            ((stats_version,),) = db.execute("PRAGMA user_version").fetchall()
            # the old table out of the view's way (its index and triggers go with it), then the
            # schema as a new file gets it, in this transaction: no reader sees the file without
            db.execute("ALTER TABLE samples RENAME TO samples_before_numbers")
            for statement in _statements(_SCHEMA):
                db.execute(statement)
            db.execute(
                "INSERT INTO run_fields (run, field) "
                "SELECT DISTINCT run, field FROM samples_before_numbers"
            )
            db.execute(
                "INSERT INTO tag_sets (measurement, rank, gpu) "
                "SELECT DISTINCT measurement, rank, gpu FROM samples_before_numbers"
            )
            db.execute(
                "INSERT INTO points (run_field, step, tag_set, value, wall_time, seq, sent) "
                "SELECT f.id, x.step, t.id, x.value, x.wall_time, x.seq, x.sent "
                "FROM samples_before_numbers x "
                "JOIN run_fields f ON f.run = x.run AND f.field = x.field "
                "JOIN tag_sets t ON t.measurement = x.measurement AND t.rank = x.rank "
                "AND t.gpu = x.gpu"
            )
            db.execute("DROP TABLE samples_before_numbers")
            running_stats.keep_over_numbered_keys(db, int(stats_version))
        elapsed = time.perf_counter() - started
        _log.info(
            "rlvitals outbox %s: samples moved to numbered keys in %.1f s", self.path, elapsed
        )

    def _ensure_sent_upto(self) -> None:
        """Give a file from before the forwarder's watermark its `points_sent_upto` and the
        `samples` view that reads it (the view's triggers are made again with it), in one
        transaction. Its rows marked sent one by one stay marked; the watermark starts at 0."""
        row = self._db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'samples'"
        ).fetchone()
        if row is None or "points_sent_upto" in row[0]:
            return
        with self._transaction() as db:
            row = db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'samples'"
            ).fetchone()
            if row is None or "points_sent_upto" in row[0]:
                return  # another process made it first
            db.execute("DROP VIEW samples")  # its INSTEAD OF triggers go with it
            for statement in _statements(_SCHEMA):
                db.execute(statement)

    def _has_schema(self) -> bool:
        """Whether the file already has every table (then opening it writes nothing, so it
        opens while another process holds the write lock)."""
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
        wanted = {
            "runs",
            "run_fields",
            "tag_sets",
            "points",
            "samples",
            "events",
            "sequence",
            "source_positions",
            "run_progress",
            "rejected",
            "leases",
            "rank_ends",
        }
        if not wanted <= names:
            return False
        return self._db.execute("SELECT 1 FROM sequence WHERE id = 0").fetchone() is not None

    def _ensure_stats(self) -> None:
        """Give a file from before the running statistics their tables, triggers and a backfill
        from the rows it holds: once, in one transaction (other writers wait for it)."""
        if running_stats.installed(self._db):
            return
        started = time.perf_counter()
        with self._transaction() as db:
            if running_stats.installed(db):
                return
            running_stats.install(db)
        elapsed = time.perf_counter() - started
        if elapsed > 1.0:
            _log.info("rlvitals outbox %s: running statistics built in %.1f s", self.path, elapsed)

    def rebuild_statistics(self) -> None:
        """Recompute the running statistics and rollups from the stored rows, in one transaction
        (for a file filled by a tool writing rows without the outbox, or a repair)."""
        try:
            with self._transaction() as db:
                running_stats.install(db)
        except sqlite3.Error as exc:
            raise OutboxError(
                f"cannot rebuild statistics in the outbox at {self.path}: {exc}"
            ) from exc

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, rows: int = 0) -> Iterator[sqlite3.Connection]:
        """A write transaction; one of `_LARGE_WRITE` rows or more gets a large page cache."""
        with self._lock:
            large = rows >= _LARGE_WRITE
            if large:
                (default,) = self._db.execute("PRAGMA cache_size").fetchone()
                self._db.execute(f"PRAGMA cache_size = {-_LARGE_WRITE_CACHE_KIB}")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    # sqlite rolls some failures back itself (a full disk): a second ROLLBACK
                    # would raise "no transaction is active" in place of the failure that matters
                    if self._db.in_transaction:
                        with suppress(sqlite3.Error):
                            self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                if large:
                    with suppress(sqlite3.Error):
                        self._db.execute(f"PRAGMA cache_size = {int(default)}")
                        self._db.execute("PRAGMA shrink_memory")

    def _measure(self) -> tuple[int, int]:
        """(bytes of data, rows numbered so far)."""
        with self._lock:
            pages, free, rows = self._db.execute(_MEASURE).fetchone()
        return (int(pages) - int(free)) * int(self._page_size), int(rows or 0)

    def size_bytes(self) -> int:
        """Bytes of data the store holds: its pages in use as this connection sees the
        database (the file's pages plus those still in the write-ahead log, less free pages).
        What the disk budget counts: the log is a passing copy (at most about 4 MB, SQLite's
        automatic checkpoint at 1000 pages, then truncated to `_JOURNAL_LIMIT`), and a file's
        free pages are reused before it grows."""
        return self._measure()[0]

    def budget_reached(self) -> None:
        """The caller refused rows that did not fit the budget: from now on the store counts as
        full (`over_budget`) until a tenth of the budget is free again, so what a full store
        holds is the run up to where it filled, not a scatter of later steps that happened to
        fit in the last few kilobytes."""
        self._budget_hit = True
        self.over_budget()

    def over_budget(self, size: int | None = None) -> bool:
        """Whether the store is at its budget (`size`: the data's bytes, when just measured);
        said once in the log."""
        if self.budget_bytes is None:
            return False
        if size is None:
            size = self.size_bytes()
        limit = self.budget_bytes * (1 - _BUDGET_SLACK) if self._budget_hit else self.budget_bytes
        if size < limit:
            self._budget_hit = False
            return False
        if not self._over_budget_logged:
            self._over_budget_logged = True
            _log.error(
                "rlvitals outbox %s is %.1f MB, at its disk budget of %.1f MB: new samples are "
                "REFUSED (counted in stats.refused_disk) until RLVITALS_DISK_BUDGET_MB is raised "
                "or the file is moved away",
                self.path,
                size / 2**20,
                self.budget_bytes / 2**20,
            )
        return True

    def disk_full(self) -> bool:
        """Whether writes are refused at once because the disk was full at the last one. A
        write at a full disk costs milliseconds to fail, so until space returns (the free
        space grew by `_FULL_MARGIN` since, or `_FULL_RETRY` seconds passed: a quota or a
        network disk whose free space statvfs does not show) they are refused without trying,
        and the next write after that finds out."""
        if self._full is None:
            return False
        when, free_then = self._full
        free = _free_bytes(self.path.parent)
        grew = free is not None and free >= free_then + _FULL_MARGIN
        if grew or time.monotonic() - when >= _FULL_RETRY:
            self._full = None
            return False
        return True

    def _note_full(self, exc: BaseException) -> None:
        self._full = (time.monotonic(), _free_bytes(self.path.parent) or 0)
        if not self._full_logged:
            self._full_logged = True
            _log.error(
                "rlvitals outbox %s: the disk is full (%s): new samples are REFUSED (counted in "
                "stats.refused_disk) until space is freed; storing resumes by itself then",
                self.path,
                exc,
            )

    def room(self, *, quiet: bool = False) -> int:
        """About how many more rows fit in the disk budget (each row costs about `ROW_BYTES`
        of data until the file holds enough rows to measure it), so a batch never overshoots
        it; 0 at the budget (said once in the log unless `quiet`)."""
        if self.budget_bytes is None:
            return 2**62
        size, rows = self._measure()
        if self._budget_hit and self.over_budget(size):
            return 0
        free = self.budget_bytes - size
        if free <= 0 and not quiet:
            self.over_budget(size)
        return max(0, int(free // _row_bytes(size, rows)))

    def write(
        self,
        samples: Sequence[SampleRow],
        events: Sequence[EventRow] = (),
        *,
        positions: Sequence[SourcePosition] = (),
        progress: Sequence[tuple[str, int, int]] = (),
        activity: Mapping[str, float] | None = None,
        blocks: Sequence[tuple[int, SampleBlock]] = (),
    ) -> bool:
        """Store samples and events in one transaction; False (nothing stored) when over budget.

        `blocks` are columnar samples, each (i, block) stored after `samples[:i]` and before
        `samples[i:]` (a later sample of the same key wins, as in logging order).

        `positions` (how far log sources have read) and `progress` ((run, rank, last step)
        logged) are stored in the same transaction, so they never run ahead of the samples.
        Each run in `progress` gets its `last_activity`: from `activity` (run -> wall time) when
        given, else the wall time of its last sample row in this batch.
        """
        if blocks and not self._json_writes:  # an sqlite without exact JSON: rows it is
            samples, blocks = _merged(samples, blocks), ()
        in_blocks = sum(block.cells for _, block in blocks)  # numbers taken, holes too
        if not samples and not in_blocks and not events and not positions and not progress:
            return True
        stored = len(samples) + in_blocks
        if self.disk_full() or ((stored or events) and stored + len(events) > self.room()):
            return False
        count = stored + len(events)
        try:
            with self._transaction(count) as db:
                if count:
                    running_stats.catch_up(db)
                    (last,) = db.execute(
                        "UPDATE sequence SET n = n + ? RETURNING n", (count,)
                    ).fetchone()
                    first = last - count + 1
                    ranges = self._upsert_samples(db, samples, blocks, first)
                    self._fold(db, samples, blocks, first, first + stored - 1, ranges)
                    first += stored
                    db.executemany(
                        _UPSERT_EVENT, [(*row, first + i) for i, row in enumerate(events)]
                    )
                if positions:
                    now = time.time()
                    run = _batch_run(samples, progress, blocks)
                    db.executemany(
                        _UPSERT_POSITION,
                        [
                            (p.path, p.dev, p.ino, p.offset, p.lines, p.head, p.mark, now, run)
                            for p in positions
                        ],
                    )
                if progress:
                    db.executemany(_UPSERT_PROGRESS, progress)
                    active = _activity(samples, progress, activity, blocks)
                    if active:
                        db.executemany(
                            "UPDATE runs SET last_activity = max(coalesce(last_activity, 0), ?)"
                            " WHERE run = ?",
                            [(wall, run) for run, wall in active.items()],
                        )
                    # arrival on the store's clock, what staleness is judged on; a run that
                    # logs again after its recorded end is live again
                    arrived = time.time()
                    db.executemany(
                        "UPDATE runs SET arrived = ?, state = CASE WHEN state = 'importing' "
                        "THEN state END, state_reason = CASE WHEN state = 'importing' THEN "
                        "state_reason END WHERE run = ?",
                        [(arrived, run) for run in {r for r, _, _ in progress}],
                    )
        except sqlite3.OperationalError as exc:
            if _is_full(exc):
                self._note_full(exc)
                return False
            busy = _is_busy(exc)
            raise OutboxError(
                f"cannot write to the outbox at {self.path}: {exc}", retryable=busy
            ) from exc
        except (sqlite3.Error, OverflowError, UnicodeError, ValueError, TypeError) as exc:
            # a value sqlite cannot bind (an integer beyond 64 bits, a lone surrogate): the
            # transaction is rolled back and the caller isolates the row
            raise OutboxError(
                f"cannot write to the outbox at {self.path}: {type(exc).__name__}: {exc}"
            ) from exc
        if self._full_logged:
            self._full_logged = False
            _log.warning("rlvitals outbox %s: space is back; samples are stored again", self.path)
        if None in self._journal:  # the log appears with the first write after a checkpoint
            self._journal = _journal_identities(self.path)
        return True

    def _upsert_samples(
        self,
        db: sqlite3.Connection,
        samples: Sequence[SampleRow],
        blocks: Sequence[tuple[int, SampleBlock]],
        first: int,
    ) -> list[tuple[int, int]]:
        """Rows and blocks in their order, numbered from `first` on; the numbers the rows
        took, as ranges (the blocks took the rest)."""
        done = 0
        ranges: list[tuple[int, int]] = []
        for at, block in [*blocks, (len(samples), None)]:
            if at > done:
                ranges.append((first, first + at - done - 1))
                first = self._upsert_rows(db, samples[done:at], first)
                done = at
            if block is not None and block.cells:
                db.execute(
                    _BLOCK_CALL,
                    {
                        "run": block.run,
                        "rank": block.rank,
                        "first": first,
                        "width": len(block.columns),
                        "steps": orjson.dumps(
                            list(zip(block.steps, block.wall_times, strict=True))
                        ).decode(),
                        "columns": orjson.dumps(list(block.columns)).decode(),
                        "values": orjson.dumps(
                            block.values.reshape(-1), option=orjson.OPT_SERIALIZE_NUMPY
                        ).decode(),
                    },
                )
                first += block.cells
        return ranges

    @staticmethod
    def _fold(
        db: sqlite3.Connection,
        samples: Sequence[SampleRow],
        blocks: Sequence[tuple[int, SampleBlock]],
        first: int,
        last: int,
        ranges: list[tuple[int, int]],
    ) -> None:
        """Add what was just stored to the running statistics: the rows read back from the
        file, the blocks summed from their values, unless one key was written twice in this
        batch (then the later value replaced the earlier one in the file, and only reading it
        back counts it once)."""
        if not blocks or _written_twice(samples, [b for _, b in blocks]):
            running_stats.fold(db, first, last)
            return
        partials = [
            row
            for _, b in blocks
            for row in running_stats.block_partials(b.run, b.rank, b.steps, b.columns, b.values)
        ]
        running_stats.fold(db, first, last, ranges=ranges, partials=orjson.dumps(partials).decode())

    def _upsert_rows(self, db: sqlite3.Connection, rows: Sequence[SampleRow], first: int) -> int:
        text = _json_rows(rows) if self._json_writes else None
        if text is not None:
            db.execute(_ROWS_CALL, {"rows": text, "first": first})
        else:
            db.executemany(_INSERT_KEYS[0], {(r[0], r[5]) for r in rows})
            db.executemany(_INSERT_KEYS[1], {(r[3], r[1], r[4]) for r in rows})
            db.executemany(_UPSERT_POINT, [(*row, first + i) for i, row in enumerate(rows)])
        return first + len(rows)

    def mark_finished(self, run: str, when: float, *, wait: float = 2.0) -> None:
        """Record that `run` finished (`finish()` called); see `record_state`."""
        self.record_state(run, "finished", "finish() called", wait=wait)

    def record_state(
        self,
        run: str,
        state: str,
        reason: str,
        *,
        holder: Holder | None = None,
        wait: float = 2.0,
        at: float | None = None,
        rank: int | None = None,
        lease_ttl_s: float = 60.0,
    ) -> None:
        """Record how `run` ended (`finished`, `crashed`, `ended`) or that an import of it is
        under way (`importing`), with the reason, and give up `holder`'s lease on it when given
        and the state is an end. Called on the caller's thread (`finish()`): waits at most `wait`
        seconds for a store another process keeps locked. `at`: when it ended, where that was
        before now (a follower reading the end of a log written earlier).

        With `rank` (a rank of a run several ranks log) the end is that rank's; the run's own
        end is recorded once no rank holds it any more (see `_end_of_ranks`)."""
        now = time.time() if at is None else at
        try:
            with self._busy_wait(wait), self._transaction() as db:
                if rank is not None and rank != NO_RANK and state != "importing":
                    db.execute(
                        "INSERT OR REPLACE INTO rank_ends (run, rank, state, reason, state_at) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (run, rank, state, reason[:1000], now),
                    )
                    if holder is not None:
                        self._release(db, run, holder, rank)
                    self._end_of_ranks(db, run, now, lease_ttl_s)
                    return
                db.execute(
                    "UPDATE runs SET state = ?, state_reason = ?, state_at = ?, "
                    "finished = CASE WHEN ? = 'importing' THEN finished ELSE ? END WHERE run = ?",
                    (state, reason[:1000], now, state, now, run),
                )
                if holder is not None:
                    self._release(db, run, holder)
        except sqlite3.Error as exc:
            raise OutboxError(
                f"cannot record run {run!r} as {state} in {self.path}: {exc}"
            ) from exc

    @staticmethod
    def _end_of_ranks(db: sqlite3.Connection, run: str, now: float, ttl: float) -> None:
        """The run's own end (`runs.state`, what a reader that knows no ranks reads) once no
        rank holds it, as the one lifecycle tells it from the ranks; none while one does."""
        ranks = rank_records(db, run)
        if any(r.lease is not None and holder_alive(r.lease, now, ttl) for r in ranks):
            db.execute(
                "UPDATE runs SET state = NULL, state_reason = NULL WHERE run = ? "
                "AND state IS NOT 'importing'",
                (run,),
            )
            return
        status = Lifecycle(lease_ttl_s=ttl, renew_every_s=ttl / 4).status(
            Recorded(ranks=ranks), now
        )
        db.execute(
            "UPDATE runs SET state = ?, state_reason = ?, state_at = ?, finished = ? WHERE run = ?",
            (status.status.value, status.reason[:1000], now, now, run),
        )

    def reap_ranks(self, run: str, *, lease_ttl_s: float = 60.0) -> list[int]:
        """Record the end of every rank of `run` whose writer is gone without one (`kill -9`,
        out of memory: its lease is left and its process gone): crashed, with why, and a
        `RANK_END` event at its last step, which the forwarder sends to InfluxDB like any row,
        so a reader there tells the run crashed and names the rank. Done by the run's other
        ranks on this host, which outlive it. Returns the ranks recorded."""
        now = time.time()
        with self._transaction() as db:
            dead = [
                r
                for r in rank_records(db, run)
                if r.lease is not None and not holder_alive(r.lease, now, lease_ttl_s)
            ]
            if not dead:
                return []
            events: list[EventRow] = []
            for r in dead:
                assert r.lease is not None
                why = gone_without_end(r.lease.holder)
                db.execute(
                    "INSERT OR REPLACE INTO rank_ends (run, rank, state, reason, state_at) "
                    "VALUES (?, ?, 'crashed', ?, ?)",
                    (run, r.rank, why, r.lease.renewed),
                )
                db.execute("DELETE FROM leases WHERE run = ? AND rank = ?", (run, r.rank))
                row = db.execute(
                    "SELECT step FROM run_progress WHERE run = ? AND rank = ?", (run, r.rank)
                ).fetchone()
                step = 0 if row is None else int(row[0])
                fields = json.dumps({STATE_FIELD: "crashed"})
                events.append((run, r.rank, step, RANK_END, why, fields, now))
            running_stats.catch_up(db)
            (last,) = db.execute(
                "UPDATE sequence SET n = n + ? RETURNING n", (len(events),)
            ).fetchone()
            first = last - len(events) + 1
            db.executemany(_UPSERT_EVENT, [(*e, first + i) for i, e in enumerate(events)])
            self._end_of_ranks(db, run, now, lease_ttl_s)
        return [r.rank for r in dead]

    @staticmethod
    def _release(db: sqlite3.Connection, run: str, holder: Holder, rank: int = NO_RANK) -> None:
        db.execute(
            "DELETE FROM leases WHERE run = ? AND rank = ? AND pid = ? AND host = ?",
            (run, rank, holder.pid, holder.host),
        )

    def release_lease(
        self, run: str, holder: Holder, *, wait: float = 2.0, rank: int | None = None
    ) -> None:
        """Give up `holder`'s lease on `run` without recording an end (a sidecar stopping: the
        run is no longer watched, which is not an end)."""
        try:
            with self._busy_wait(wait), self._transaction() as db:
                self._release(db, run, holder, NO_RANK if rank is None else rank)
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot release the lease on run {run!r}: {exc}") from exc

    def renew_lease(self, run: str, holder: Holder, rank: int | None = None) -> bool:
        """The holder's heartbeat; False when it no longer holds the lease (taken over after it
        looked dead)."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE leases SET renewed = ? WHERE run = ? AND rank = ? AND pid = ? AND host = ?",
                (time.time(), run, NO_RANK if rank is None else rank, holder.pid, holder.host),
            )
        return cur.rowcount > 0

    def set_writer(self, run: str, holder: Holder, writer: Holder | None, open_: bool) -> bool:
        """A follower's look at the process writing the run's logs (see `Lease.writer`);
        False when `holder` no longer holds the run's lease."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE leases SET writer_pid = ?, writer_started = ?, writer_open = ? "
                f"WHERE run = ? AND rank = {NO_RANK} AND pid = ? AND host = ?",
                (
                    None if writer is None else writer.pid,
                    None if writer is None else writer.started,
                    int(open_),
                    run,
                    holder.pid,
                    holder.host,
                ),
            )
        return cur.rowcount > 0

    def lease(self, run: str, rank: int | None = None) -> Lease | None:
        with self._lock:
            return _lease(self._db, run, NO_RANK if rank is None else rank)

    @contextmanager
    def maintenance(self, *, wait: float = 10.0) -> Iterator[sqlite3.Connection]:
        """One write transaction over every table, for changes to whole runs (`run_admin`:
        delete, rename, notes, tags): all of it or none. Waits at most `wait` seconds for
        another process's write lock."""
        try:
            with self._busy_wait(wait), self._transaction() as db:
                yield db
        except sqlite3.OperationalError as exc:
            where = f"cannot change the outbox at {self.path}: {exc}"
            if _is_busy(exc):
                where += "; another process is writing it: try again in a moment"
            raise OutboxError(where, retryable=_is_busy(exc)) from exc
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot change the outbox at {self.path}: {exc}") from exc

    def position_runs(self) -> dict[str, str]:
        """The run each stored read position was read into, by file path (positions stored
        before runs were recorded with them are absent)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, run FROM source_positions WHERE run IS NOT NULL"
            ).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def source_positions(self) -> dict[str, SourcePosition]:
        """Every stored log-source position, by file path."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, dev, ino, offset, lines, head, mark FROM source_positions"
            ).fetchall()
        return {
            r[0]: SourcePosition(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), bytes(r[6]))
            for r in rows
        }

    def claim_run(
        self, run: str, *, resume: bool = False, created: float | None = None, wait: float = 2.0
    ) -> str:
        """The name a new run gets (see `claim`), without a lease."""
        return self.claim(run, resume=resume, created=created, wait=wait).name

    def claim(
        self,
        run: str,
        *,
        resume: bool = False,
        created: float | None = None,
        wait: float = 2.0,
        holder: Holder | None = None,
        kind: str = "log",
        lease_ttl_s: float = 60.0,
        job: Job | None = None,
    ) -> Claim:
        """The name a starting writer gets, recorded in one transaction (two processes starting
        at once get two names): `run` when the store has no run of that name, or `resume` asks to
        go on with it, or it is an import left incomplete (its importer died) that an import
        (`kind="import"`) goes on with; else the first free `run-2`, `run-3`, ...

        A rank of a job (`job` with a rank) joins the run of that name its job's other ranks
        logged (the stored job key matches; a loose key only while this rank has no place in
        it yet, see `exporter.job`), so the ranks of one job are one run; another job's run of
        that name is passed over like any other (`run-2`) unless `resume` goes on with it,
        which makes it this job's.

        With a `holder`, the writer takes the run's lease (a rank: its rank's lease). Going on
        with a run whose lease another living process holds raises `RunHeld` naming it; a lease
        whose holder is gone is taken over (`Claim.took_over`).

        This runs on the caller's thread in `init()`, so it waits at most `wait` seconds for a
        store another process keeps locked; then the name is chosen from what the store shows
        without recording it (`Claim.recorded` False: the worker claims that name again once the
        store frees up, so its lease and its place among the job's ranks are recorded)."""
        now = time.time()
        ranked = job if job is not None and job.rank is not None and job.key else None
        rank = NO_RANK if ranked is None or ranked.rank is None else ranked.rank
        try:
            with self._busy_wait(wait), self._transaction() as db:
                name, resumed = self._free_name(db, run, resume, kind, now, lease_ttl_s, ranked)
                taken = None
                if ranked is not None:
                    self._join(db, name, ranked, holder, now, lease_ttl_s)
                if holder is not None:
                    taken = self._take_lease(db, name, holder, kind, now, lease_ttl_s, rank)
                db.execute(
                    "INSERT INTO runs (run, created, job, color) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (run) DO NOTHING",
                    (
                        name,
                        now if created is None else created,
                        ranked and ranked.key,
                        _new_color(db),
                    ),
                )
                if holder is not None:
                    # a writer starting on the run: what ended it before no longer holds
                    db.execute(
                        "UPDATE runs SET state = ?, state_reason = NULL, state_at = ?, "
                        "arrived = coalesce(arrived, ?) WHERE run = ?",
                        ("importing" if kind == "import" else None, now, now, name),
                    )
            return Claim(name, resumed, taken)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise OutboxError(f"cannot record run {run!r} in {self.path}: {exc}") from exc
            _log.warning(
                "rlvitals outbox %s is locked by another process: run %r is named from a read "
                "of the store, not recorded yet",
                self.path,
                run,
            )
            with self._lock:
                name, resumed = self._free_name(
                    self._db, run, resume, kind, now, lease_ttl_s, ranked
                )
            return Claim(name, resumed, recorded=False)
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot record run {run!r} in {self.path}: {exc}") from exc

    @staticmethod
    def _join(
        db: sqlite3.Connection,
        run: str,
        job: Job,
        holder: Holder | None,
        now: float,
        ttl: float,
    ) -> None:
        """A rank of `job` starting on `run`: when the run was another job's (a resume), it
        becomes this job's, and that job's ranks' ends and dead leases go (a live one refuses:
        two jobs would mix their steps); this rank's own earlier end goes (it runs again)."""
        row = db.execute("SELECT job FROM runs WHERE run = ?", (run,)).fetchone()
        if row is not None and row[0] != job.key:
            for r in rank_records(db, run):
                if r.lease is None or r.rank == job.rank:
                    continue
                if holder_alive(r.lease, now, ttl):
                    raise RunHeld(
                        f"run {run!r} is being written by rank {r.rank} of another job "
                        f"({r.lease.holder.describe()}); two jobs would mix their steps. Stop "
                        "that job, or log under another name (resume=False gives a new one)",
                        holder=r.lease.holder.describe(),
                        kind=r.lease.kind,
                        since=r.lease.since,
                    )
            db.execute(f"DELETE FROM leases WHERE run = ? AND rank != {NO_RANK}", (run,))
            db.execute("DELETE FROM rank_ends WHERE run = ?", (run,))
            db.execute("UPDATE runs SET job = ? WHERE run = ?", (job.key, run))
        if holder is not None:
            db.execute("DELETE FROM rank_ends WHERE run = ? AND rank = ?", (run, job.rank))

    @staticmethod
    def _take_lease(
        db: sqlite3.Connection,
        run: str,
        holder: Holder,
        kind: str,
        now: float,
        ttl: float,
        rank: int = NO_RANK,
    ) -> Lease | None:
        """Take `run`'s lease (of `rank`) for `holder`; the dead holder's lease it replaced."""
        before = _lease(db, run, rank)
        mine = before is not None and (before.holder.pid, before.holder.host) == (
            holder.pid,
            holder.host,
        )
        if before is not None and not mine and holder_alive(before, now, ttl):
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(before.since))
            whose = "" if rank == NO_RANK else f" as rank {rank}"
            fix = (
                "log under another name (resume=False gives a new one)"
                if rank == NO_RANK
                else "give each process of the job its own rank (rank=, or the launcher's RANK)"
            )
            raise RunHeld(
                f"run {run!r} is being written{whose} by {before.holder.describe()} "
                f"({before.kind}, since {since}); two writers would mix their steps. Stop that "
                f"process, or {fix}",
                holder=before.holder.describe(),
                kind=before.kind,
                since=before.since,
            )
        db.execute(
            "INSERT INTO leases (run, rank, pid, host, started, kind, since, renewed) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, rank) DO UPDATE SET pid = excluded.pid, "
            "host = excluded.host, started = excluded.started, kind = excluded.kind, "
            "since = excluded.since, renewed = excluded.renewed, writer_pid = NULL, "
            "writer_started = NULL, writer_open = NULL",
            (run, rank, holder.pid, holder.host, holder.started, kind, now, now),
        )
        return None if before is None or mine else before

    @contextmanager
    def _busy_wait(self, seconds: float) -> Iterator[None]:
        """Wait at most `seconds` for another process's write lock (the caller's thread must
        not hang on a store someone else holds), then the usual patience again."""
        self._db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        try:
            yield
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")

    @staticmethod
    def _free_name(
        db: sqlite3.Connection,
        run: str,
        resume: bool,
        kind: str,
        now: float,
        ttl: float,
        job: Job | None = None,
    ) -> tuple[str, bool]:
        """(name, whether it goes on with a stored run)."""
        name, n = run, 1
        while True:
            try:
                row = db.execute("SELECT state, job FROM runs WHERE run = ?", (name,)).fetchone()
            except sqlite3.OperationalError:  # a file read before its job column was added
                row = db.execute("SELECT state, NULL FROM runs WHERE run = ?", (name,)).fetchone()
            if row is None:
                return name, False
            if job is not None and job.rank is not None and row[1] == job.key:
                # the run of this rank's job: joined, unless a loose key (a reused port or
                # parent) finds this rank already placed in it, i.e. an earlier job's run
                placed = _placed(db, name, job.rank)
                if job.firm or resume or not placed:
                    return name, resume or placed
            elif resume:
                return name, True
            if kind == "import" and row[0] == "importing":
                lease = _lease(db, name)
                if lease is None or not holder_alive(lease, now, ttl):
                    return name, True  # an import left incomplete: this one finishes it
            n += 1
            name = f"{run}-{n}"

    def upsert_run(
        self,
        run: str,
        project: str | None,
        config: Mapping[str, Any] | None,
        framework: str | None,
        created: float,
    ) -> RunRecord | None:
        """Record (or update) a run; returns what was stored before, if anything."""
        before = self.run(run)
        config_json = json.dumps(dict(config or {}), sort_keys=True, default=str)
        with self._transaction() as db:
            db.execute(
                """INSERT INTO runs (run, project, config, framework, created, color)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (run) DO UPDATE SET
                    project = coalesce(excluded.project, runs.project),
                    config = CASE WHEN excluded.config = '{}' THEN runs.config ELSE excluded.config END,
                    framework = coalesce(excluded.framework, runs.framework)""",
                (run, project, config_json, framework, created, _new_color(db)),
            )
        return before

    def write_preview(self, run: str, rows: Sequence[SampleRow]) -> int:
        """`run`'s whole-run sketch (`preview`), replacing any before; the rows kept."""
        try:
            with self._transaction() as db:
                return preview.write(db, run, rows)
        except sqlite3.Error as exc:
            raise OutboxError(
                f"cannot store the sketch of run {run!r} in {self.path}: {exc}"
            ) from exc

    def drop_preview(self, run: str) -> None:
        """`run`'s sketch gone: its log is stored."""
        try:
            with self._transaction() as db:
                preview.drop(db, run)
        except sqlite3.Error as exc:
            raise OutboxError(
                f"cannot drop the sketch of run {run!r} in {self.path}: {exc}"
            ) from exc

    # -- forwarding ----------------------------------------------------------------------------

    def _pending(self, table: str, columns: str, limit: int, after: int | None = None) -> list[Any]:
        """Up to `limit` unsent rows in sequence order (seq first), never splitting rows that
        share a sequence number (files from before per-row numbers), so they form a range;
        `after`: only rows numbered past it (a batch read while the one before is sent)."""
        join = " LEFT JOIN runs r ON r.run = x.run" if "r." in columns else ""
        # points past the forwarders' watermark (see `mark_ranges`); events are marked one by one
        unsent = _UNSENT_POINTS if table == "points" else "x.sent = 0"
        if after is not None and table == "points":
            # one lower bound, the higher of the two: with two, SQLite walks the index from the
            # watermark and skips the batch in flight row by row (8 % of a backlog's read)
            unsent = f"x.sent = 0 AND x.seq > max({_WATERMARK}, {int(after)})"
        elif after is not None:
            unsent += f" AND x.seq > {int(after)}"
        sql = f"SELECT x.seq, {columns} FROM {table} x{join} WHERE {unsent} ORDER BY x.seq LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (limit + 1,)).fetchall()
            if len(rows) <= limit:
                return rows
            extra = rows.pop()
            if rows[-1][0] != extra[0]:
                return rows
            shared = extra[0]
            while rows and rows[-1][0] == shared:
                rows.pop()
            if rows:
                return rows
            return self._db.execute(  # one legacy transaction larger than a batch: all of it
                sql.replace(f"WHERE {unsent}", f"WHERE {unsent} AND x.seq = ?").replace(
                    " LIMIT ?", ""
                ),
                (shared,),
            ).fetchall()

    def pending_points(self, limit: int, after: int | None = None) -> PendingPoints | None:
        """Unsent points by their numbers, as columns (the forwarder's fast path; `after`: as
        `_pending`); None when nothing is unsent."""
        # the points by their numbers, then the names of the few numbers a batch holds: joining
        # every row to its names in SQL was half of the forwarder's time (2.9 us a row)
        rows = self._pending(
            "points", "x.run_field, x.tag_set, x.step, x.value, x.wall_time", limit, after
        )
        if not rows:
            return None
        seq_range = (rows[0][0], rows[-1][0])
        _, run_fields, tag_sets, steps, values, walls = zip(*rows, strict=True)
        field_numbers = set(run_fields)
        tag_numbers = set(tag_sets)
        with self._lock:
            fields = {
                i: (run, field)
                for i, run, field in self._db.execute(
                    "SELECT id, run, field FROM run_fields "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (orjson.dumps(sorted(field_numbers)).decode(),),
                )
            }
            tags = {
                i: (measurement, rank, gpu)
                for i, measurement, rank, gpu in self._db.execute(
                    "SELECT id, measurement, rank, gpu FROM tag_sets "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (orjson.dumps(sorted(tag_numbers)).decode(),),
                )
            }
        if len(fields) < len(field_numbers) or len(tags) < len(tag_numbers):
            # a run deleted between the two reads: its rows are not sent (nor named)
            kept = [r for r in rows if r[1] in fields and r[2] in tags]
            if not kept:
                return PendingPoints(seq_range, (), (), (), (), (), fields, tags)
            _, run_fields, tag_sets, steps, values, walls = zip(*kept, strict=True)
        return PendingPoints(seq_range, run_fields, tag_sets, steps, values, walls, fields, tags)

    def pending_rows(
        self, limit: int, after: int | None = None
    ) -> tuple[list[SampleRow], tuple[int, int] | None]:
        """Unsent samples as plain tuples and their sequence range (`after`: as `_pending`)."""
        points = self.pending_points(limit, after)
        if points is None:
            return [], None
        return points.rows, points.seq_range

    def projects(self) -> dict[str, str | None]:
        """The project of every run (for tagging forwarded points)."""
        with self._lock:
            return dict(self._db.execute("SELECT run, project FROM runs").fetchall())

    def pending_samples(self, limit: int) -> list[PendingSample]:
        rows = self._pending(
            "samples",
            "x.seq, x.run, r.project, x.rank, x.step, x.measurement, x.gpu, x.field, x.value, "
            "x.wall_time",
            limit,
        )
        return [PendingSample(r[1], r[0], r[2], r[3], _rank(r[4]), *r[5:]) for r in rows]

    def pending_events(self, limit: int, after: int | None = None) -> list[PendingEvent]:
        rows = self._pending(
            "events",
            "x.rowid, x.run, r.project, x.rank, x.step, x.kind, x.text, x.fields, x.wall_time",
            limit,
            after,
        )
        return [
            PendingEvent(
                r[1], r[0], r[2], r[3], _rank(r[4]), r[5], r[6], r[7], json.loads(r[8]), r[9]
            )
            for r in rows
        ]

    def mark(
        self,
        samples: Sequence[PendingSample],
        events: Sequence[PendingEvent],
        state: int = 1,
    ) -> None:
        """Mark rows sent (1) or refused by the server (2), unless re-logged since they were read.

        `samples` and `events` must be batches as `pending_samples`/`pending_events` returned
        them: the unsent rows of a sequence range.
        """
        self.mark_ranges(
            (min(s.seq for s in samples), max(s.seq for s in samples)) if samples else None,
            (min(e.seq for e in events), max(e.seq for e in events)) if events else None,
            state,
        )

    def mark_ranges(
        self,
        samples: tuple[int, int] | None,
        events: tuple[int, int] | None,
        state: int = 1,
        *,
        owed: Sequence[tuple[str, int, int]] = (),
        owner: str = "",
        settled: bool = False,
    ) -> None:
        """Mark the unsent rows of sequence ranges sent (1) or refused (2). A row re-logged since
        it was read has a number past its batch's range and stays unsent.

        `owed` ((run, first step, last step) of what was sent) are InfluxDB rollups the sender
        `owner` owes until it rolls them up: recorded in the same transaction, so a sender that
        dies, or whose rollup write fails, before it does leaves them here for the next one
        (`rollups_owed`). `settled`: everything `owner` recorded before is rolled up."""
        if samples is None and events is None and not owed and not settled:
            return
        with self._transaction() as db:
            if samples is not None and state == 1 and _closes_the_gap(db, samples[0]):
                # every unsent point up to the range's end is in it: move the watermark, and
                # leave the rows as they are (marking 5,000 rows and their index entries one by
                # one was a quarter of the forwarder's time)
                db.execute(
                    "UPDATE points_sent_upto SET seq = max(seq, ?) WHERE id = 0", (samples[1],)
                )
                samples = None
            for table, seq_range in (("points", samples), ("events", events)):
                if seq_range is not None:
                    db.execute(
                        f"UPDATE {table} SET sent = ? WHERE sent = 0 AND seq BETWEEN ? AND ?",
                        (state, *seq_range),
                    )
            if owed or settled:
                db.execute(_OWED_TABLE)
            if settled:
                db.execute("DELETE FROM rollups_owed WHERE owner = ?", (owner,))
            if owed:
                db.executemany(
                    "INSERT INTO rollups_owed (run, owner, lo, hi) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (run, owner) DO UPDATE SET lo = min(lo, excluded.lo), "
                    "hi = max(hi, excluded.hi)",
                    [(run, owner, lo, hi) for run, lo, hi in owed],
                )

    def settle_sent(self, limit: int = 10_000) -> int:
        """Mark up to `limit` points below the watermark sent as stored, oldest first; how many
        were. What it buys is room: a point left unmarked stays in the unsent-points index (14
        bytes a row, a fifth of the store), a marked one leaves it and its page is used again.
        The forwarder calls it when it has nothing to send, so the marking it no longer does
        per batch is done while there is time for it."""
        try:
            with self._transaction() as db:
                head = db.execute(
                    "SELECT x.seq FROM points x WHERE x.sent = 0 ORDER BY x.seq LIMIT 1"
                ).fetchone()
                ((upto,),) = db.execute("SELECT seq FROM points_sent_upto WHERE id = 0")
                if head is None or head[0] > upto:
                    return 0
                return db.execute(
                    "UPDATE points SET sent = 1 WHERE sent = 0 AND seq BETWEEN ? AND ?",
                    (head[0], min(upto, head[0] + limit - 1)),
                ).rowcount
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot mark sent points in {self.path}: {exc}") from exc

    def disagreements(self) -> dict[str, list[str]]:
        """Per run, where its running statistics or rollups disagree with its rows (see
        `running_stats.disagreements`); empty when they all agree."""
        with self._lock:
            return running_stats.disagreements(self._db)

    def rollups_owed(self) -> list[tuple[str, str, int, int]]:
        """(run, owner, first step, last step) of InfluxDB rollups a sender still owes (see
        `mark_ranges`)."""
        with self._lock:
            try:
                rows = self._db.execute("SELECT run, owner, lo, hi FROM rollups_owed").fetchall()
            except sqlite3.OperationalError:  # no table: nothing was ever owed here
                return []
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]

    def settle_rollups(self, owed: Sequence[tuple[str, str, int, int]]) -> None:
        """Forget rollups now recomputed, unless more was recorded for them meanwhile."""
        if not owed:
            return
        with self._transaction() as db:
            db.executemany(
                "DELETE FROM rollups_owed WHERE run = ? AND owner = ? AND lo = ? AND hi = ?",
                owed,
            )

    def reject(
        self,
        refused: Sequence[tuple[RejectKey, str, str]],
        samples: tuple[int, int] | None = None,
        events: tuple[int, int] | None = None,
    ) -> None:
        """Record lines InfluxDB refused (HTTP 400) with the server's message, and mark the
        rows they came from refused (2) when they are outbox rows of the given sequence ranges
        (a direct import's rows are not in the outbox: only the line is kept)."""
        if not refused:
            return
        now = time.time()
        with self._transaction() as db:
            for key, line, message in refused:
                db.execute(
                    "INSERT INTO rejected (run, line, message, at) VALUES (?, ?, ?, ?)",
                    (key[1], line, message, now),
                )
                if key[0] == "sample" and samples is not None:
                    _, run, rank, step, measurement, gpu = key
                    db.execute(
                        "UPDATE points SET sent = 2 WHERE step = ? AND seq BETWEEN ? AND ? "
                        "AND run_field IN (SELECT id FROM run_fields WHERE run = ?) "
                        "AND tag_set = (SELECT id FROM tag_sets WHERE measurement = ? "
                        "AND rank = ? AND gpu = ?)",
                        (step, *samples, run, measurement, rank, gpu),
                    )
                elif key[0] == "event" and events is not None:
                    _, run, rank, step, kind, _ = key
                    db.execute(
                        "UPDATE events SET sent = 2 WHERE run = ? AND rank = ? AND step = ? "
                        "AND kind = ? AND seq BETWEEN ? AND ?",
                        (run, rank, step, kind, *events),
                    )

    def rejected(self, run: str | None = None) -> list[tuple[str, str, str]]:
        """(run, line, server message) of every line InfluxDB refused, oldest first."""
        sql = "SELECT run, line, message FROM rejected"
        args: tuple[str, ...] = ()
        if run is not None:
            sql += " WHERE run = ?"
            args = (run,)
        with self._lock:
            return [tuple(r) for r in self._db.execute(sql + " ORDER BY id", args).fetchall()]

    def backlog_oldest(self) -> float | None:
        """The wall time the oldest row not yet sent was logged at (None: nothing waits)."""
        with self._lock:
            found = [
                row[0]
                for table, unsent in (("points", _UNSENT_POINTS), ("events", "x.sent = 0"))
                if (
                    row := self._db.execute(
                        f"SELECT x.wall_time FROM {table} x WHERE {unsent} ORDER BY x.seq LIMIT 1"
                    ).fetchone()
                )
                is not None
            ]
        return min(found) if found else None

    def note_forwarder(self, state: ForwarderState) -> None:
        """Record what a forwarder is doing (see `ForwarderState`); the entries of forwarders
        that stopped a day ago are let go."""
        with self._transaction() as db:
            db.execute(_FORWARDERS_TABLE)
            db.execute(
                "INSERT OR REPLACE INTO forwarders (owner, pid, host, started, updated, state, "
                "detail, sent, rate, backlog, oldest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.owner,
                    state.pid,
                    state.host,
                    state.started,
                    state.updated,
                    state.state,
                    state.detail[:1000],
                    state.sent,
                    state.rate,
                    state.backlog,
                    state.oldest,
                ),
            )
            db.execute("DELETE FROM forwarders WHERE updated < ?", (state.updated - 86_400,))

    def forwarders(self) -> list[ForwarderState]:
        """What the forwarders of this store said last, most recent first."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT owner, pid, host, started, updated, state, detail, sent, rate, "
                    "backlog, oldest FROM forwarders ORDER BY updated DESC"
                ).fetchall()
            except sqlite3.OperationalError:  # no forwarder ever sent this store
                return []
        return [ForwarderState(*row) for row in rows]

    def backlog(self, run: str | None = None) -> int:
        """Samples and events not yet sent (all runs, or one)."""
        points = f"SELECT count(*) FROM points x WHERE {_UNSENT_POINTS}"
        events = "SELECT count(*) FROM events WHERE sent = 0"
        args: tuple[str, ...] = ()
        if run is not None:
            points += " AND x.run_field IN (SELECT id FROM run_fields WHERE run = ?)"
            events += " AND run = ?"
            args = (run,)
        with self._lock:
            (n,) = self._db.execute(points, args).fetchone()
            (m,) = self._db.execute(events, args).fetchone()
        return int(n) + int(m)

    # -- reading (the embedded store) ------------------------------------------------------------

    def run(self, run: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_RUN_COLUMNS} FROM {_RUN_FROM} WHERE runs.run = ?", (run,)
            ).fetchone()
            ranks = rank_records(self._db, run)
        return None if row is None else _run_record(row, ranks)

    def runs(self) -> list[RunRecord]:
        """Every run in the store, oldest first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_RUN_COLUMNS} FROM {_RUN_FROM} ORDER BY created, runs.run"
            ).fetchall()
            ranks = ranks_by_run(self._db)
        return [_run_record(r, ranks.get(r[0], ())) for r in rows]

    def fields(self, run: str, measurement: str | None = None) -> list[str]:
        """Field names stored for a run: registry fields, or those of one `measurement`
        (`unregistered` lists the names the registry does not know, exactly as logged)."""
        sql = "SELECT DISTINCT field FROM samples WHERE run = ? AND measurement "
        sql += "= ?" if measurement else _NOT_METRICS
        args: tuple[str, ...] = (run, measurement) if measurement else (run,)
        with self._lock:
            return sorted(r[0] for r in self._db.execute(sql, args).fetchall())

    def catalog(self, run: str) -> list[StoredField]:
        """Every numeric field a run stored, registered or not, with its measurement, count of
        finite values and step range (from the running statistics: no scan of the samples)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT measurement, field, sum(n), min(first_step), max(last_step) "
                "FROM sample_stats WHERE run = ? GROUP BY measurement, field "
                "ORDER BY measurement, field",
                (run,),
            ).fetchall()
        return [StoredField(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def spread(
        self, run: str, field: str, start: int | None = None, end: int | None = None
    ) -> tuple[
        npt.NDArray[np.int64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]:
        """(steps, count, min, max) of the steps where `field` was logged several values at once
        (ascending by step); its mean at those steps is `series(run, field)`."""
        columns = {}
        for part in ("count", "min", "max"):
            columns[part] = self.series(run, f"{field}/{part}", start, end, measurement=SPREAD)
        steps = columns["count"][0]
        if not all(np.array_equal(steps, c[0]) for c in columns.values()):
            common = np.intersect1d(np.intersect1d(steps, columns["min"][0]), columns["max"][0])
            picked = [c[1][np.isin(c[0], common)] for c in columns.values()]
            return common, picked[0], picked[1], picked[2]
        return steps, columns["count"][1], columns["min"][1], columns["max"][1]

    def transforms(self, run: str) -> dict[str, tuple[FieldTransform, ...]]:
        """Which transform each of a run's fields went through, by field (fields stored as
        logged are absent): what to show beside a value, e.g. `train/value_loss × 0.5`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT value FROM samples WHERE run = ? AND field = ? "
                f"AND measurement = '{RUN_CONFIG}' AND typeof(value) = 'text'",
                (run, TRANSFORMS_FIELD),
            ).fetchall()
        found: dict[str, tuple[FieldTransform, ...]] = {}
        for (text,) in rows:  # one per rank
            for field, entries in transforms_from_json(text).items():
                known = {e.name for e in found.get(field, ())}
                found[field] = (*found.get(field, ()), *(e for e in entries if e.name not in known))
        return found

    def series(
        self,
        run: str,
        field: str,
        start: int | None = None,
        end: int | None = None,
        *,
        measurement: str | None = None,
        rank: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(steps, values) of one field, ascending by step, `start <= step <= end`.

        Rows of several ranks or GPUs at one step are averaged. Hyperparameters (`run_config`)
        are left out unless `measurement=RUN_CONFIG` is asked for.
        """
        sql = f"SELECT step, avg(value) FROM samples WHERE run = ? AND field = ? AND {_NUMERIC}"
        args: list[Any] = [run, field]
        if measurement is None:
            sql += f" AND measurement != '{RUN_CONFIG}'"
        else:
            sql += " AND measurement = ?"
            args.append(measurement)
        if rank is not None:
            sql += " AND rank = ?"
            args.append(rank)
        if start is not None:
            sql += " AND step >= ?"
            args.append(start)
        if end is not None:
            sql += " AND step <= ?"
            args.append(end)
        sql += " GROUP BY step ORDER BY step"
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        steps = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        values = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        return steps, values

    def stats(self, run: str, field: str | None = None) -> list[SeriesStats]:
        """The running statistics of a run's series (optionally of one field)."""
        sql = (
            "SELECT run, field, rank, measurement, gpu, n, total, total_sq, first_step, last_step, "
            "min_seen, max_seen FROM sample_stats WHERE run = ?"
        )
        args: tuple[str, ...] = (run,)
        if field is not None:
            sql += " AND field = ?"
            args = (run, field)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY field, rank, measurement, gpu", args)
            return [
                SeriesStats(
                    run=r[0],
                    field=r[1],
                    rank=_rank(r[2]),
                    measurement=r[3],
                    gpu=r[4],
                    count=int(r[5]),
                    total=float(r[6]),
                    total_sq=float(r[7]),
                    first_step=int(r[8]),
                    last_step=int(r[9]),
                    min_seen=float(r[10]),
                    max_seen=float(r[11]),
                )
                for r in rows.fetchall()
            ]

    def events(self, run: str, kind: str | None = None) -> list[EventRecord]:
        """A run's events ascending by step (optionally one kind)."""
        sql = "SELECT run, rank, step, kind, text, fields, wall_time FROM events WHERE run = ?"
        args: tuple[str, ...] = (run,)
        if kind is not None:
            sql += " AND kind = ?"
            args = (run, kind)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY step, wall_time", args).fetchall()
        return [
            EventRecord(r[0], _rank(r[1]), r[2], r[3], r[4], json.loads(r[5]), r[6]) for r in rows
        ]

    def latest(self, run: str) -> dict[str, tuple[int, float]]:
        """For each registry field of a run: (last step, value at that step)."""
        with self._lock:
            rows = self._db.execute(
                f"""SELECT s.field, s.step, avg(s.value) FROM samples s
                    JOIN (SELECT field, max(step) AS step FROM samples
                          WHERE run = ? AND measurement {_NOT_METRICS}
                            AND {_NUMERIC}
                          GROUP BY field) m ON m.field = s.field AND m.step = s.step
                    WHERE s.run = ? AND s.measurement {_NOT_METRICS}
                      AND typeof(s.value) IN ('real', 'integer')
                    GROUP BY s.field""",
                (run, run),
            ).fetchall()
        return {r[0]: (int(r[1]), float(r[2])) for r in rows if math.isfinite(r[2])}

    def last_step(self, run: str, rank: int | None = None, *, stored: bool = True) -> int | None:
        """The step a run (and rank) was last at: the last step logged through the exporter
        (`run_progress`; lower than the highest step after a resume), else (with `stored`) the
        highest stored step, ignoring the run_config point."""
        key = (run, NO_RANK if rank is None else rank)
        with self._lock:
            row = self._db.execute(
                "SELECT step FROM run_progress WHERE run = ? AND rank = ?", key
            ).fetchone()
            if row is None and stored:
                row = self._db.execute(_MAX_STEP, {"run": key[0], "rank": key[1]}).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
