"""A card of a metric judged against its early value reads its window preceded by a sketch of the
early stage: of the whole early stage when the window starts after it, and ending just before
the window when the window starts inside it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import registry
from grafana.datasource.cards import cards_for
from grafana.datasource.history import MemoryHistory, Points


@dataclass
class _Recording:
    """A memory store that keeps the ranges of the series read several fields at once."""

    inner: MemoryHistory
    asked: list[tuple[tuple[str, ...], int | None, int | None]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def series_many(
        self,
        run: str,
        fields: Sequence[str],
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Mapping[str, Points]:
        if fields:
            self.asked.append((tuple(fields), start, end))
        return self.inner.series_many(run, fields, start, end, max_points)


def _store(steps: int) -> _Recording:
    xs = list(range(steps))
    values = [2.0 - 1e-4 * s + 0.01 * math.sin(s) for s in xs]
    return _Recording(MemoryHistory({"r": {"policy_entropy": (xs, values)}}))


@pytest.mark.parametrize(("steps", "window"), [(6000, 2000), (3000, 2000), (1500, 2000)])
def test_early_sketch_ends_before_the_window_it_precedes(
    builtin: registry.Registry, steps: int, window: int
) -> None:
    store = _store(steps)
    reg = builtin
    early_end = reg.stages_for({}).early_end
    first = max(0, steps - window)
    (card,) = cards_for(reg, store, "r", ["policy_entropy"], "en", window)
    assert card["status"] != "no_data"
    sketches = [(s, e) for fields, s, e in store.asked if "policy_entropy" in fields]
    # always read beside the windows for the whole early stage; again, shorter, when the
    # window starts inside it (then the sketch must not overlap the window)
    assert sketches[0] == (0, early_end - 1)
    if 0 < first < early_end:
        assert sketches[1:] == [(0, first - 1)]
    else:
        assert sketches[1:] == []
