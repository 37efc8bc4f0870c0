"""What a run has counted so far, as frozen snapshots for callers and the /metrics endpoint."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lifecycle import Status

__all__ = ["LiveState", "RunCounters", "RunStats"]


@dataclass(frozen=True)
class RunStats:
    """Counts of samples by outcome.

    accepted: stored under a registry id; rejected: refused for bad input (bad step, non-numeric
    value, outside physical limits, unknown name under `drop`); nonfinite: NaN/Inf per field
    (never written); unregistered: unknown names stored under `unregistered` (`warn`);
    dropped: lost because the queue was full, the run was finished or the store could not take
    them, by reason in `dropped_by_reason` (queue_full, finished, translate_error, store_error,
    worker_error, store_lost: stored in an outbox file that was then deleted or replaced);
    refused_disk: refused because the outbox reached its disk budget or the disk is full; write_errors: failed
    InfluxDB writes (retried unless the server refused the data); sent: rows written to InfluxDB;
    server_rejected: rows whose line InfluxDB refused (HTTP 400), kept in the outbox's `rejected`
    table with the server's message while the rest of their batch was written.
    """

    accepted: int = 0
    rejected: int = 0
    nonfinite: Mapping[str, int] = field(default_factory=dict)
    unregistered: int = 0
    dropped: int = 0
    refused_disk: int = 0
    events: int = 0
    write_errors: int = 0
    sent: int = 0
    server_rejected: int = 0
    dropped_by_reason: Mapping[str, int] = field(default_factory=dict)

    @property
    def nonfinite_total(self) -> int:
        return sum(self.nonfinite.values())


@dataclass(frozen=True)
class LiveState:
    """A run's state for Prometheus: latest values, current step, health of the pipeline."""

    run: str
    step: int | None
    steps_per_second: float | None
    latest: Mapping[tuple[str, str], float]
    """(field, gpu) -> latest value; gpu is '' for metrics without a gpu label."""
    stats: RunStats
    backlog: int
    """Rows of the store not yet sent to InfluxDB (0 without InfluxDB)."""
    queue_depth: int
    last_write_age: float | None
    last_activity: float | None = None
    """Wall time of the latest step logged (the training's clock when the source gives one)."""
    finished: bool = False
    """The run was finished (`Run.finish()`, or the sidecar ended it): see `Lifecycle`."""
    status: Status | None = None
    """The run's status as its writer sees it (`Lifecycle`), with the reason."""
    writer: bool = False
    """Served by the process that writes the run (a trainer logging through `exporter.init`),
    not by a reader of its logs: when this process stops answering, the writer is gone."""
    backlog_oldest_age: float | None = None
    """Seconds since the oldest row not yet sent was logged (None: nothing waits)."""
    forward_rate: float | None = None
    """Rows/s the forwarder sent lately (None without InfluxDB, or not measured yet)."""


class RunCounters:
    """Mutable counters shared by the caller, worker and forwarder threads of one run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted = 0
        self.rejected = 0
        self.nonfinite: dict[str, int] = {}
        self.unregistered = 0
        self.dropped = 0
        self.dropped_reasons: dict[str, int] = {}
        self.refused_disk = 0
        self.events = 0
        self.write_errors = 0
        self.sent = 0
        self.server_rejected = 0
        self.step: int | None = None
        self.latest: dict[tuple[str, str], float] = {}
        self.rate_window: deque[tuple[float, int]] = deque(maxlen=64)
        self.last_write: float | None = None

    def snapshot(self) -> RunStats:
        with self.lock:
            return RunStats(
                accepted=self.accepted,
                rejected=self.rejected,
                nonfinite=dict(self.nonfinite),
                unregistered=self.unregistered,
                dropped=self.dropped,
                refused_disk=self.refused_disk,
                events=self.events,
                write_errors=self.write_errors,
                sent=self.sent,
                server_rejected=self.server_rejected,
                dropped_by_reason=dict(self.dropped_reasons),
            )

    def drop(self, reason: str, n: int) -> None:
        """Count `n` samples or events lost for `reason` (call without holding the lock)."""
        if n <= 0:
            return
        with self.lock:
            self.dropped += n
            self.dropped_reasons[reason] = self.dropped_reasons.get(reason, 0) + n

    def undrop(self, reason: str, n: int) -> None:
        """Take back `n` counted lost for `reason` that were stored (or counted) after all."""
        if n <= 0:
            return
        with self.lock:
            self.dropped -= n
            left = self.dropped_reasons.get(reason, 0) - n
            if left > 0:
                self.dropped_reasons[reason] = left
            else:
                self.dropped_reasons.pop(reason, None)

    def steps_per_second(self, now: float | None = None) -> float | None:
        """Steps per second over the last logged steps, measured up to `now` when given: a run
        that stopped logging decays towards 0 instead of showing its last rate for ever, and a
        log imported long after it was written (its steps carry the training's wall times)
        reads as idle, not as the import's speed."""
        with self.lock:
            if len(self.rate_window) < 2:
                return None
            (t0, s0), (t1, s1) = self.rate_window[0], self.rate_window[-1]
        if t1 <= t0 or s1 < s0:
            return None
        end = t1 if now is None else max(t1, now)
        return (s1 - s0) / (end - t0)
