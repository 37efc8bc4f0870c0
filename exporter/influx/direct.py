"""`rlvitals import` straight to InfluxDB: the log file is the durable copy, so samples skip the outbox.

The exporter's contract is that a sample is stored durably before anything else happens to it, so
a crash or an InfluxDB outage loses nothing. For samples logged by a training process the outbox is
that durable store. For an import with InfluxDB configured, the log file being imported already is
one: it is on disk before the import starts and stays there, and every write is keyed by
(run, tags, step), so importing it again rewrites the same points. Copying every sample into the
outbox first would only double the disk work (it is most of an import's time), so `DirectRun`
translates records on the reader's thread (the same `Translator`, so names, transforms, policies,
non-finite handling and `resume` events are the same), renders each batch there too
(`StepRenderer`), and a sender thread POSTs it while the next batch is read; the batch's InfluxDB
rollups are then kept by a thread of their own (`RollupWorker`), over a connection of their own. What does go to the outbox:

- the run (`runs` table), its last step (`run_progress`) and how far each file was read
  (`source_positions`), written only after everything read before them was accepted and rolled
  up, so a later `rlvitals tail`, `rlvitals import --resume` or the same import run again after
  it was killed goes on from there (and writes again whatever was not rolled up);
- the lines InfluxDB refuses (HTTP 400), with the server's message (`rejected` table): the batch
  is sent again in halves until each refused line is alone, so the rest of it is written.

An unreachable InfluxDB is retried for `settings.outage_wait` seconds; then the import stops
(`failure`, exit 1) without parking anything in the outbox: parked rows sent later would
overwrite whatever was written for those steps meanwhile. The read positions are not saved past
what InfluxDB took, so running the same import again completes it.

Without InfluxDB configured imports always go through the outbox (it is then the embedded store).
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from registry import Registry

from ..config import ExporterSettings, Policy
from ..counts import RunCounters, RunStats
from ..errors import OutboxError, WriteError
from ..lease import this_process
from ..lifecycle import Lifecycle
from ..schema import NO_RANK, EventRow, SampleRow, SourcePosition
from ..sources.scalar_block import ScalarBlock
from ..store.outbox import Outbox, PendingEvent
from ..translate.blocks import BlockTranslator, FastSteps
from ..translate.derive import StepDeriver
from ..translate.steps import LoggedValue, config_rows
from .block_lines import BlockRenderer
from .forwarder import LineRenderer, isolate_refused, keyed_lines
from .lineprotocol import join_lines
from .rollup_worker import RollupWorker
from .rollups import SentColumns, SentPart, make_rollups, rollups_wanted
from .step_lines import StepRenderer
from .writers import Writer, make_writer

__all__ = ["DIRECT_BATCH", "DirectRun"]

_log = logging.getLogger("exporter")

DIRECT_BATCH = 10_000
"""Samples per request at least (the settings' batch size when larger)."""
_FIRST_BATCH = 1000
_IN_FLIGHT = 2  # batches queued for the sender: bounds memory, keeps reading and writing overlapped


class DirectRun:
    """One imported run written straight to InfluxDB; same `log`/`flush`/`finish` as a Run."""

    def __init__(
        self,
        name: str,
        *,
        project: str | None,
        registry: Registry,
        settings: ExporterSettings,
        framework: str | None,
        policy: Policy | None = None,
        resume: bool = False,
        config: Mapping[str, Any] | None = None,
        lease_kind: str = "import",
        lifecycle: Lifecycle | None = None,
    ) -> None:
        writer = make_writer(settings)
        if writer is None:
            raise ValueError("DirectRun needs InfluxDB configured (RLVITALS_INFLUX_URL)")
        self.name = name
        self.project = project
        self.settings = settings
        self._writer: Writer = writer
        # rollups go over their own connection, from their own thread (see rollup_worker)
        rollup_writer = make_writer(settings) if rollups_wanted(settings) else None
        rollups = None if rollup_writer is None else make_rollups(settings, rollup_writer)
        self._rollup_writer = rollup_writer
        self._rollups = (
            None if rollups is None else RollupWorker(rollups, f"rlvitals-rollups-{name}")
        )
        self._counters = RunCounters()
        self._outbox = Outbox(settings.outbox_path, budget_bytes=settings.disk_budget_bytes)
        self._lifecycle = lifecycle or settings.lifecycle
        self._holder = this_process()
        # `name-2` if taken; the writer lease says an import is under way until it ends
        claim = self._outbox.claim(
            name,
            resume=resume,
            holder=self._holder,
            kind=lease_kind,
            lease_ttl_s=self._lifecycle.lease_ttl_s,
        )
        self.name = name = claim.name
        self.resumed = claim.resumed
        self._renew_at = time.monotonic() + self._lifecycle.renew_every_s
        # the run config (what `import` read from the logs and --config/--set) is kept with the
        # run in the local store, where diagnosis reads it
        self._outbox.upsert_run(
            name, project, dict(config) if config else None, framework, time.time()
        )
        self._wall_time: float | None = None  # of the latest step read: the run's last activity
        self._translator = BlockTranslator(
            registry,
            self._counters,
            run=name,
            rank=None,
            policy=policy or settings.policy,
            framework=framework,
            last_step=self._outbox.last_step(name),
            config=config,
            transforms=self._outbox.transforms(name),
            defer_counts=True,
        )
        self._saved_step = self._translator.last_step
        self._renderer = LineRenderer()
        self._step_renderer = StepRenderer(self._renderer, project)
        # the lines of the next batch so far, in order: the step renderer's, taken whenever
        # a block's lines come; None once a part could not be rendered (the sender renders
        # the batch's rows with `LineRenderer` then)
        self._texts: list[str] | None = []
        self._block_renderer = BlockRenderer(self._renderer, project)
        self._batch_size = max(settings.batch_size, DIRECT_BATCH)
        # The first requests are small, so InfluxDB has work while the next batch is read.
        self._next_batch = min(self._batch_size, _FIRST_BATCH)
        # what was logged since the last hand-over, in order: rows of `Translator.log` calls
        # and steps translated as columns (`FastSteps`); `_count` samples in all
        self._parts: list[_Part] = []
        self._count = 0
        self._events: list[EventRow] = []

        # read positions with the step and wall time the run was at when each was given:
        # logged since the last hand-over, and those whose batches InfluxDB took
        self._positions: list[_Position] = []
        self._acked: list[_Position] = []
        self._cond = threading.Condition()
        self._batches: list[_Batch] = []
        self._busy = False
        self._stopping = False
        self._closed = False
        self._failure: str | None = None  # set when InfluxDB stayed unreachable: import stops
        self._outage_wait = settings.outage_wait
        self._sender = threading.Thread(target=self._send_loop, name=f"rlvitals-import-{name}")
        self._sender.daemon = True
        self._sender.start()
        if config:
            # the run_config point at step 0, as a run logged through the outbox writes it; its
            # own batch, rendered by the general renderer (it holds text: config_json)
            with self._cond:
                rows = config_rows(name, None, config, time.time())
                self._batches.append(_Batch([rows], len(rows), [], None, (0, 0, 0)))
                self._cond.notify_all()

    # -- reader side ---------------------------------------------------------------------------

    def learn_config(self, config: Mapping[str, Any]) -> None:
        """The run config as the logs now establish it (`Run.learn_config`): kept with the run
        in the local store and as its `run_config` point at step 0."""
        self._outbox.upsert_run(self.name, None, dict(config), None, time.time())
        with self._cond:
            rows = config_rows(self.name, None, config, time.time())
            self._batches.append(_Batch([rows], len(rows), [], None, (0, 0, 0)))
            self._cond.notify_all()

    @property
    def failure(self) -> str | None:
        """Why the import stopped (InfluxDB stayed unreachable), or None."""
        return self._failure

    def log(
        self, step: int, values: Mapping[str, LoggedValue], *, wall_time: float | None = None
    ) -> None:
        if self._failure is not None:
            raise WriteError(self._failure)
        self._wall_time = time.time() if wall_time is None else wall_time
        rows, events = self._translator.log(step, values, self._wall_time, None)
        self._add_rows(rows, events)
        if self._count >= self._next_batch:
            self._hand_over()

    def log_block(self, block: ScalarBlock) -> None:
        """Log the steps of a block, as `log` would one by one (their wall times are the
        log's; a step without one gets the time of the call)."""
        if self._failure is not None:
            raise WriteError(self._failure)
        per_step = max(1, block.value_count // max(1, len(block)))
        lo = 0
        while lo < len(block):
            # slices so each request holds about a batch, as `log` hands them over
            hi = min(len(block), lo + max(1, (self._next_batch - self._count) // per_step))
            for item in self._translator.log_block(block.slice(lo, hi), time.time()):
                if isinstance(item, FastSteps):
                    self._wall_time = float(item.walls[-1])
                    self._take_lines()
                    if self._texts is not None:
                        self._texts.append(self._block_renderer.render(item))
                    self._parts.append(item)
                    self._count += item.count
                    self._note_transforms()
                    self._events += self._translator.take_notices()
                else:
                    rows, events, self._wall_time = item
                    self._add_rows(rows, events)
            if self._count >= self._next_batch:
                self._hand_over()
            lo = hi

    def _add_rows(self, rows: list[SampleRow], events: list[EventRow]) -> None:
        # Rendered here, not on the sender: both hold the GIL, and one thread doing all the
        # Python work runs faster than two taking turns; the sender only waits on the socket.
        self._step_renderer.add(rows)
        self._parts.append(rows)
        self._count += len(rows)
        self._note_transforms()
        if events:
            self._events += events

    def _note_transforms(self) -> None:
        assert self._wall_time is not None
        noted = self._translator.take_transform_rows(self._wall_time)
        if noted:  # a text field at step 0: not the shape of a step's rows
            self._step_renderer.add_general(noted)
            self._parts.append(noted)
            self._count += len(noted)

    def save_position(self, position: SourcePosition) -> None:
        """Saved in the outbox once InfluxDB took what was logged before it (at the next
        hand-over of a batch after that, or `flush`), with the step the run was at: a reader
        killed meanwhile goes on from there, without taking its replay for a resume."""
        self._positions.append((position, self._translator.last_step, self._wall_time))

    @property
    def queue_depth(self) -> int:
        return 0  # the reader blocks while the sender is behind

    def wake(self) -> None:
        """Nothing to wake: nothing waits in a queue (see `queue_depth`)."""

    @property
    def stats(self) -> RunStats:
        return self._counters.snapshot()

    def flush(self, timeout: float = 10.0, *, sent: bool = True) -> bool:
        """Wait until everything logged was accepted by InfluxDB; then save positions. False on
        timeout or once the import stopped (`failure`)."""
        deadline = time.monotonic() + timeout
        self._hand_over()
        with self._cond:
            while self._batches or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._sender.is_alive():
                    return False
                self._cond.wait(remaining)
        if self._failure is not None:
            return False
        if self._rollups is not None and not self._rollups.wait(deadline - time.monotonic()):
            return False
        with self._cond:  # all sent: positions given since the last batch count too
            self._acked += self._positions
        self._positions = []
        self._save_acked()
        self._save_progress([], self._translator.last_step, self._wall_time)
        return True

    @property
    def deriver(self) -> StepDeriver:
        """The derived metrics' state, for a run going on from this one."""
        return self._translator.deriver

    def keep_transforms(self) -> None:
        """Store the record of the transforms this run's fields went through in the outbox
        too (it went to InfluxDB with the samples): a run of the same name going on through
        the outbox (`tail` after its catch-up) reads it there and keeps it whole."""
        rows = self._translator.transform_rows(self._wall_time or time.time())
        if rows:
            try:
                self._outbox.write(rows)
            except OutboxError as exc:
                _log.error("rlvitals run %r: %s", self.name, exc)

    @property
    def last_step(self) -> int | None:
        return self._translator.last_step

    def finish(
        self,
        timeout: float = 10.0,
        *,
        state: str | None = "finished",
        reason: str | None = None,
        at: float | None = None,
    ) -> None:
        """Send what is left (at most `timeout` seconds), record how the run ended (`state`,
        `reason`, `at`; None records nothing and lets go of the run, as at a tail's hand-over)
        and close."""
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        if not self.flush(timeout) and self._failure is None:
            _log.warning(
                "rlvitals run %r: import finished before InfluxDB took everything; run it again",
                self.name,
            )
        with self._cond:
            self._stopping = True
            left = sum(b.count + len(b.events) for b in self._batches)
            self._batches.clear()
            self._cond.notify_all()
        self._counters.drop("unfinished", left)
        self._sender.join(max(0.1, deadline - time.monotonic()))
        if self._rollups is not None:
            self._rollups.close(max(0.1, deadline - time.monotonic()))
        self._writer.close()
        if self._rollup_writer is not None:
            self._rollup_writer.close()
        try:
            if state is None:
                self._outbox.release_lease(self.name, self._holder)
            else:
                why = reason or f"recorded {state}"
                self._outbox.record_state(self.name, state, why, holder=self._holder, at=at)
        except OutboxError as exc:
            _log.error("rlvitals run %r: %s", self.name, exc)
        self._outbox.close()
        self._closed = True

    # -- internals -----------------------------------------------------------------------------

    def _hand_over(self) -> None:
        self._save_acked()
        if time.monotonic() >= self._renew_at:  # the lease's heartbeat
            self._renew_at = time.monotonic() + self._lifecycle.renew_every_s
            with suppress(OutboxError, sqlite3.Error):
                self._outbox.renew_lease(self.name, self._holder)
        if not self._count and not self._events:
            return
        self._next_batch = min(self._batch_size, self._next_batch * 2)
        held = self._translator.take_held()
        if self._failure is not None:
            self._counters.drop("influx_unreachable", self._count + len(self._events))
            self._parts, self._count, self._events = [], 0, []
            self._step_renderer.take()
            self._texts = []
            return
        self._take_lines()
        text = None if self._texts is None else "\n".join(t for t in self._texts if t)
        self._texts = []
        batch = _Batch(self._parts, self._count, self._events, text, held)
        batch.positions, self._positions = self._positions, []
        self._parts, self._count, self._events = [], 0, []
        with self._cond:
            while len(self._batches) >= _IN_FLIGHT and self._sender.is_alive():
                self._cond.wait(0.5)
            self._batches.append(batch)
            self._cond.notify_all()

    def _take_lines(self) -> None:
        text = self._step_renderer.take()
        if text is None:
            self._texts = None
        elif text and self._texts is not None:
            self._texts.append(text)

    def _save_acked(self) -> None:
        """Store the positions whose batches InfluxDB took (each file's latest)."""
        with self._cond:
            acked, self._acked = self._acked, []
        if acked:
            _, step, wall = acked[-1]
            latest = {p.path: p for p, _, _ in acked}
            self._save_progress(list(latest.values()), step, wall)

    def _save_progress(
        self, positions: list[SourcePosition], step: int | None, wall: float | None
    ) -> None:
        progress = [] if step is None or step == self._saved_step else [(self.name, NO_RANK, step)]
        if not positions and not progress:
            return
        try:
            self._outbox.write(
                (),
                positions=positions,
                progress=progress,
                activity={self.name: wall} if wall is not None else None,
            )
        except OutboxError as exc:
            _log.error("rlvitals run %r: %s", self.name, exc)
            return
        self._saved_step = step

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._batches and not self._stopping:
                    self._cond.wait()
                if not self._batches:
                    return
                batch = self._batches.pop(0)
                self._busy = True
                self._cond.notify_all()
            try:
                refused = self._counters.server_rejected  # only this thread adds to it
                if self._send(batch):
                    self._translator.count_stored(batch.held)
                    if self._rollups is None:
                        self._ack(batch.positions)
                    else:
                        # Its read positions count once its rollups are written too: saved
                        # at once, an import killed before they were would go on after
                        # steps whose blocks were never rolled up (raw points and rollups
                        # apart for good). Saved later, those steps are sent again by the
                        # next import and their blocks recomputed (rollups.py).
                        exact = self._counters.server_rejected == refused
                        self._rollups.sent(
                            batch.sent_parts(),
                            {self.name: self.project},
                            exact=exact,
                            done=functools.partial(self._ack, batch.positions),
                        )
            except Exception as exc:  # never let the thread die silently: count and say so
                self._counters.drop("send_error", batch.count + len(batch.events))
                _log.error("rlvitals import of run %r: %s: %s", self.name, type(exc).__name__, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _ack(self, positions: list[_Position]) -> None:
        """Positions whose batch InfluxDB took (and rolled up): saved at the next hand-over."""
        with self._cond:
            self._acked += positions

    def _send(self, batch: _Batch) -> bool:
        """Write a batch; True once InfluxDB took it (all but the lines it refused)."""
        count = batch.count + len(batch.events)
        if self._failure is not None:
            self._counters.drop("influx_unreachable", count)
            return False
        pending = [_pending_event(e, self.project) for e in batch.events]
        text = batch.text
        if text is None:
            lines = self._renderer.render(batch.rows(), pending, {self.name: self.project})
        else:
            lines = [text] if text else []
            lines += self._renderer.render((), pending)
        body = join_lines(lines)
        give_up: float | None = None
        backoff = 0.25
        while True:
            try:
                try:
                    self._writer.write(body)
                except WriteError as exc:
                    if exc.retryable:
                        raise
                    self._isolate(batch.rows(), pending, exc)
                    return True
            except WriteError as exc:
                with self._counters.lock:
                    self._counters.write_errors += 1
                now = time.monotonic()
                if give_up is None:
                    give_up = now + self._outage_wait
                    _log.warning(
                        "rlvitals: %s; retrying for up to %.0f s (RLVITALS_OUTAGE_WAIT)",
                        exc,
                        self._outage_wait,
                    )
                if now >= give_up:
                    # Nothing is parked in the outbox: replayed later it would overwrite what
                    # was written since. The log file stays the durable copy; the read
                    # positions are not saved past what InfluxDB took.
                    self._failure = (
                        f"{exc}; gave up after {self._outage_wait:.0f} s. Nothing of this import "
                        "was parked: run the same command again once InfluxDB answers"
                    )
                    self._counters.drop("influx_unreachable", count)
                    return False
                time.sleep(min(backoff, max(0.0, give_up - now)))
                backoff = min(backoff * 2, 5.0)
                continue
            with self._counters.lock:
                self._counters.sent += count
                self._counters.last_write = time.time()
            return True

    def _isolate(self, rows: list[SampleRow], events: list[PendingEvent], exc: WriteError) -> None:
        """InfluxDB refused the batch (HTTP 400): send it again in halves so only the refused
        lines are left out; keep those with the server's message in the outbox (`rejected`).
        A retryable error meanwhile is raised: the caller retries the whole batch."""
        with self._counters.lock:
            self._counters.write_errors += 1
        keyed = keyed_lines(self._renderer, rows, events, {self.name: self.project})
        refused = isolate_refused(self._writer, keyed)
        lost = sum(1 if key[0] == "event" else _count_rows(key, rows) for key, _, _ in refused)
        try:
            self._outbox.reject(refused)
        except (OutboxError, sqlite3.Error) as store_exc:
            _log.error("rlvitals run %r: %s", self.name, store_exc)
        _log.error(
            "rlvitals: %s; %d line(s) of %d refused and kept in the outbox's `rejected` table with "
            "the server's message, the rest written",
            exc,
            len(refused),
            len(keyed),
        )
        with self._counters.lock:
            self._counters.sent += len(rows) + len(events) - lost
            self._counters.server_rejected += lost
            self._counters.last_write = time.time()


_Part = list[SampleRow] | FastSteps
_Position = tuple[SourcePosition, int | None, float | None]  # and the run's step, wall time


class _Batch:
    """What one request writes: the parts logged (in order), their sample count, events, the
    lines rendered for the parts (None: render them with `LineRenderer`) and the counts held
    back until InfluxDB took it."""

    __slots__ = ("count", "events", "held", "parts", "positions", "text")

    def __init__(
        self,
        parts: list[_Part],
        count: int,
        events: list[EventRow],
        text: str | None,
        held: tuple[int, int, int],
    ) -> None:
        self.parts = parts
        self.count = count
        self.events = events
        self.text = text
        self.held = held
        self.positions: list[_Position] = []

    def sent_parts(self) -> list[SentPart]:
        """The samples as InfluxDB rollups take them, in order: columns stay columns."""
        out: list[SentPart] = []
        for part in self.parts:
            if isinstance(part, FastSteps):
                out += [SentColumns(part.run, part.rank, *group) for group in part.columns()]
            else:
                out.append(part)
        return out

    def rows(self) -> list[SampleRow]:
        out: list[SampleRow] = []
        for part in self.parts:
            out += part.rows() if isinstance(part, FastSteps) else part
        return out


def _count_rows(key: tuple[str, str, int, int, str, str], rows: list[SampleRow]) -> int:
    _, run, rank, step, measurement, gpu = key
    return sum(
        1 for r in rows if (r[0], r[1], r[2], r[3], r[4]) == (run, rank, step, measurement, gpu)
    )


def _pending_event(row: EventRow, project: str | None) -> PendingEvent:
    run, rank, step, kind, text, fields, wall_time = row
    return PendingEvent(
        0,
        0,
        run,
        project,
        None if rank == NO_RANK else rank,
        step,
        kind,
        text,
        json.loads(fields),
        wall_time,
    )
