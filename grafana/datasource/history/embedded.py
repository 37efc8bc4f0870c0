"""The embedded store: the exporter's sqlite outbox (`exporter/store/outbox.py`), read-only.

Every query binds its values as parameters; aggregation happens in SQL (step buckets, rank
averaging, skip-scans over the `(run, field, step)` index), so a request reads a bounded number of
rows however long the run is: whole-run statistics come from the running sums the outbox keeps at
ingest (`sample_stats`), and a series whose buckets span 64 or more steps sums the outbox's
rollup blocks (`sample_rollups`, 64 and 4096 steps, where the outbox keeps that level for the
series: not for one too sparse to need it), reading raw rows only for the partial blocks at the
edges of a requested range. A file the exporter has not opened since those tables came in
is read the slow way (aggregates over the raw rows), with the same answers. The file is opened
read-only per call: no thread shares a connection and the datasource never creates or changes the
exporter's file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from exporter.lease import LEASE_COLUMNS, Lease, lease_from_row
from exporter.lifecycle import Recorded
from exporter.schema import NO_RANK, ROLLUP_LEVELS, RUN_CONFIG, SPREAD, UNREGISTERED
from exporter.store.preview import PREVIEW_TABLE
from exporter.store.ranks import rank_records

from .base import (
    BucketPlan,
    Event,
    FieldStats,
    HistoryUnavailable,
    Latest,
    Points,
    RankSpread,
    RunInfo,
    bucket_means,
    bucket_plan,
    empty_points,
    points_from,
)
from .ranks import reading_rank

__all__ = ["EmbeddedHistory"]

# Rows the datasource reads as metric history: numeric values outside the hyperparameter point.
_SERIES_WHERE = (
    f"run = ? AND field = ? AND measurement != '{RUN_CONFIG}' "
    "AND typeof(value) IN ('real', 'integer')"
)
_NAMED_WHERE = (
    f"run = :run AND field = :field AND measurement != '{RUN_CONFIG}' "
    "AND typeof(value) IN ('real', 'integer')"
)
# ... of the ranks read (`_reading`): one rank's rows where several ranks logged the field
_READ_WHERE = f"{_SERIES_WHERE} AND rank BETWEEN ? AND ?"
_FIRST = (
    f"SELECT step FROM samples WHERE {_READ_WHERE} AND step BETWEEN ? AND ? ORDER BY step LIMIT 1"
)
_LAST = (
    f"SELECT step FROM samples WHERE {_READ_WHERE} AND step BETWEEN ? AND ? "
    "ORDER BY step DESC LIMIT 1"
)
_RAW = (
    f"SELECT step, avg(value) FROM samples WHERE {_READ_WHERE} AND step BETWEEN ? AND ? "
    "GROUP BY step ORDER BY step"
)
# What the outbox's running statistics and rollups count: finite numbers (sqlite stores NaN as
# NULL; an infinity is left out so one stray row cannot poison a whole run's sums).
_FINITE = "abs(value) <= 1.7976931348623157e308"
_BUCKETED = (
    "SELECT max(step), total(value) / count(*), count(*) FROM samples "
    f"WHERE {_READ_WHERE} AND {_FINITE} AND step BETWEEN ? AND ? "
    "GROUP BY (step - ?) / ? ORDER BY 1"
)
# every rank's lowest and highest value in each bucket (raw steps: 1-step buckets)
_RANK_SPREAD = (
    "SELECT max(step), min(value), max(value) FROM samples "
    f"WHERE {_SERIES_WHERE} AND {_FINITE} AND step BETWEEN ? AND ? "
    "GROUP BY (step - ?) / ? ORDER BY 1"
)
_RANKS_KEPT = "SELECT DISTINCT rank FROM sample_stats WHERE run = ? AND field = ? ORDER BY rank"
_RANKS_SCAN = f"SELECT DISTINCT rank FROM samples WHERE {_SERIES_WHERE} ORDER BY rank"
# Whole rollup blocks inside the range, plus the raw rows of the partial blocks at its edges.
_ROLLED_UP = f"""
SELECT max(s), total(t) / sum(c), sum(c) FROM (
    SELECT last_step AS s, total AS t, n AS c, block * :level AS k FROM sample_rollups
    WHERE run = :run AND field = :field AND level = :level AND block BETWEEN :b0 AND :b1
      AND n > 0
    UNION ALL
    SELECT step, value, 1, step FROM samples
    WHERE {_NAMED_WHERE} AND {_FINITE}
      AND step BETWEEN :lo AND :lo_end
    UNION ALL
    SELECT step, value, 1, step FROM samples
    WHERE {_NAMED_WHERE} AND {_FINITE}
      AND step BETWEEN :hi_start AND :hi
) GROUP BY (k - :origin) / :size ORDER BY 1
"""
_HAS_STATS = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
    "AND name IN ('sample_stats', 'sample_rollups', 'rollup_series')"
)
_LEVELS = "SELECT levels FROM rollup_series WHERE run = ? AND field = ?"
_STATS = (
    "SELECT sum(n), total(total) FROM sample_stats WHERE run = ? AND field = ? "
    "AND rank BETWEEN ? AND ?"
)
_STATS_SCAN = f"SELECT count(*), total(value) FROM samples WHERE {_READ_WHERE} AND {_FINITE}"
_WINDOW = (
    "SELECT step, avg(value) FROM ("
    f"SELECT step, value FROM samples WHERE {_READ_WHERE} ORDER BY step DESC LIMIT ?"
    ") GROUP BY step ORDER BY step"
)
_FIELDS = """
WITH RECURSIVE f(name) AS (
    SELECT min(field) FROM samples WHERE run = ?
    UNION ALL
    SELECT (SELECT min(field) FROM samples WHERE run = ? AND field > f.name)
    FROM f WHERE f.name IS NOT NULL
)
SELECT name FROM f WHERE name IS NOT NULL
"""
_LAST_STEP = (
    f"SELECT step, wall_time FROM samples WHERE {_SERIES_WHERE} "
    f"AND measurement != '{UNREGISTERED}' ORDER BY step DESC LIMIT 1"
)
# The fields `latest` looks at, where the running statistics are kept: those with a series under
# a registry measurement. Scanning every field instead reads every row of each unregistered one
# back to its first step (its `_LAST_STEP` finds none): a verl console log's hundred timing keys
# made each `/api/runs` cost half a second of a core while the run was imported.
_LATEST_FIELDS_KEPT = (
    "SELECT DISTINCT field FROM sample_stats WHERE run = ? "
    f"AND measurement NOT IN ('{UNREGISTERED}', '{RUN_CONFIG}') ORDER BY field"
)
_MAX_STEP = 2**62
_MEASUREMENT = f"SELECT measurement FROM samples WHERE {_SERIES_WHERE} LIMIT 1"
_CLOCK = (
    f"SELECT step, wall_time FROM samples WHERE {_SERIES_WHERE} AND step >= ? ORDER BY step LIMIT 1"
)
_HAS_SKETCH = f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{PREVIEW_TABLE}'"
_SKETCH = (
    f"SELECT step, value FROM {PREVIEW_TABLE} WHERE run = ? AND field = ? "
    "AND step BETWEEN ? AND ? ORDER BY step"
)
_SKETCH_FIELDS = f"SELECT DISTINCT field, measurement FROM {PREVIEW_TABLE} WHERE run = ?"
_RUN_INFO = (
    "project",
    "framework",
    "created",
    "finished",
    "last_activity",
    "state",
    "state_reason",
    "state_at",
    "arrived",
)


def _sketch(db: sqlite3.Connection, run: str, field: str, lo: int, hi: int) -> Points | None:
    """The whole-run sketch of an import still storing the run (`exporter.store.preview`) in
    [lo, hi]: None when there is none (the table is made by the first sketch)."""
    if lo > hi or db.execute(_HAS_SKETCH).fetchone() is None:
        return None
    rows = db.execute(_SKETCH, (run, field, lo, hi)).fetchall()
    if not rows:
        return None
    return points_from([r[0] for r in rows], [r[1] for r in rows])


class _Damage:
    """The damage a read met in the store file, recorded when it happens, for the file it was
    met in (device, inode): every later call says so at once (health included) until the file
    at the path is another one, as `rlvitals doctor --repair` leaves it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: tuple[tuple[int, int], str] | None = None

    def record(self, path: Path, message: str) -> None:
        with self._lock, suppress(OSError):
            self._seen = (_identity(path), message)

    def current(self, path: Path) -> str | None:
        with self._lock:
            if self._seen is None:
                return None
            try:
                same = _identity(path) == self._seen[0]
            except OSError:
                same = False
            if not same:
                self._seen = None
                return None
            return self._seen[1]


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _has_runs_table(db: sqlite3.Connection) -> bool:
    row = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'")
    return row.fetchone() is not None


