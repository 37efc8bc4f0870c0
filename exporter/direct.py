"""`rlvitals import` straight to InfluxDB: the log file is the durable copy, so samples skip the outbox.

The exporter's contract is that a sample is stored durably before anything else happens to it, so
a crash or an InfluxDB outage loses nothing. For samples logged by a training process the outbox is
that durable store. For an import with InfluxDB configured, the log file being imported already is
one: it is on disk before the import starts and stays there, and every write is keyed by
(run, tags, step), so importing it again rewrites the same points. Copying every sample into the
outbox first would only double the disk work (it is most of an import's time), so `DirectRun`
translates records on the reader's thread (the same `Translator`, so names, transforms, policies,
non-finite handling and `resume` events are the same), renders each batch there too
(`StepRenderer`), and a sender thread POSTs it while the next batch is read. What does go to the outbox:

- the run (`runs` table), its last step (`run_progress`) and how far each file was read
  (`source_positions`), written only after everything read before them was accepted, so a later
  `rlvitals tail` or `rlvitals import --resume` goes on from there;
- every batch InfluxDB does not accept because it is unreachable: it is stored in the outbox and
  from then on the rest of the import takes the usual path (outbox, then the forwarder with
  backoff), so an outage during an import loses nothing either.

Without InfluxDB configured imports always go through the outbox (it is then the embedded store).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from registry import Registry

from .config import ExporterSettings, Policy
from .errors import OutboxError, WriteError
from .forwarder import Forwarder, LineRenderer
from .lineprotocol import join_lines
from .outbox import NO_RANK, EventRow, Outbox, PendingEvent, SampleRow, SourcePosition
from .stats import RunCounters, RunStats
from .step_lines import StepRenderer
from .translate import Translator, config_rows
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
        config: Mapping[str, Any] | None = None,
    ) -> None:
        writer = make_writer(settings)
        if writer is None:
            raise ValueError("DirectRun needs InfluxDB configured (RLVITALS_INFLUX_URL)")
        self.name = name
        self.project = project
        self.settings = settings
        self._writer: Writer = writer
        self._counters = RunCounters()
        self._outbox = Outbox(settings.outbox_path, budget_bytes=settings.disk_budget_bytes)
        # the run config (what `import` read from the logs and --config/--set) is kept with the
        # run in the local store, where diagnosis reads it
        self._outbox.upsert_run(
            name, project, dict(config) if config else None, framework, time.time()
        )
        self._translator = Translator(
            registry,
            self._counters,
            run=name,
            rank=None,
            policy=policy or settings.policy,
            framework=framework,
            last_step=self._outbox.last_step(name),
        )
        self._saved_step = self._translator.last_step
        self._renderer = LineRenderer()
        self._step_renderer = StepRenderer(self._renderer, project)
        self._batch_size = max(settings.batch_size, DIRECT_BATCH)
        # The first requests are small, so InfluxDB has work while the next batch is read.
        self._next_batch = min(self._batch_size, _FIRST_BATCH)
        self._rows: list[SampleRow] = []
        self._events: list[EventRow] = []

        self._positions: list[SourcePosition] = []
        self._cond = threading.Condition()
        self._batches: list[tuple[list[SampleRow], list[EventRow], str | None]] = []
        self._busy = False
        self._stopping = False
        self._closed = False
        self._forwarder: Forwarder | None = None  # started when InfluxDB stops answering
        self._sender = threading.Thread(target=self._send_loop, name=f"rlvitals-import-{name}")
        self._sender.daemon = True
        self._sender.start()
        if config:
            # the run_config point at step 0, as a run logged through the outbox writes it; its
            # own batch, rendered by the general renderer (it holds text: config_json)
            with self._cond:
                self._batches.append((config_rows(name, None, config, time.time()), [], None))
                self._cond.notify_all()

    # -- reader side ---------------------------------------------------------------------------

    def log(
        self, step: int, values: Mapping[str, float], *, wall_time: float | None = None
    ) -> None:
        rows, events = self._translator.log(
            step, values, time.time() if wall_time is None else wall_time, None
        )
        # Rendered here, not on the sender: both hold the GIL, and one thread doing all the
        # Python work runs faster than two taking turns; the sender only waits on the socket.
        self._step_renderer.add(rows)
        self._rows += rows
        if events:
            self._events += events
        if len(self._rows) >= self._next_batch:
            self._hand_over()
            self._next_batch = min(self._batch_size, self._next_batch * 2)

    def save_position(self, position: SourcePosition) -> None:
        """Saved in the outbox at the next successful `flush`, once what came before is sent."""
        self._positions.append(position)

    @property
    def queue_depth(self) -> int:
        return 0  # the reader blocks while the sender is behind

    @property
    def stats(self) -> RunStats:
        return self._counters.snapshot()

    def flush(self, timeout: float = 10.0, *, sent: bool = True) -> bool:
        """Wait until everything logged was accepted by InfluxDB (or stored in the outbox when
        it was unreachable, and with `sent` forwarded from there); then save positions."""
        deadline = time.monotonic() + timeout
        self._hand_over()
        with self._cond:
            while self._batches or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._sender.is_alive():
                    return False
                self._cond.wait(remaining)
        forwarder = self._forwarder
        if sent and forwarder and not forwarder.flush(max(0.0, deadline - time.monotonic())):
            return False
        self._save_progress()
        return True

    def finish(self, timeout: float = 10.0) -> None:
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        if not self.flush(timeout):
            _log.warning(
                "rlvitals run %r: import finished before InfluxDB took everything; what was "
                "not sent waits in %s",
                self.name,
                self.settings.outbox_path,
            )
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._sender.join(max(0.1, deadline - time.monotonic()))
        if self._forwarder is not None:
            self._forwarder.stop(max(0.1, deadline - time.monotonic()))
        else:
            self._writer.close()
        self._outbox.close()
        self._closed = True

    # -- internals -----------------------------------------------------------------------------

    def _hand_over(self) -> None:
        if not self._rows and not self._events:
            return
        batch = (self._rows, self._events, self._step_renderer.take())
        self._rows, self._events = [], []
        with self._cond:
            while len(self._batches) >= _IN_FLIGHT and self._sender.is_alive():
                self._cond.wait(0.5)
            self._batches.append(batch)
            self._cond.notify_all()

    def _save_progress(self) -> None:
        step = self._translator.last_step
        progress = [] if step is None or step == self._saved_step else [(self.name, NO_RANK, step)]
        if not self._positions and not progress:
            return
        try:
            self._outbox.write((), positions=self._positions, progress=progress)
        except OutboxError as exc:
            _log.error("rlvitals run %r: %s", self.name, exc)
            return
        self._positions = []
        self._saved_step = step

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._batches and not self._stopping:
                    self._cond.wait()
                if not self._batches:
                    return
                rows, events, text = self._batches.pop(0)
                self._busy = True
                self._cond.notify_all()
            try:
                self._send(rows, events, text)
            except Exception as exc:  # never let the thread die silently
                _log.exception("rlvitals import of run %r: %s", self.name, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _send(self, rows: list[SampleRow], events: list[EventRow], text: str | None) -> None:
        count = len(rows) + len(events)
        if self._forwarder is None:
            pending = [_pending_event(e, self.project) for e in events]
            if text is None:
                lines = self._renderer.render(rows, pending, {self.name: self.project})
            else:
                lines = [text] if text else []
                lines += self._renderer.render((), pending)
            body = join_lines(lines)
            try:
                self._writer.write(body)
            except WriteError as exc:
                if not exc.retryable:
                    with self._counters.lock:
                        self._counters.write_errors += 1
                    _log.error("rlvitals: %s", exc)
                    return
                with self._counters.lock:
                    self._counters.write_errors += 1
                _log.warning(
                    "rlvitals: %s; the rest of this import is stored in the outbox and sent "
                    "when InfluxDB answers again",
                    exc,
                )
                self._forwarder = Forwarder(
                    self.settings.outbox_path,
                    self._writer,
                    self._counters,
                    batch_size=self.settings.batch_size,
                )
                self._forwarder.start()
            else:
                with self._counters.lock:
                    self._counters.sent += count
                    self._counters.last_write = time.time()
                return
        try:
            stored = self._outbox.write(rows, events)
        except OutboxError as exc:
            _log.error("rlvitals run %r: %s", self.name, exc)
            stored = False
        if not stored:
            with self._counters.lock:
                self._counters.refused_disk += count
            return
        self._forwarder.wake()


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
