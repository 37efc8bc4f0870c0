"""The embedded store: the exporter's sqlite outbox (`exporter/outbox.py`), read-only.

Every query binds its values as parameters; aggregation happens in SQL (step buckets, rank
averaging, skip-scans over the `(run, field, step)` index), so a request reads at most a few
thousand rows however long the run is. The file is opened read-only per call: no thread shares a
connection and the datasource never creates or changes the exporter's file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import (
    Event,
    HistoryUnavailable,
    Latest,
    Points,
    bucket_size,
    empty_points,
    points_from,
)

__all__ = ["EmbeddedHistory"]

# Rows the datasource reads as metric history: numeric values outside the hyperparameter point.
_SERIES_WHERE = (
    "run = ? AND field = ? AND measurement != 'run_config' AND typeof(value) IN ('real', 'integer')"
)
_FIRST = (
    f"SELECT step FROM samples WHERE {_SERIES_WHERE} AND step BETWEEN ? AND ? ORDER BY step LIMIT 1"
)
_LAST = (
    f"SELECT step FROM samples WHERE {_SERIES_WHERE} AND step BETWEEN ? AND ? "
    "ORDER BY step DESC LIMIT 1"
)
_RAW = (
    f"SELECT step, avg(value) FROM samples WHERE {_SERIES_WHERE} AND step BETWEEN ? AND ? "
    "GROUP BY step ORDER BY step"
)
_BUCKETED = (
    "SELECT max(step), avg(v) FROM ("
    f"SELECT step, avg(value) AS v FROM samples WHERE {_SERIES_WHERE} AND step BETWEEN ? AND ? "
    "GROUP BY step) GROUP BY (step - ?) / ? ORDER BY 1"
)
_WINDOW = (
    "SELECT step, avg(value) FROM ("
    f"SELECT step, value FROM samples WHERE {_SERIES_WHERE} ORDER BY step DESC LIMIT ?"
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
    "AND measurement != 'unregistered' ORDER BY step DESC LIMIT 1"
)
_MAX_STEP = 2**62


@dataclass(frozen=True)
class EmbeddedHistory:
    """History read from `<RLVITALS_STORE>/outbox.sqlite`; a missing file is an empty store."""

    path: Path

    @property
    def kind(self) -> str:
        return "embedded"

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection | None]:
        if not self.path.exists():
            yield None
            return
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
        except sqlite3.Error as exc:
            raise HistoryUnavailable(f"cannot open the embedded store {self.path}: {exc}") from exc
        try:
            yield db
        except sqlite3.Error as exc:
            raise HistoryUnavailable(f"cannot read the embedded store {self.path}: {exc}") from exc
        finally:
            db.close()

    def runs(self) -> tuple[str, ...]:
        with self._db() as db:
            if db is None:
                return ()
            rows = db.execute("SELECT run FROM runs ORDER BY created, run").fetchall()
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
        lo = 0 if start is None else start
        hi = _MAX_STEP if end is None else end
        with self._db() as db:
            if db is None:
                return empty_points()
            first_row = db.execute(_FIRST, (run, field, lo, hi)).fetchone()
            if first_row is None:
                return empty_points()
            first, last = (
                int(first_row[0]),
                int(db.execute(_LAST, (run, field, lo, hi)).fetchone()[0]),
            )
            if last - first + 1 <= max_points:
                rows = db.execute(_RAW, (run, field, lo, hi)).fetchall()
                return points_from([r[0] for r in rows], [r[1] for r in rows], 1, len(rows))
            origin = first if start is None else start
            size = bucket_size(origin, last if end is None else end, max_points)
            rows = db.execute(_BUCKETED, (run, field, lo, hi, origin, size)).fetchall()
        return points_from([r[0] for r in rows], [r[1] for r in rows], size, None)

    def window(self, run: str, field: str, last_n: int) -> Points:
        with self._db() as db:
            if db is None:
                return empty_points()
            rows = db.execute(_WINDOW, (run, field, last_n)).fetchall()
        return points_from([r[0] for r in rows], [r[1] for r in rows])

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]:
        out: dict[str, Points] = {}
        with self._db() as db:
            for name in dict.fromkeys(fields):
                if db is None:
                    out[name] = empty_points()
                    continue
                rows = db.execute(_WINDOW, (run, name, last_n)).fetchall()
                out[name] = points_from([r[0] for r in rows], [r[1] for r in rows])
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
            for (name,) in db.execute(_FIELDS, (run, run)).fetchall():
                row = db.execute(_LAST_STEP, (run, name)).fetchone()
                if row is None:
                    continue
                step, wall = row
                if best is None or step > best[0]:
                    best = (int(step), None if wall is None else float(wall))
        return Latest(None) if best is None else Latest(best[0], best[1])


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
