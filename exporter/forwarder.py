"""The forwarder: a background thread that sends unsent outbox rows to InfluxDB and marks them sent.

Rows are read in sequence order, grouped into one line per (measurement, tags, step) and written in
one request; they are marked sent only when the server answered 2xx. While InfluxDB is unreachable
the forwarder waits with exponential backoff (memory stays one batch, whatever the outage length).
It forwards every unsent row in the outbox file, including rows a killed process left behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import OutboxError, WriteError
from .lineprotocol import FieldValue, format_line, join_lines
from .outbox import Outbox, PendingEvent, PendingSample
from .stats import RunCounters
from .writers import Writer

__all__ = ["Forwarder", "render_lines"]

_log = logging.getLogger(__name__)
_BACKOFF_START = 0.25
_BACKOFF_MAX = 30.0


def _tags(run: str, project: str | None, rank: int | None, **extra: str) -> dict[str, str | None]:
    tags: dict[str, str | None] = {"run": run, "project": project}
    if rank is not None:
        tags["rank"] = str(rank)
    tags.update({k: v for k, v in extra.items() if v})
    return tags


def render_lines(samples: Sequence[PendingSample], events: Sequence[PendingEvent]) -> list[str]:
    """Line protocol for a batch: one line per (measurement, tags, step), one per event."""
    points: dict[tuple[str, str, str | None, int | None, str, int], dict[str, FieldValue]] = {}
    for s in samples:
        key = (s.measurement, s.run, s.project, s.rank, s.gpu, s.step)
        fields = points.get(key)
        if fields is None:
            fields = points[key] = {"step": s.step, "wall_time": float(s.wall_time)}
        fields[s.field] = s.value
        fields["wall_time"] = max(float(s.wall_time), float(fields["wall_time"]))
    lines: list[str] = []
    for (measurement, run, project, rank, gpu, step), fields in points.items():
        line = format_line(measurement, _tags(run, project, rank, gpu=gpu), fields, step)
        if line is not None:
            lines.append(line)
    for e in events:
        ev_fields: dict[str, FieldValue] = dict(e.fields)
        ev_fields.update(text=e.text, step=e.step, wall_time=float(e.wall_time))
        line = format_line(
            "events", _tags(e.run, e.project, e.rank, kind=e.kind), ev_fields, e.step
        )
        if line is not None:
            lines.append(line)
    return lines


class Forwarder:
    """Owns one writer and one outbox connection; `flush` waits until nothing is left to send."""

    def __init__(
        self, outbox_path: Path, writer: Writer, counters: RunCounters, *, batch_size: int = 5000
    ) -> None:
        self._path = outbox_path
        self._writer = writer
        self._counters = counters
        self._batch = batch_size
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._empty_passes = 0
        self._failing = False
        self._thread = threading.Thread(target=self._loop, name="rlvitals-forwarder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def flush(self, timeout: float) -> bool:
        """Wait until a pass of the forwarder found nothing unsent; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            # +2: the pass running now may have read the outbox before our rows were committed.
            target = self._empty_passes + 2
        self._wake.set()
        with self._cond:
            while self._empty_passes < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(remaining, 0.1))
                self._wake.set()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._writer.close()

    def _loop(self) -> None:
        try:
            outbox = Outbox(self._path)
        except OutboxError as exc:
            _log.error("rlvitals forwarder cannot start: %s", exc)
            return
        backoff = _BACKOFF_START
        try:
            while not self._stop.is_set():
                try:
                    sent = self._forward_once(outbox)
                except WriteError as exc:
                    with self._counters.lock:
                        self._counters.write_errors += 1
                    if not self._failing:
                        self._failing = True
                        _log.warning(
                            "rlvitals: %s; samples stay in the outbox and are retried", exc
                        )
                    self._wake.wait(backoff)
                    self._wake.clear()
                    backoff = min(backoff * 2, _BACKOFF_MAX)
                    continue
                except Exception as exc:  # never let the thread die silently
                    _log.exception("rlvitals forwarder error: %s", exc)
                    self._wake.wait(backoff)
                    self._wake.clear()
                    backoff = min(backoff * 2, _BACKOFF_MAX)
                    continue
                if self._failing:
                    self._failing = False
                    _log.warning(
                        "rlvitals: %s reachable again; forwarding", self._writer.describe()
                    )
                backoff = _BACKOFF_START
                if sent == 0:
                    with self._cond:
                        self._empty_passes += 1
                        self._cond.notify_all()
                    self._wake.wait(1.0)
                    self._wake.clear()
        finally:
            outbox.close()

    def _forward_once(self, outbox: Outbox) -> int:
        samples = outbox.pending_samples(self._batch)
        events = outbox.pending_events(max(1, self._batch // 10))
        if not samples and not events:
            return 0
        body = join_lines(render_lines(samples, events))
        try:
            self._writer.write(body)
        except WriteError as exc:
            if exc.retryable:
                raise
            with self._counters.lock:
                self._counters.write_errors += 1
            _log.error("rlvitals: %s", exc)
            outbox.mark(samples, events, state=2)
            return len(samples) + len(events)
        outbox.mark(samples, events, state=1)
        with self._counters.lock:
            self._counters.sent += len(samples) + len(events)
            self._counters.last_write = time.time()
        return len(samples) + len(events)
