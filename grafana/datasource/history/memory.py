"""An in-process history (numpy arrays): for tests, demos and anything already in memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .base import (
    Event,
    FieldStats,
    FloatArray,
    IntArray,
    Latest,
    Points,
    RankSpread,
    RunInfo,
    bucket_means,
    bucket_plan,
    empty_points,
    points_from,
)

__all__ = ["MemoryHistory", "downsample"]


def downsample(points: Points, start: int | None, end: int | None, max_points: int) -> Points:
    """The same step-bucket aggregation the databases do (`bucket_plan`): mean value, last step
    per bucket."""
    s, v = points.steps, points.values
    lo = 0 if start is None else int(np.searchsorted(s, start, side="left"))
    hi = s.size if end is None else int(np.searchsorted(s, end, side="right"))
    s, v = s[lo:hi], v[lo:hi]
    if s.size == 0:
        return empty_points()
    if s.size <= max_points:
        return Points(s, v, 1, int(s.size))
    first = int(s[0]) if start is None else start
    last = int(s[-1]) if end is None else end
    return bucket_means(s, v, bucket_plan(first, last, max_points))


@dataclass(frozen=True)
class MemoryHistory:
    """Runs held as `{run: {field: (steps, values)}}` with optional configs and events."""

    data: Mapping[str, Mapping[str, tuple[Sequence[int] | IntArray, Sequence[float] | FloatArray]]]
    configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    event_log: Mapping[str, Sequence[Event]] = field(default_factory=dict)
    info: Mapping[str, RunInfo] = field(default_factory=dict)
    clocks: Mapping[str, tuple[Sequence[int], Sequence[float]]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "memory"

    def _points(self, run: str, name: str) -> Points:
        pair = self.data.get(run, {}).get(name)
        if pair is None:
            return empty_points()
        return points_from(pair[0], pair[1])

    def runs(self) -> tuple[str, ...]:
        return tuple(sorted(self.data))

    def run_config(self, run: str) -> Mapping[str, Any]:
        return dict(self.configs.get(run, {}))

    def fields(self, run: str) -> tuple[str, ...]:
        return tuple(sorted(self.data.get(run, {})))

    def series(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> Points:
        return downsample(self._points(run, field), start, end, max_points)

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
        p = self._points(run, field)
        return Points(p.steps[-last_n:], p.values[-last_n:], 1, len(p))

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]:
        return {f: self.window(run, f, last_n) for f in fields}

    def stats(self, run: str, fields: Sequence[str]) -> Mapping[str, FieldStats]:
        out = {}
        for name in dict.fromkeys(fields):
            v = self._points(run, name).values
            v = v[np.isfinite(v)]
            out[name] = FieldStats(int(v.size), float(v.mean()) if v.size else None)
        return out

    def events(self, run: str, limit: int) -> tuple[Event, ...]:
        return tuple(sorted(self.event_log.get(run, ()), key=lambda e: e.step))[:limit]

    def latest(self, run: str) -> Latest:
        steps = [int(max(pair[0])) for pair in self.data.get(run, {}).values() if len(pair[0])]
        return Latest(max(steps) if steps else None)

    def run_info(self, run: str) -> RunInfo:
        return self.info.get(run, RunInfo())

    def logged_fields(self, run: str) -> Mapping[str, str]:
        # No measurements here: every field is held the same way.
        return dict.fromkeys(self.fields(run), "memory")

    def rank_spread(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> RankSpread:
        del run, field, start, end, max_points  # runs held here have no ranks
        return RankSpread(())

    def rank_series(
        self, run: str, field: str, rank: int, start: int | None, end: int | None, max_points: int
    ) -> Points:
        del run, field, rank, start, end, max_points
        return empty_points()

    def clock(self, run: str, field: str, samples: int) -> Points:
        del field, samples  # one clock per run is all a test needs
        pair = self.clocks.get(run)
        return empty_points() if pair is None else points_from(pair[0], pair[1])