def _damaged(exc: sqlite3.Error) -> bool:
    """sqlite's "database disk image is malformed" / "file is not a database"."""
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


# The cheapest reads that walk the right-most path of the big tables: the pages written last,
# the ones a file truncated at its end loses first.
_PROBES = (
    "SELECT run FROM runs ORDER BY created, run",
    "SELECT * FROM points ORDER BY rowid DESC LIMIT 1",
    "SELECT * FROM run_fields ORDER BY rowid DESC LIMIT 1",
    "SELECT * FROM events ORDER BY rowid DESC LIMIT 1",
)


@dataclass(frozen=True)
class EmbeddedHistory:
    """History read from `<RLVITALS_STORE>/outbox.sqlite`; a missing file is an empty store."""

    path: Path
    _damage: _Damage = field(default_factory=_Damage, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return "embedded"

    def _unusable(self, what: str, exc: sqlite3.Error) -> HistoryUnavailable:
        if _damaged(exc):
            message = (
                f"the embedded store {self.path} is damaged ({exc}): stop the processes "
                "writing to it and run `rlvitals doctor --repair` (it salvages every readable "
                "row into a new file and keeps the damaged one beside it)"
            )
            self._damage.record(self.path, message)
            return HistoryUnavailable(message)
        return HistoryUnavailable(f"cannot {what} the embedded store {self.path}: {exc}")

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection | None]:
        if not self.path.exists():
            yield None
            return
        seen = self._damage.current(self.path)
        if seen is not None:
            raise HistoryUnavailable(seen)
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        except sqlite3.Error as exc:
            raise self._unusable("open", exc) from exc
        try:
            # an Outbox creates the file before it writes the schema (sqlite makes the file
            # at connect; WAL is set before the tables): between the two it is a store being
            # created, i.e. empty, not an unreadable one
            yield db if _has_runs_table(db) else None
        except sqlite3.Error as exc:
            raise self._unusable("read", exc) from exc
        finally:
            db.close()

    def runs(self) -> tuple[str, ...]:
        """The runs, oldest first. Also reads the newest row of each big table, so a health
        check finds a damaged file before a chart does."""
        with self._db() as db:
            if db is None:
                return ()
            rows = db.execute(_PROBES[0]).fetchall()
            for probe in _PROBES[1:]:
                db.execute(probe).fetchall()
        return tuple(str(r[0]) for r in rows)

    def run_config(self, run: str) -> Mapping[str, Any]:
        with self._db() as db:
            row = (
                None
                if db is None
                else db.execute("SELECT config FROM runs WHERE run = ?", (run,)).fetchone()
            )
        if row is None:
            return {}
        try:
            config = json.loads(row[0])
        except (TypeError, ValueError):
            return {}
        return config if isinstance(config, dict) else {}

    def fields(self, run: str) -> tuple[str, ...]:
        with self._db() as db:
            if db is None:
                return ()
            return tuple(str(r[0]) for r in db.execute(_FIELDS, (run, run)).fetchall())

    def series(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> Points:
        return self._series(run, field, None, start, end, max_points)

    def rank_series(
        self, run: str, field: str, rank: int, start: int | None, end: int | None, max_points: int
    ) -> Points:
        return self._series(run, field, rank, start, end, max_points)

    def rank_spread(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> RankSpread:
        lo = 0 if start is None else start
        hi = _MAX_STEP if end is None else end
        with self._db() as db:
            if db is None:
                return RankSpread(())
            logged = tuple(r for r in _ranks(db, run, field) if r != NO_RANK)
            if len(logged) < 2:
                return RankSpread(logged)
            # the plan `series` reads the line with (its rank's first and last step), so each
            # bucket of the spread is one of the line's
            ranks = _reading(db, run, field)
            first_row = db.execute(_FIRST, (run, field, *ranks, lo, hi)).fetchone()
            if first_row is None:
                return RankSpread(logged)
            first = int(first_row[0])
            last = int(db.execute(_LAST, (run, field, *ranks, lo, hi)).fetchone()[0])
            if last - first + 1 <= max_points:
                plan = BucketPlan(first, 1)
            else:
                plan = bucket_plan(
                    first if start is None else start, last if end is None else end, max_points
                )
            args = (run, field, lo, hi, plan.origin, plan.size)
            rows = db.execute(_RANK_SPREAD, args).fetchall()
        return RankSpread(
            logged,
            plan.origin,
            plan.size,
            np.asarray([r[0] for r in rows], dtype=np.int64),
            np.asarray([r[1] for r in rows], dtype=np.float64),
            np.asarray([r[2] for r in rows], dtype=np.float64),
        )

    def _series(
        self,
        run: str,
        field: str,
        rank: int | None,
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Points:
        lo = 0 if start is None else start
        hi = _MAX_STEP if end is None else end
        with self._db() as db:
            if db is None:
                return empty_points()
            ranks = _reading(db, run, field) if rank is None else (rank, rank)
            first_row = db.execute(_FIRST, (run, field, *ranks, lo, hi)).fetchone()
            last_row = (
                None if first_row is None else db.execute(_LAST, (run, field, *ranks, lo, hi))
            )
            stored_last = None if last_row is None else int(last_row.fetchone()[0])
            # an import still storing the run has sketched the rest; an import has no ranks
            sketch = (
                None
                if rank is not None
                else _sketch(db, run, field, lo if stored_last is None else stored_last + 1, hi)
            )
        if sketch is not None:
            stored = (
                None
                if first_row is None or stored_last is None
                else (int(first_row[0]), stored_last)
            )
            return self._with_sketch(run, field, ranks, start, stored, sketch, max_points)
        return self._stored(run, field, ranks, start, end, max_points)

    def _with_sketch(
        self,
        run: str,
        field: str,
        ranks: tuple[int, int],
        start: int | None,
        stored: tuple[int, int] | None,
        sketch: Points,
        max_points: int,
    ) -> Points:
        """The stored points (steps `stored`, first and last, in the range), then the sketch of
        an import still storing the rest (`exporter.store.preview`), each given its share of
        `max_points` by its steps."""
        whole_last = int(sketch.steps[-1])
        head = empty_points()
        if stored is not None:
            first, last = stored
            share = (last - first + 1) / max(1, whole_last - first + 1)
            head = self._stored(run, field, ranks, start, last, max(2, round(max_points * share)))
        room = max(1, max_points - len(head))
        plan = bucket_plan(int(sketch.steps[0]), whole_last, room)
        tail = bucket_means(sketch.steps, sketch.values, plan)
        return Points(
            np.concatenate([head.steps, tail.steps]),
            np.concatenate([head.values, tail.values]),
            max(head.bucket, tail.bucket),
            (head.total or 0) + int(sketch.steps.size),
        )

    def _stored(
        self,
        run: str,
        field: str,
        ranks: tuple[int, int],
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Points:
        lo = 0 if start is None else start
        hi = _MAX_STEP if end is None else end
        with self._db() as db:
            if db is None:
                return empty_points()
            first_row = db.execute(_FIRST, (run, field, *ranks, lo, hi)).fetchone()
            if first_row is None:
                return empty_points()
            first, last = (
                int(first_row[0]),
                int(db.execute(_LAST, (run, field, *ranks, lo, hi)).fetchone()[0]),
            )
            if last - first + 1 <= max_points:
                rows = db.execute(_RAW, (run, field, *ranks, lo, hi)).fetchall()
                return points_from([r[0] for r in rows], [r[1] for r in rows], 1, len(rows))
            plan = bucket_plan(
                first if start is None else start, last if end is None else end, max_points
            )
            # the rollup blocks sum every rank: read them only where every rank is read
            every = ranks == _EVERY_RANK
            if every and plan.level in ROLLUP_LEVELS and _keeps(db, run, field, plan.level):
                rows = db.execute(_ROLLED_UP, _rollup_args(run, field, lo, hi, plan)).fetchall()
            else:
                args = (run, field, *ranks, lo, hi, plan.origin, plan.size)
                rows = db.execute(_BUCKETED, args).fetchall()
        total = sum(int(r[2]) for r in rows)
        return points_from([r[0] for r in rows], [r[1] for r in rows], plan.size, total)

    def logged_fields(self, run: str) -> Mapping[str, str]:
        # One index seek per field: a field holding only the hyperparameter point (`run_config`,
        # all at step 0) has no row past it and is left out.
        out: dict[str, str] = {}
        with self._db() as db:
            if db is None:
                return out
            for (name,) in db.execute(_FIELDS, (run, run)).fetchall():
                row = db.execute(_MEASUREMENT, (run, name)).fetchone()
                # `spread` holds facts about other fields' values (count, min, max, non-finite
                # counts), not names the run logged
                if row is not None and row[0] != SPREAD:
                    out[str(name)] = str(row[0])
            # a name an import still storing the run has sketched, not stored yet
            if db.execute(_HAS_SKETCH).fetchone() is not None:
                for name, measurement in db.execute(_SKETCH_FIELDS, (run,)).fetchall():
                    out.setdefault(str(name), str(measurement))
        return out

    def clock(self, run: str, field: str, samples: int) -> Points:
        with self._db() as db:
            if db is None:
                return empty_points()
            first_row = db.execute(_FIRST, (run, field, *_EVERY_RANK, 0, _MAX_STEP)).fetchone()
            if first_row is None:
                return empty_points()
            first = int(first_row[0])
            last = int(db.execute(_LAST, (run, field, *_EVERY_RANK, 0, _MAX_STEP)).fetchone()[0])
            n = max(2, samples)
            targets = sorted({first + (last - first) * k // (n - 1) for k in range(n)})
            pairs: dict[int, float] = {}
            for target in targets:
                row = db.execute(_CLOCK, (run, field, target)).fetchone()
                if row is not None:
                    pairs[int(row[0])] = float(row[1])
        return points_from(list(pairs), list(pairs.values()))

    def run_info(self, run: str) -> RunInfo:
        with self._db() as db:
            if db is None:
                return RunInfo()
            have = {str(r[1]) for r in db.execute("PRAGMA table_info(runs)").fetchall()}
            # A file from before the lifecycle columns: what it lacks is unknown (NULL).
            columns = ", ".join(c if c in have else "NULL" for c in _RUN_INFO)
            row = db.execute(f"SELECT {columns} FROM runs WHERE run = ?", (run,)).fetchone()
            lease = _lease(db, run)  # on the same connection: one open per run row
            ranks = rank_records(db, run)
        if row is None:
            return RunInfo()
        project, framework, created, finished, activity, *life = row
        if activity is None:
            activity = self.latest(run).wall_time
        return RunInfo(
            None if project is None else str(project),
            None if framework is None else str(framework),
            None if created is None else float(created),
            None if finished is None else float(finished),
            None if activity is None else float(activity),
            Recorded(
                None if life[0] is None else str(life[0]),
                None if life[1] is None else str(life[1]),
                life[2],
                life[3],
                lease,
                ranks,
            ),
        )

    def series_many(
        self,
        run: str,
        fields: Sequence[str],
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Mapping[str, Points]:
        return {f: self.series(run, f, start, end, max_points) for f in dict.fromkeys(fields)}

    def window(self, run: str, field: str, last_n: int) -> Points:
        with self._db() as db:
            if db is None:
                return empty_points()
            rows = db.execute(_WINDOW, (run, field, *_reading(db, run, field), last_n)).fetchall()
        return points_from([r[0] for r in rows], [r[1] for r in rows])

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]:
        out: dict[str, Points] = {}
        with self._db() as db:
            for name in dict.fromkeys(fields):
                if db is None:
                    out[name] = empty_points()
                    continue
                ranks = _reading(db, run, name)
                rows = db.execute(_WINDOW, (run, name, *ranks, last_n)).fetchall()
                out[name] = points_from([r[0] for r in rows], [r[1] for r in rows])
        return out

    def stats(self, run: str, fields: Sequence[str]) -> Mapping[str, FieldStats]:
        out: dict[str, FieldStats] = {}
        with self._db() as db:
            kept = db is not None and _has_stats(db)
            for name in dict.fromkeys(fields):
                if db is None:
                    out[name] = FieldStats(0, None)
                    continue
                ranks = _reading(db, run, name)
                if kept:
                    n, total = db.execute(_STATS, (run, name, *ranks)).fetchone()
                else:
                    n, total = db.execute(_STATS_SCAN, (run, name, *ranks)).fetchone()
                count = int(n or 0)
                out[name] = FieldStats(count, float(total) / count if count else None)
        return out

    def events(self, run: str, limit: int) -> tuple[Event, ...]:
        with self._db() as db:
            if db is None:
                return ()
            rows = db.execute(
                "SELECT step, kind, text, fields, rank FROM events WHERE run = ? "
                "ORDER BY step, wall_time LIMIT ?",
                (run, limit),
            ).fetchall()
        return tuple(Event(int(r[0]), str(r[1]), str(r[2]), _fields(r[3], r[4])) for r in rows)

    def latest(self, run: str) -> Latest:
        best: tuple[int, float | None] | None = None
        with self._db() as db:
            if db is None:
                return Latest(None)
            if _has_stats(db):  # a series of non-finite values alone is not counted there
                names = db.execute(_LATEST_FIELDS_KEPT, (run,)).fetchall()
            else:
                names = db.execute(_FIELDS, (run, run)).fetchall()
            for (name,) in names:
                row = db.execute(_LAST_STEP, (run, name)).fetchone()
                if row is None:
                    continue
                step, wall = row
                if best is None or step > best[0]:
                    best = (int(step), None if wall is None else float(wall))
        return Latest(None) if best is None else Latest(best[0], best[1])


_EVERY_RANK = (NO_RANK, 2**62)


def _ranks(db: sqlite3.Connection, run: str, field: str) -> list[int]:
    """The ranks that logged `field` in `run` (from the running statistics where kept)."""
    sql = _RANKS_KEPT if _has_stats(db) else _RANKS_SCAN
    return [int(r[0]) for r in db.execute(sql, (run, field)).fetchall()]


def _reading(db: sqlite3.Connection, run: str, field: str) -> tuple[int, int]:
    """The ranks a series is read from, as a range: see `history.ranks.reading_rank`."""
    rank = reading_rank(_ranks(db, run, field))
    return _EVERY_RANK if rank is None else (NO_RANK, rank)


def _has_stats(db: sqlite3.Connection) -> bool:
    """Whether the exporter has given the file its running statistics and rollups."""
    return int(db.execute(_HAS_STATS).fetchone()[0]) == 3


def _keeps(db: sqlite3.Connection, run: str, field: str, level: int) -> bool:
    """Whether the outbox keeps rollup blocks of `level` steps for this series (it keeps the
    levels a series is dense enough for, once it has a few hundred points)."""
    if not _has_stats(db):
        return False
    row = db.execute(_LEVELS, (run, field)).fetchone()
    return row is not None and bool(int(row[0]) & (1 << ROLLUP_LEVELS.index(level)))


def _rollup_args(run: str, field: str, lo: int, hi: int, plan: BucketPlan) -> dict[str, Any]:
    """Which whole blocks of `plan.level` steps lie in [lo, hi] and which raw steps are left at
    each edge (a range inside one block is all raw). `hi` is _MAX_STEP for an open end."""
    level = plan.level
    b0 = -(-lo // level)
    b1 = hi // level if hi >= _MAX_STEP else (hi + 1) // level - 1
    if b1 < b0:
        b0, b1 = 1, 0  # no whole block: every step raw, once
        lo_end, hi_start = hi, hi + 1
    else:
        lo_end, hi_start = b0 * level - 1, (b1 + 1) * level
    return {
        "run": run,
        "field": field,
        "level": level,
        "b0": b0,
        "b1": b1,
        "lo": lo,
        "lo_end": lo_end,
        "hi_start": hi_start,
        "hi": hi,
        "origin": plan.origin,
        "size": plan.size,
    }


def _fields(raw: object, rank: object) -> dict[str, Any]:
    try:
        fields = json.loads(str(raw))
    except ValueError:
        fields = {}
    if not isinstance(fields, dict):
        fields = {}
    if isinstance(rank, int) and rank >= 0:
        fields.setdefault("rank", rank)
    return fields


def _lease(db: sqlite3.Connection, run: str) -> Lease | None:
    """The lease of the run's one writer (a run logged without ranks) in the file, if one is
    held (None from a file before leases; a file before ranks holds only such leases)."""
    try:
        row = db.execute(
            f"SELECT {LEASE_COLUMNS} FROM leases WHERE run = ? AND rank = ?", (run, NO_RANK)
        ).fetchone()
    except sqlite3.OperationalError:
        try:
            row = db.execute(f"SELECT {LEASE_COLUMNS} FROM leases WHERE run = ?", (run,)).fetchone()
        except sqlite3.OperationalError:
            return None
    return None if row is None else lease_from_row(row)
