"""The forwarder: a background thread that sends unsent outbox rows to InfluxDB and marks them sent.

Rows are read in sequence order, grouped into one line per (measurement, tags, step) and written in
one request; they are marked sent (the store's watermark moved past them) only when the server
answered 2xx. The next batch is read and rendered while a request is in flight. While InfluxDB is
unreachable the forwarder waits with exponential backoff (memory stays two batches, whatever the
outage length).
It forwards every unsent row in the outbox file, including rows a killed process left behind.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..counts import RunCounters
from ..errors import OutboxError, WriteError
from ..schema import EVENTS, NO_RANK, PROJECT_TAG, RANK_TAG, RUN_TAG, PendingPoints, SampleRow
from ..store.outbox import ForwarderState, Outbox, PendingEvent, PendingSample, RejectKey
from .lineprotocol import (
    FieldValue,
    escape_field_key,
    format_line,
    join_lines,
    value_texts,
)
from .point_lines import render_points
from .rollup_worker import RollupWorker
from .rollups import InfluxRollups
from .writers import Writer

__all__ = ["Forwarder", "LineRenderer", "isolate_refused", "keyed_lines", "render_lines"]

_log = logging.getLogger(__name__)
_BACKOFF_START = 0.25
_BACKOFF_MAX = 30.0
_ISOLATE_AT_MOST = 32  # refused lines isolated one by one per batch
_OWED_RETRY = 2.0  # seconds between tries of rollups owed while nothing else is sent
_WARN_EVERY = 60.0  # seconds between warnings while InfluxDB goes on refusing
_NOTE_EVERY = 2.0  # seconds between notes of what the forwarder does (`Outbox.note_forwarder`)


def _tags(run: str, project: str | None, rank: int | None, **extra: str) -> dict[str, str | None]:
    tags: dict[str, str | None] = {RUN_TAG: run, PROJECT_TAG: project}
    if rank is not None:
        tags[RANK_TAG] = str(rank)
    tags.update({k: v for k, v in extra.items() if v})
    return tags


class LineRenderer:
    """Renders outbox rows as line protocol: one line per (measurement, tags, step), one per event.

    The escaped `measurement,tags` prefix of each series and the escaped field keys are cached
    (bounded), and a batch's floats are written by one call (`value_texts`), so a row costs a
    tuple unpack and a dict lookup or two.
    """

    _CACHE_LIMIT = 10_000

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, str, str | None, int, str], str] = {}
        self._keys: dict[str, str] = {}

    def prefix(self, measurement: str, run: str, project: str | None, rank: int, gpu: str) -> str:
        """The escaped `measurement,tags` part of a series' lines."""
        key = (measurement, run, project, rank, gpu)
        prefix = self._prefixes.get(key)
        if prefix is None:
            if len(self._prefixes) >= self._CACHE_LIMIT:
                self._prefixes.clear()
            tags = _tags(run, project, None if rank == NO_RANK else rank, gpu=gpu)
            line = format_line(measurement, tags, {"x": 0})
            assert line is not None
            prefix = self._prefixes[key] = line[: -len(" x=0i")]
        return prefix

    def key(self, field: str) -> str:
        """The escaped field key of `field`."""
        escaped = self._keys.get(field)
        if escaped is None:
            if len(self._keys) >= self._CACHE_LIMIT:
                self._keys.clear()
            escaped = self._keys[field] = escape_field_key(field)
        return escaped

    def render(
        self,
        rows: Iterable[SampleRow],
        events: Sequence[PendingEvent] = (),
        projects: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """Lines for outbox-shaped rows (`projects`: each run's project tag) and events."""
        project_of = (projects or {}).get
        rows = rows if isinstance(rows, list) else list(rows)
        texts = value_texts([row[6] for row in rows])
        # one point per (measurement, run, rank, gpu, step): its newest wall time and the text
        # of each field (a field given twice: the later one, as InfluxDB would keep it)
        points: dict[tuple[str, str, int, str, int], list[Any]] = {}
        for (run, rank, step, measurement, gpu, field, _, wall_time), text in zip(
            rows, texts, strict=True
        ):
            key = (measurement, run, rank, gpu, step)
            point = points.get(key)
            if point is None:
                points[key] = [wall_time, {field: text}]
            else:
                point[1][field] = text
                if wall_time > point[0]:
                    point[0] = wall_time
        lines: list[str] = []
        append = lines.append
        keys = self._keys
        prefixes = self._prefixes
        walls = value_texts([float(point[0]) for point in points.values()])
        for ((measurement, run, rank, gpu, step), (_, values)), wall in zip(
            points.items(), walls, strict=True
        ):
            # `step` and `wall_time` in their sorted places among the fields (as format_line),
            # over a field of that name
            values["step"] = f"{step}i"
            values["wall_time"] = wall
            parts = [
                f"{keys.get(name) or self.key(name)}={text}"
                for name in sorted(values)
                if (text := values[name]) is not None
            ]
            prefix = prefixes.get((measurement, run, project_of(run), rank, gpu))
            if prefix is None:
                prefix = self.prefix(measurement, run, project_of(run), rank, gpu)
            append(f"{prefix} {','.join(parts)} {step}")
        for e in events:
            ev_fields: dict[str, FieldValue] = dict(e.fields)
            ev_fields.update(text=e.text, step=e.step, wall_time=float(e.wall_time))
            line = format_line(
                EVENTS, _tags(e.run, e.project, e.rank, kind=e.kind), ev_fields, e.step
            )
            if line is not None:
                append(line)
        return lines


def render_lines(samples: Sequence[PendingSample], events: Sequence[PendingEvent]) -> list[str]:
    """Line protocol for a batch: one line per (measurement, tags, step), one per event."""
    rows: list[SampleRow] = [
        (
            s.run,
            NO_RANK if s.rank is None else s.rank,
            s.step,
            s.measurement,
            s.gpu,
            s.field,
            s.value,
            s.wall_time,
        )
        for s in samples
    ]
    return LineRenderer().render(rows, events, {s.run: s.project for s in samples})


def keyed_lines(
    renderer: LineRenderer,
    rows: Iterable[SampleRow],
    events: Sequence[PendingEvent],
    projects: Mapping[str, str | None],
) -> list[tuple[RejectKey, str]]:
    """The batch's lines each with the key of what it came from (for isolating a refused one;
    the same lines `render` gives, one call per point)."""
    points: dict[tuple[str, int, int, str, str], list[SampleRow]] = {}
    for row in rows:
        points.setdefault((row[0], row[1], row[2], row[3], row[4]), []).append(row)
    out: list[tuple[RejectKey, str]] = []
    for (run, rank, step, measurement, gpu), group in points.items():
        for line in renderer.render(group, (), projects):
            out.append((("sample", run, rank, step, measurement, gpu), line))
    for event in events:
        rank = NO_RANK if event.rank is None else event.rank
        for line in renderer.render((), [event]):
            out.append((("event", event.run, rank, event.step, event.kind, ""), line))
    return out


def isolate_refused(
    writer: Writer, lines: Sequence[tuple[RejectKey, str]]
) -> list[tuple[RejectKey, str, str]]:
    """After InfluxDB refused a batch (HTTP 400): send it again in halves until every refused
    line is alone, so the rest is written. Returns (key, line, server message) of each refused
    line. Re-sending is harmless: points are keyed by step. A retryable error (the server went
    away meanwhile) is raised and the caller retries the whole batch later."""
    refused: list[tuple[RejectKey, str, str]] = []
    todo: list[tuple[int, int]] = [(0, len(lines))]
    while todo:
        lo, hi = todo.pop()
        try:
            writer.write(join_lines(line for _, line in lines[lo:hi]))
        except WriteError as exc:
            if exc.retryable:
                raise
            if hi - lo == 1 or len(refused) >= _ISOLATE_AT_MOST:
                # past that many a server refusing everything would cost two requests a line
                refused += [(key, line, exc.detail) for key, line in lines[lo:hi]]
                continue
            mid = (lo + hi) // 2
            todo += [(mid, hi), (lo, mid)]
    return refused


class Forwarder:
    """Owns one writer and one outbox connection; `flush` waits until nothing is left to send."""

    def __init__(
        self,
        outbox_path: Path,
        writer: Writer,
        counters: RunCounters,
        *,
        batch_size: int = 5000,
        idle_wait: float = 1.0,
        rollups: InfluxRollups | None = None,
    ) -> None:
        self._path = outbox_path
        self._idle_wait = idle_wait
        self._writer = writer
        self._counters = counters
        self._batch = batch_size
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._empty_passes = 0
        self._failing = False
        self._renderer = LineRenderer()
        self._next: _Batch | None = None  # read while the batch before it was written
        self._caught_up = False  # the last batch sent was all there was to send
        self._rollups = rollups  # step rollups kept in InfluxDB beside the points sent
        # summed and written on a thread of their own (over the rollups' own connection), so the
        # next batch is read and sent meanwhile
        self._rolling = (
            None if rollups is None else RollupWorker(rollups, "rlvitals-forwarder-rollups")
        )
        # What this sender owes in rollups is recorded in the outbox with the rows it marks
        # sent (`Outbox.mark_ranges`), and forgotten once rolled up: a sender that dies, or
        # whose rollup write fails with nothing sent after it, leaves it for the next one,
        # which recomputes it from the raw points when it starts (`_settle_owed`).
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._recorded = False  # this sender has owed rollups recorded in the outbox
        self._inherited: list[tuple[str, str, int, int]] = []  # owed when it started
        self._retry_at = 0.0  # when owed rollups are next tried while nothing is sent
        # what it is doing, noted in the store (`_note`), and how long InfluxDB has refused
        self._state, self._detail = "sending", ""
        # what drain() concluded, once it has: the sending thread may still be refused (and
        # note "failing") after the drain gave up; the record it leaves must be the drain's
        self._concluded: tuple[str, str] | None = None
        self._started = time.time()
        self._failing_since: float | None = None
        self._warned_at = 0.0
        self._noted_at = 0.0
        self._noted_sent = 0
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
                if not self._failing:
                    # hurry a pass that sits in its idle wait; never a retry out of its backoff:
                    # woken every 0.1 s, a drain against an InfluxDB that refuses re-read and
                    # re-sent the whole backlog ten times a second for as long as it lasted
                    self._wake.set()
        if self._rolling is not None:  # and their rollups written (or owed, if they failed)
            return self._rolling.wait(max(0.0, deadline - time.monotonic()))
        return True

    def stop(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._rolling is not None:
            self._rolling.close(max(0.1, deadline - time.monotonic()))
        self._writer.close()

    def _open(self) -> Outbox | None:
        """The outbox, retrying until it opens; None when stopped first."""
        reported = False
        while True:
            try:
                return Outbox(self._path)
            except OutboxError as exc:  # keep trying: the store may come back
                if not reported:
                    reported = True
                    _log.error("rlvitals forwarder cannot open the outbox (retrying): %s", exc)
                if self._stop.wait(2.0):
                    return None

    def _loop(self) -> None:
        opened = self._open()
        if opened is None:
            return
        outbox = opened
        backoff = _BACKOFF_START
        if self._rollups is not None:
            self._inherited = outbox.rollups_owed()
        try:
            while not self._stop.is_set():
                try:
                    if self._inherited:
                        self._settle_owed(outbox)
                    sent = self._forward_once(outbox)
                except WriteError as exc:
                    with self._counters.lock:
                        self._counters.write_errors += 1
                    self._refused(outbox, exc)
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
                    self._failing_since = None
                    if self._concluded is None:
                        self._state, self._detail = "sending", ""
                    _log.warning(
                        "rlvitals: %s reachable again; forwarding", self._writer.describe()
                    )
                self._note(outbox)
                backoff = _BACKOFF_START
                if sent == 0 and outbox.vanished():
                    # the store was deleted or replaced: what the old file held is sent (an
                    # open file outlives its name); the run writes a new one, so read that
                    outbox.close()
                    opened = self._open()
                    if opened is None:
                        return
                    outbox = opened
                    continue
                if sent == 0 or self._caught_up:
                    # Nothing more to send now: what the run logs meanwhile goes in one request
                    # after the idle wait (a flush cuts it short), not one per commit of the
                    # worker, each a read, a render, two requests and a mark in the store.
                    self._roll_up_idle(outbox)
                    # the rows the watermark passed, marked while nothing waits (see
                    # `Outbox.settle_sent`): a busy forwarder never pays for it; twice what
                    # was sent, so the marking keeps up with a run that never pauses (left to
                    # pauses alone, the child's CPU was no lower beyond this machine's noise)
                    _safe(functools.partial(outbox.settle_sent, max(10_000, 2 * sent)), 0)
                    if sent == 0:
                        with self._cond:
                            self._empty_passes += 1
                            self._cond.notify_all()
                    self._wake.wait(self._idle_wait)
                    self._wake.clear()
        finally:
            if self._concluded is not None:
                self._state, self._detail = self._concluded
            elif self._state == "sending":
                self._state = "stopped"
            self._note(outbox, force=True)
            outbox.close()

    def drain(self, timeout: float) -> bool:
        """The training process exited: send what the store still holds, for at most
        `timeout` seconds; what was done (and what is left) is recorded in the store for
        `rlvitals runs`. True when nothing is left."""
        self._state, self._detail = "draining", f"for up to {timeout:.0f} s"
        ok = self.flush(timeout)
        if ok:
            self._concluded = ("drained", "everything the store held is sent")
        else:
            self._concluded = (
                "stopped",
                f"the drain time ({timeout:.0f} s, RLVITALS_DRAIN_TIMEOUT) ran out; what is left "
                "waits in the store for the next run with InfluxDB configured",
            )
            _log.warning("rlvitals forwarder: %s", self._concluded[1])
        self._state, self._detail = self._concluded
        return ok

    def _refused(self, outbox: Outbox, exc: WriteError) -> None:
        """InfluxDB did not take a batch: say so at once, and again every `_WARN_EVERY`
        seconds while it goes on, with what waits (a full disk on InfluxDB's side refuses for
        as long as nobody acts)."""
        now = time.monotonic()
        if self._concluded is None:
            self._state, self._detail = "failing", str(exc)
        if not self._failing:
            self._failing = True
            self._failing_since = now
            self._warned_at = now
            _log.warning("rlvitals: %s; samples stay in the outbox and are retried", exc)
        elif now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            waiting, oldest = _safe(outbox.backlog, 0), _safe(outbox.backlog_oldest, None)
            age = "" if oldest is None else f", the oldest logged {time.time() - oldest:.0f} s ago"
            _log.warning(
                "rlvitals: InfluxDB has refused writes for %.0f s (%s); %d row(s) wait in the "
                "outbox%s; still retrying",
                now - (self._failing_since or now),
                exc,
                waiting,
                age,
            )
        self._note(outbox)

    def _note(self, outbox: Outbox, *, force: bool = False) -> None:
        """Record in the store what this forwarder is doing, every `_NOTE_EVERY` seconds (for
        `rlvitals runs`, and for whoever looks after the training process exited)."""
        now = time.monotonic()
        if not force and now - self._noted_at < _NOTE_EVERY:
            return
        with self._counters.lock:
            sent = self._counters.sent + self._counters.server_rejected
        rate = None
        if self._noted_at:
            rate = max(0.0, (sent - self._noted_sent) / max(1e-6, now - self._noted_at))
        self._noted_at, self._noted_sent = now, sent
        with contextlib.suppress(Exception):  # a note must never stop the sending
            outbox.note_forwarder(
                ForwarderState(
                    owner=self._owner,
                    pid=os.getpid(),
                    host=socket.gethostname(),
                    started=self._started,
                    updated=time.time(),
                    state=self._state,
                    detail=self._detail,
                    sent=sent,
                    rate=rate,
                    backlog=outbox.backlog(),
                    oldest=outbox.backlog_oldest(),
                )
            )

    def _settle_owed(self, outbox: Outbox) -> None:
        """Recompute from the raw points the rollups the outbox says a sender still owed when
        this one started (a trainer that exited before its rollup write was retried), then
        forget them. Failing, they are tried again at the next pass."""
        assert self._rollups is not None
        if time.monotonic() < self._retry_at or (self._rolling and not self._rolling.idle):
            return  # (the rollups' thread is idle: one thread uses them at a time)
        done = []
        try:
            for run, owner, lo, hi in self._inherited:
                self._rollups.recompute(run, lo, hi)
                done.append((run, owner, lo, hi))
        except Exception as exc:
            self._retry_at = time.monotonic() + _OWED_RETRY
            _log.warning(
                "rlvitals: rollups owed for steps sent earlier not recomputed yet (%s: %s); "
                "tried again in %.0f s",
                type(exc).__name__,
                exc,
                _OWED_RETRY,
            )
        outbox.settle_rollups(done)
        self._inherited = [o for o in self._inherited if o not in done]
        if not self._inherited:
            _log.info("rlvitals: rollups owed for %d run(s) recomputed", len(done))

    def _roll_up_idle(self, outbox: Outbox) -> None:
        """With nothing to send: retry what a failed rollup call left (at most every
        `_OWED_RETRY` seconds), and once nothing is owed forget this sender's record."""
        rollups, rolling = self._rollups, self._rolling
        if rollups is None or rolling is None or not rolling.idle:
            return
        if rollups.owes and time.monotonic() >= self._retry_at:
            self._retry_at = time.monotonic() + _OWED_RETRY
            rolling.sent([], {}, exact=True)
            return
        if self._recorded and not rollups.owes:
            outbox.mark_ranges(None, None, owner=self._owner, settled=True)
            self._recorded = False

    def _forward_once(self, outbox: Outbox) -> int:
        """Send one batch of what is unsent; the rows and events sent (0: nothing was unsent).

        While InfluxDB takes the batch, the next one is read and rendered (the request waits
        on the server, which runs on another core; reading is this process's CPU): it is sent
        by the next call, or dropped if this write fails (it is read again from the store)."""
        batch, self._next = self._next, None
        if batch is None:
            batch = self._read(outbox)
        if batch is None:
            return 0
        self._caught_up = not self._full(batch)
        written = _send_in_background(self._writer, batch.body)
        after = None
        if not self._caught_up:  # (a batch short of full read everything there was)
            try:
                after = self._read(outbox, after=batch)
            except Exception as exc:  # a failed read ahead is read again next pass
                _log.debug("rlvitals forwarder: reading ahead failed (%s)", exc)
        try:
            written()
        except WriteError as exc:
            if exc.retryable:
                raise
            refused = self._isolate(exc, batch)
        else:
            refused = []
        count = self._done(outbox, batch, refused)
        self._next = after
        return count

    def _full(self, batch: _Batch) -> bool:
        """Whether a batch took all the rows (or events) one read may take: more may wait."""
        points = len(batch.points) if batch.points is not None else 0
        return points >= self._batch or len(batch.events) >= max(1, self._batch // 10)

    def _read(self, outbox: Outbox, after: _Batch | None = None) -> _Batch | None:
        """The next batch of unsent rows and events, rendered (`after`: past a batch not yet
        marked sent)."""
        past_rows = past_events = None
        if after is not None:
            past_rows = after.sample_range[1] if after.sample_range else after.rows_after
            past_events = after.event_range[1] if after.event_range else after.events_after
        points = outbox.pending_points(self._batch, after=past_rows)
        events = outbox.pending_events(max(1, self._batch // 10), after=past_events)
        if not points and not events:  # (no points: None, or a deleted run's, left unnamed)
            return None
        sample_range = points.seq_range if points is not None else None
        event_range = (events[0].seq, events[-1].seq) if events else None
        projects = outbox.projects() if points else {}
        lines = [render_points(self._renderer, points, projects)] if points else []
        body = join_lines(lines + self._renderer.render((), events))
        return _Batch(
            points,
            events,
            projects,
            body,
            sample_range,
            event_range,
            past_rows,
            past_events,
        )

    def _isolate(self, exc: WriteError, batch: _Batch) -> list[tuple[RejectKey, str, str]]:
        """InfluxDB refused the batch (HTTP 400): the lines it refuses, the rest written."""
        with self._counters.lock:
            self._counters.write_errors += 1
        keyed = keyed_lines(self._renderer, batch.rows, batch.events, batch.projects)
        refused = isolate_refused(self._writer, keyed)
        _log.error(
            "rlvitals: %s; %d line(s) of %d refused and kept in the outbox's `rejected` "
            "table with the server's message, the rest written",
            exc,
            len(refused),
            len(keyed),
        )
        return refused

    def _done(
        self, outbox: Outbox, batch: _Batch, refused: list[tuple[RejectKey, str, str]]
    ) -> int:
        """Mark a written batch sent (its rollups owed with it), hand it to the rollups."""
        points, events = batch.points, batch.events
        count = (len(points) if points is not None else 0) + len(events)
        owed = _spans(points) if self._rollups is not None and points else []
        settled = (
            self._recorded
            and self._rollups is not None
            and self._rolling is not None
            and self._rolling.idle
            and not self._rollups.owes
        )
        outbox.mark_ranges(
            batch.sample_range,
            batch.event_range,
            state=1,
            owed=owed,
            owner=self._owner,
            settled=settled,
        )
        self._recorded = bool(owed) or (self._recorded and not settled)
        lost = 0
        if refused:
            outbox.reject(refused, batch.sample_range, batch.event_range)
            lost = sum(_rows_of(key, batch.rows, events) for key, _, _ in refused)
        if self._rolling is not None and points:
            self._rolling.sent([points], batch.projects, exact=not refused)
        with self._counters.lock:
            self._counters.sent += count - lost
            self._counters.server_rejected += lost
            self._counters.last_write = time.time()
        return count


@dataclass(frozen=True)
class _Batch:
    """Points and events read to be sent together, and their rendering."""

    points: PendingPoints | None
    events: list[PendingEvent]
    projects: Mapping[str, str | None]
    body: bytes
    sample_range: tuple[int, int] | None
    event_range: tuple[int, int] | None
    # what it was read past (a batch read while the one before it was written): the next batch
    # read ahead of it starts there too when it holds no rows (or no events)
    rows_after: int | None = None
    events_after: int | None = None

    @property
    def rows(self) -> list[SampleRow]:
        """The points as rows (to find the rows of a line InfluxDB refused)."""
        return [] if self.points is None else self.points.rows


def _send_in_background(writer: Writer, body: bytes) -> Callable[[], None]:
    """Start writing `body` on a thread of its own; the returned call waits for the write and
    raises what it raised. A daemon thread: a write in flight never holds up the exit (its rows
    are not marked sent, so they are sent again)."""
    failed: list[BaseException] = []

    def send() -> None:
        try:
            writer.write(body)
        except BaseException as exc:  # handed to the waiting caller
            failed.append(exc)

    thread = threading.Thread(target=send, name="rlvitals-forwarder-send", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failed:
            raise failed[0]

    return wait


def _safe(read: Any, default: Any) -> Any:
    try:
        return read()
    except Exception:
        return default


def _spans(points: PendingPoints) -> list[tuple[str, int, int]]:
    """(run, first step, last step) of each run's points in a batch."""
    spans: dict[str, tuple[int, int]] = {}
    fields, _, steps = points.numbers
    for number in np.unique(fields).tolist():
        run = points.fields[number][0]
        of_field = steps[fields == number]
        lo, hi = int(of_field.min()), int(of_field.max())
        known = spans.get(run)
        spans[run] = (lo, hi) if known is None else (min(known[0], lo), max(known[1], hi))
    return [(run, lo, hi) for run, (lo, hi) in spans.items()]


def _rows_of(key: RejectKey, rows: Sequence[SampleRow], events: Sequence[PendingEvent]) -> int:
    """How many rows of the batch a refused line stood for."""
    if key[0] == "event":
        return 1
    _, run, rank, step, measurement, gpu = key
    return sum(
        1 for r in rows if (r[0], r[1], r[2], r[3], r[4]) == (run, rank, step, measurement, gpu)
    )
