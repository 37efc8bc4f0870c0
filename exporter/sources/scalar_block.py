"""Consecutive steps of a log as columns: what a batch of one-scalar TensorBoard events decodes to.

A `ScalarBlock` stands for the Records of its steps (`records()` gives them, exactly as the
source would have yielded them one by one) without building a dict per step: the direct import
translates and renders it a column at a time (`exporter/translate/blocks.py`), and a run takes it
whole (`Run.log_block`) and stores it as columns. Every step of a
block is complete (no later event can add to it) and its events are in file order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..schema import SourcePosition
from .record import Record, add_value

__all__ = ["ScalarBlock"]


@dataclass(frozen=True)
class ScalarBlock:
    """Steps `steps[i]`, each with the events `starts[i]:starts[i + 1]` of `tag` / `value`.

    `names[tag[j]]` is event j's name; `walls[i]` the wall time of step i's last event (0 when
    the log gave none); `simple[i]` is False when step i names a tag twice (several values at
    one step, which a Record holds as a list).
    """

    names: list[str]
    steps: npt.NDArray[np.int64]
    walls: npt.NDArray[np.float64]
    starts: npt.NDArray[np.int64]
    tag: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]
    simple: npt.NDArray[np.bool_]
    position: SourcePosition | None = None
    """Where a reader of the file stands once these steps are read (the step after them
    begins there), when the source knows it: saved with them, a reader killed later goes on
    from there."""

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def value_count(self) -> int:
        return int(self.starts[-1] - self.starts[0])

    def record(self, i: int) -> Record:
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        values: dict[str, float | list[float]] = {}
        names = self.names
        for t, v in zip(self.tag[a:b].tolist(), self.value[a:b].tolist(), strict=True):
            add_value(values, names[t], v)
        wall = float(self.walls[i])
        return Record(step=int(self.steps[i]), values=values, wall_time=wall or None)

    def records(self) -> Iterator[Record]:
        for i in range(len(self.steps)):
            yield self.record(i)

    def slice(self, lo: int, hi: int) -> ScalarBlock:
        """Steps lo..hi-1 as a block of their own."""
        return ScalarBlock(
            self.names,
            self.steps[lo:hi],
            self.walls[lo:hi],
            self.starts[lo : hi + 1],
            self.tag,
            self.value,
            self.simple[lo:hi],
            self.position if hi == len(self.steps) else None,
        )

    @staticmethod
    def build(
        names: list[str],
        steps: npt.NDArray[np.int64],
        walls: npt.NDArray[np.float64],
        starts: npt.NDArray[np.int64],
        tag: npt.NDArray[np.int64],
        value: npt.NDArray[np.float64],
        position: SourcePosition | None = None,
    ) -> ScalarBlock:
        """A block whose `simple` flags are computed from the events."""
        count = len(steps)
        lengths = np.diff(starts)
        owner = np.repeat(np.arange(count, dtype=np.int64), lengths)
        events = tag[int(starts[0]) : int(starts[-1])]
        names_count = int(events.max(initial=0)) + 1
        key = owner * names_count + events
        simple = np.ones(count, dtype=np.bool_)
        if count * names_count <= 1 << 24:  # a count per (step, name): linear, no sort
            twice = np.flatnonzero(np.bincount(key, minlength=count * names_count) > 1)
            simple[twice // names_count] = False
        else:
            ordered = np.sort(key)
            repeated = owner[np.argsort(key, kind="stable")][1:][ordered[1:] == ordered[:-1]]
            simple[repeated] = False
        return ScalarBlock(names, steps, walls, starts, tag, value, simple, position)
