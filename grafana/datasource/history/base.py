"""What the datasource needs from a metric history, whatever database holds it.

A store answers in step space: steps are training steps (ints), values floats. `series` never
returns more than `max_points` points: when a range holds more, the store aggregates in the
database into equal step buckets laid out by `bucket_plan` (the mean of the raw values in the
bucket, every rank's and GPU's value counting once as InfluxDB's `mean()` does, and the bucket's
last step) so a million-step run is never pulled into Python. `window` returns the last raw points
a diagnosis card looks at; `stats` the whole-run count and mean of fields, computed where the
history lives (running sums kept at ingest, or a server-side aggregate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from exporter.lifecycle import Recorded

__all__ = [
    "BUCKET_LEVELS",
    "BucketPlan",
    "Event",
    "FieldStats",
    "HistoryError",
    "HistoryStore",
    "HistoryUnavailable",
    "Latest",
    "Points",
    "RankSpread",
    "RunInfo",
    "bucket_means",
    "bucket_plan",
    "bucket_size",
    "empty_points",
    "points_from",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class HistoryError(Exception):
    """Base class for errors reading a history store."""


class HistoryUnavailable(HistoryError):
    """The store cannot be reached or refused a query (database down, wrong credentials)."""


@dataclass(frozen=True, eq=False)
class Points:
    """Steps (ascending) and values; `bucket` steps per point (1 = raw points)."""

    steps: IntArray
    values: FloatArray
    bucket: int = 1
    total: int | None = None

    def __len__(self) -> int:
        return int(self.steps.size)


def empty_points() -> Points:
    return Points(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 1, 0)


def points_from(
    steps: Sequence[int] | IntArray,
    values: Sequence[float | None] | FloatArray,
    bucket: int = 1,
    total: int | None = None,
) -> Points:
    """Points from parallel sequences; None values become NaN; sorted by step."""
    s = np.asarray(steps, dtype=np.int64).reshape(-1)
    if isinstance(values, np.ndarray):
        v = values.astype(np.float64, copy=False).reshape(-1)
    else:
        v = np.asarray([math.nan if x is None else x for x in values], dtype=np.float64)
    if s.size and np.any(np.diff(s) < 0):
        order = np.argsort(s, kind="stable")
        s, v = s[order], v[order]
    return Points(s, v, bucket, total)


@dataclass(frozen=True)
class Event:
    """A step-keyed event (checkpoint, resume, alert onset...) shown as an annotation."""

    step: int
    kind: str
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "kind": self.kind,
            "text": self.text,
            "fields": dict(self.fields),
        }


@dataclass(frozen=True)
class Latest:
    """The newest step a run has logged (None when it logged nothing yet)."""

    step: int | None
    wall_time: float | None = None


@dataclass(frozen=True)
class RunInfo:
    """What the run list shows about a run: who logged it and its wall-clock activity (seconds
    since the epoch; None where the store does not know). `finished` is when the run said it
    ended; `last_activity` the wall time of the newest step it logged."""

    project: str | None = None
    framework: str | None = None
    created: float | None = None
    finished: float | None = None
    last_activity: float | None = None
    recorded: Recorded | None = None
    """What the store recorded about the run's life (the outbox's state, arrival and lease;
    None from a store that records none, as InfluxDB): what `Lifecycle.status` reads."""


def bucket_size(first: int, last: int, max_points: int) -> int:
    """Steps per bucket so that [first, last] splits into at most `max_points` buckets."""
    span = max(0, last - first) + 1
    return max(1, -(-span // max(1, max_points)))


BUCKET_LEVELS = (64, 4096)
"""Step blocks a bucket of at least that many steps is made of (the embedded store keeps rollups
of exactly these blocks: `exporter.schema.ROLLUP_LEVELS`)."""


@dataclass(frozen=True)
class BucketPlan:
    """Buckets `[origin + k*size, origin + (k+1)*size - 1]`; `level` is the step block both
    `origin` and `size` are multiples of (1: none)."""

    origin: int
    size: int
    level: int = 1

    def count(self, last: int) -> int:
        """Buckets needed to reach step `last`."""
        return max(0, last - self.origin) // self.size + 1


def bucket_plan(first: int, last: int, max_points: int) -> BucketPlan:
    """Buckets covering [first, last] in at most `max_points`, the same on every store.

    Below the finest level the buckets start at `first` and have `bucket_size` steps. Once a bucket
    spans a level (64 or 4096 steps) they are laid on that level's blocks instead: the origin is
    rounded down and the size up to multiples of it, so a store can sum whole blocks it keeps at
    ingest and read about `max_points * 64` rows whatever the run length.
    """
    size = bucket_size(first, last, max_points)
    level = max((b for b in BUCKET_LEVELS if b <= size), default=1)
    if level == 1:
        return BucketPlan(first, size, 1)
    origin = first - first % level
    size = bucket_size(origin, last, max_points)
    return BucketPlan(origin, -(-size // level) * level, level)


def bucket_means(steps: IntArray, values: FloatArray, plan: BucketPlan) -> Points:
    """Sorted raw points in the buckets of `plan`, as the databases bucket them: each bucket's
    mean of its finite values at the last step in it (points of several ranks at one step all
    count); `total` is the number of points."""
    keys = (steps - plan.origin) // plan.size
    uniq, inverse = np.unique(keys, return_inverse=True)
    finite = np.isfinite(values)
    sums = np.bincount(inverse, weights=np.where(finite, values, 0.0), minlength=uniq.size)
    counts = np.bincount(inverse, weights=finite.astype(np.float64), minlength=uniq.size)
    last_step = np.zeros(uniq.size, dtype=np.int64)
    np.maximum.at(last_step, inverse, steps)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return Points(last_step, means.astype(np.float64), plan.size, int(steps.size))


@dataclass(frozen=True, eq=False)
class RankSpread:
    """How the ranks of a job differ on one series: the ranks that logged it and, per bucket of
    the series' plan (`origin`, `size`: bucket k holds steps origin + k*size ...), the lowest
    and highest value any rank logged in it, at the bucket's last step. Empty (no ranks, or
    one) for a series a single rank logged."""

    ranks: tuple[int, ...]
    origin: int = 0
    size: int = 1
    steps: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    low: FloatArray = field(default_factory=lambda: np.empty(0, dtype=np.float64))
    high: FloatArray = field(default_factory=lambda: np.empty(0, dtype=np.float64))

    def at(self, step: int) -> tuple[float, float] | None:
        """(low, high) of the bucket holding `step`, None where no rank logged in it."""
        if not self.steps.size:
            return None
        k = (step - self.origin) // self.size
        keys = (self.steps - self.origin) // self.size
        i = int(np.searchsorted(keys, k))
        if i < keys.size and keys[i] == k:
            return float(self.low[i]), float(self.high[i])
        return None


@dataclass(frozen=True)
class FieldStats:
    """A field over its whole run: finite values counted, their mean (None without any)."""

    count: int
    mean: float | None


class HistoryStore(Protocol):
    """Read access to logged runs. Implementations validate nothing about the caller: the
    datasource passes only run names it got from `runs()` and fields the registry knows, and
    implementations still escape or bind every value they put into a query."""

    @property
    def kind(self) -> str: ...

    def runs(self) -> tuple[str, ...]: ...

    def run_config(self, run: str) -> Mapping[str, Any]: ...

    def fields(self, run: str) -> tuple[str, ...]: ...

    def series(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> Points: ...

    def series_many(
        self,
        run: str,
        fields: Sequence[str],
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Mapping[str, Points]:
        """`series` of each field over one range (a store that pays per request asks for all at
        once)."""
        ...

    def window(self, run: str, field: str, last_n: int) -> Points: ...

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]: ...

    def stats(self, run: str, fields: Sequence[str]) -> Mapping[str, FieldStats]: ...

    def events(self, run: str, limit: int) -> tuple[Event, ...]: ...

    def latest(self, run: str) -> Latest: ...

    def run_info(self, run: str) -> RunInfo: ...

    def logged_fields(self, run: str) -> Mapping[str, str]:
        """Every metric field the run logged (not its hyperparameters), with the measurement it is
        stored under: a registry group, or `exporter.schema.UNREGISTERED` for a name the
        registry does not know."""
        ...

    def clock(self, run: str, field: str, samples: int) -> Points:
        """About `samples` (step, wall time) pairs of one field, spread over its steps, for
        placing a series on a wall-clock axis; `values` are seconds since the epoch."""
        ...

    def rank_spread(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> RankSpread:
        """The ranks that logged the series and their lowest and highest value per bucket of
        the plan `series` reads it with (`history.ranks`: `series` reads the lowest rank)."""
        ...

    def rank_series(
        self, run: str, field: str, rank: int, start: int | None, end: int | None, max_points: int
    ) -> Points:
        """`series` of one rank's points alone."""
        ...
