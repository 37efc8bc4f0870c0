"""The stages of the runs asked about lately, kept while a run's newest step stays the same.

Every chart of a run that shades a band asks the run's stages (`cards.stages_of_run`), which
reads what the run's cards read to measure its cadence: a page of thirty charts would read it
thirty times per refresh, each a wait on the store while an import shares the process. The answer
changes only when the run logs a new step, so it is kept per (run, newest step, its wall time).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import registry

from .history import HistoryStore

__all__ = ["StageMemo"]


class StageMemo:
    """At most `size` runs' stages, the least recently asked dropped first."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], registry.Stages] = OrderedDict()

    def stages(
        self, store: HistoryStore, run: str, compute: Callable[[], registry.Stages]
    ) -> registry.Stages:
        latest = store.latest(run)
        key = (store.kind, run, latest.step, latest.wall_time)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        found = compute()
        with self._lock:
            self._kept[key] = found
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return found
