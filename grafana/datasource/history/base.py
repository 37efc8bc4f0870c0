"""What the datasource needs from a metric history, whatever database holds it.

A store answers in step space: steps are training steps (ints), values floats. `series` never
returns more than `max_points` points: when a range holds more, the store aggregates in the
database into equal step buckets (mean value, last step of the bucket) so a million-step run is
never pulled into Python. `window` returns the last raw points a diagnosis card looks at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "Event",
    "HistoryError",
    "HistoryStore",
    "HistoryUnavailable",
    "Latest",
    "Points",
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
    v = np.asarray([math.nan if x is None else x for x in values], dtype=np.float64).reshape(-1)
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


def bucket_size(first: int, last: int, max_points: int) -> int:
    """Steps per bucket so that [first, last] splits into at most `max_points` buckets."""
    span = max(0, last - first) + 1
    return max(1, -(-span // max(1, max_points)))


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

    def window(self, run: str, field: str, last_n: int) -> Points: ...

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]: ...

    def events(self, run: str, limit: int) -> tuple[Event, ...]: ...

    def latest(self, run: str) -> Latest: ...
