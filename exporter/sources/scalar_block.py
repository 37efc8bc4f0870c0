"""Consecutive steps of a log as columns: what a batch of one-scalar TensorBoard events decodes to.

A `ScalarBlock` stands for the Records of its steps (`records()` gives them, exactly as the
source would have yielded them one by one) without building a dict per step: the direct import
translates and renders it a column at a time (`exporter/translate/blocks.py`), and a run takes it
whole (`Run.log_block`) and stores it as columns. Every step of a
block is complete (no later event can add to it) and its events are in file order.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..schema import SourcePosition
from .record import Record, add_value

__all__ = ["ScalarBlock", "blocks_of"]

BLOCK_STEPS = 2048
"""Steps gathered into one block by `blocks_of` (about one worker batch)."""


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
    part: int = 0
    """Which training of its log the steps belong to (`Record.part`)."""

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
        return Record(
            step=int(self.steps[i]), values=values, wall_time=wall or None, part=self.part
        )

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
            self.part,
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
        part: int = 0,
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
        return ScalarBlock(names, steps, walls, starts, tag, value, simple, position, part)


def blocks_of(items: Iterable[object], size: int = BLOCK_STEPS) -> Iterator[object]:
    """A text log's Records gathered into `ScalarBlock`s of up to `size` steps, in order; any
    other item (a read position, an end mark) passes through after the steps read before it.
    A step not after the one before it (a run resumed in the same file, printing earlier steps
    again) starts a new block: a block's steps only grow, and the later value of a step is
    stored last; so does a later training of the log (`Record.part`). A step the log gives no
    wall time is given the time it was read, as a Record logged one at a time is (`Run.log`
    takes the time of the call)."""
    names: list[str] = []
    index: dict[str, int] = {}
    steps: list[int] = []
    walls: list[float] = []
    starts: list[int] = [0]
    tags: list[int] = []
    values: list[float] = []
    layouts: dict[tuple[str, ...], list[int]] = {}  # a step's names -> their slots in `names`
    part = [0]  # the training of the log the block's steps belong to

    def block() -> ScalarBlock:
        return ScalarBlock.build(
            list(names),
            np.asarray(steps, dtype=np.int64),
            np.asarray(walls, dtype=np.float64),
            np.asarray(starts, dtype=np.int64),
            np.asarray(tags, dtype=np.int64),
            np.asarray(values, dtype=np.float64),
            part=part[0],
        )

    def reset() -> None:
        names.clear()
        index.clear()
        layouts.clear()
        steps.clear()
        walls.clear()
        starts[:] = [0]
        tags.clear()
        values.clear()

    for item in items:
        if not isinstance(item, Record):
            if steps:
                yield block()
                reset()
            yield item
            continue
        if steps and (item.step <= steps[-1] or len(steps) >= size or item.part != part[0]):
            yield block()
            reset()
        part[0] = item.part
        row = item.values
        keys = tuple(row)
        slots = layouts.get(keys)
        # the names of a step seen before (most steps): no lookups; unless a name holds several
        # values here (CleanRL's returns of envs that finished together) where it held one
        if slots is not None and list not in map(type, row.values()):
            tags.extend(slots)
            values.extend(row.values())  # type: ignore[arg-type]
        else:
            for name, value in row.items():
                for one in value if isinstance(value, list) else (value,):
                    slot = index.get(name)
                    if slot is None:
                        slot = index[name] = len(names)
                        names.append(name)
                    tags.append(slot)
                    values.append(float(one))
            if not any(isinstance(v, list) for v in row.values()):
                layouts[keys] = [index[name] for name in keys]
        steps.append(item.step)
        walls.append(item.wall_time or time.time())
        starts.append(len(tags))
    if steps:
        yield block()
