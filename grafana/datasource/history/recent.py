"""Answers kept for a moment: one card request asks for the run list a dozen times, and it does
not change within a second that matters (a run listed a second late is shown a second later)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["Recent"]

_LIMIT = 1000


class Recent:
    """Values computed at most once per `ttl` seconds per key; thread-safe."""

    def __init__(self, ttl: float = 1.0) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._kept: dict[Hashable, tuple[float, Any]] = {}

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self._ttl:
            return kept[1]
        value = compute()
        with self._lock:
            if len(self._kept) >= _LIMIT:
                self._kept.clear()
            self._kept[key] = (now, value)
        return value
