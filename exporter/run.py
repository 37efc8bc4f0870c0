"""The Run API: `init()` returns a Run whose `log()` hands samples to a worker thread and returns.

Caller's thread: copy the dict and append it to a bounded queue (under `strict`, also cheap checks
that raise `InvalidSample`). Worker thread: translate names, apply the bad-input policy, write rows
to the outbox; consecutive calls that logged the same names go as one columnar block
(`Translator.log_calls`, `Outbox.write(blocks=...)`), so the worker's share of the GIL per step is
a few microseconds and it lets go of the GIL once per batch. A log reader hands over steps
already in columns (`log_block`, a `ScalarBlock`): they are translated a column at a time
(`BlockTranslator`) and stored as blocks, with no dict per step on either side. Forwarder (when
InfluxDB is configured): a child process sending the outbox to InfluxDB (`forward_process`), or a
thread.
"""

from __future__ import annotations

import atexit
import logging
import signal
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import registry as registry_mod
from registry import FRAMEWORKS, Registry, ResolveError

from .config import POLICIES, ExporterSettings, Policy, redact_url
from .counts import LiveState, RunCounters, RunStats
from .errors import ConfigError, ExporterError, InvalidSample, OutboxError, RunHeld
from .influx.forward_process import ForwarderProcess
from .influx.forwarder import Forwarder
from .influx.rollups import make_rollups
from .influx.writers import make_writer
from .job import Job, job_of
from .lease import Holder, Lease, this_process
from .lifecycle import TERMINAL_STATES, Lifecycle, Recorded, RunStatus, Status
from .prometheus import live_states
from .prometheus.metrics_endpoint import MetricsEndpoint
from .schema import (
    INFLUX_MAX_STEP,
    NO_RANK,
    RANK_END,
    RUN_CONFIG,
    STATE_FIELD,
    UNREGISTERED,
    EventRow,
    FieldTransform,
    SampleBlock,
    SampleRow,
    SourcePosition,
)
from .sources.scalar_block import ScalarBlock
from .store.outbox import Outbox
from .translate.blocks import BlockTranslator, FastSteps
from .translate.derive import StepDeriver
from .translate.steps import (
    LoggedValue,
    config_rows,
    event_field_problem,
    event_problem,
    limits_problem,
    name_problem,
    several,
    short_repr,
    step_problem,
    to_number,
    value_problem,
)

__all__ = ["Run", "gather_interval", "init"]

_log = logging.getLogger("exporter")
_WORKER_BATCH = 2000
_RATE_WINDOW = 60.0  # seconds the forwarder's rate on /metrics is measured over
_WORKER_GRACE = 2.0  # finish() waits this long past its timeout for the batch in the worker's
# hands; then what it holds is counted dropped too (and uncounted if it lands after all)
_BLOCK_AT_LEAST = 4
_CONTENDED = 4.0  # a write this many times longer than its own CPU time waited on the GIL
_CONTENDED_STRETCH = 3.0  # ... and the next batch gathers this many commit intervals


def gather_interval(commit_interval: float, wall: float, cpu: float) -> float:
    """How long the worker lets the next batch gather, given how long the last write took on
    the clock (`wall`) and on the worker's own CPU (`cpu`).

    A write is a few trips to sqlite, each a hand-back of the GIL. While the training loop is
    pure Python it holds the GIL, so each hand-back is a switch the loop pays for, and the write
    takes many times its CPU time. The price is per write, not per value: measured at 90
    steps/s × 30 metrics, a batch every 0.1 s slowed such a loop by 4.2 %, every 0.3 s by 0.8 %.
    So under that contention batches gather `_CONTENDED_STRETCH` times longer (which is also
    how much more a `kill -9` can lose); a loop that lets go of the GIL (numpy, torch) keeps the
    commit interval."""
    if wall > _CONTENDED * max(cpu, 1e-6):
        return commit_interval * _CONTENDED_STRETCH
    return commit_interval


"""Consecutive calls logging the same names that are translated as one columnar block: below
this, the per-call path costs less than building the block's arrays."""

# Queue items: ("log", step, values, wall_time, framework), ("block", ScalarBlock, time of the
# call), ("event", step, kind, text, fields, wall_time; step None: the step last logged when the
# worker gets to it), ("position", SourcePosition), ("config", the run config learned since) or
# a threading.Event flush marker the worker sets once everything before it is stored.
_Item = tuple[Any, ...] | threading.Event


class Run:
    """One training run. Create it with `exporter.init()`; use it as a context manager or call
    `finish()` at the end (an atexit hook flushes it otherwise)."""

    def __init__(
        self,
        name: str,
        *,
        project: str | None,
        config: Mapping[str, Any] | None,
        registry: Registry,
        settings: ExporterSettings,
        framework: str | None,
        rank: int | None,
        policy: Policy,
        endpoint: MetricsEndpoint | None = None,
        resume: bool = False,
        deriver: StepDeriver | None = None,
        lease_kind: str = "log",
        lifecycle: Lifecycle | None = None,
        job: Job | None = None,
    ) -> None:
        """`deriver`: the derived metrics' state to go on from (a `tail` going on from its
        catch-up, which computed them until then); a new one by default. `lease_kind` says what
        this writer is (`log`: a training process, whose uncaught exception is recorded as the
        run's crash; `import`; `tail`), `lifecycle` the lease's timing. `job`: the job and rank
        this process is (`exporter.job`; `init` reads it from the launcher): a rank of a job
        joins its job's run and holds that rank's lease."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"run name {name!r} must be a non-empty string")
        for what, text in (("run name", name), ("project", project)):
            problem = name_problem(what, text) if isinstance(text, str) else None
            if problem is not None:
                raise ConfigError(problem)
        if framework is not None and framework not in (*FRAMEWORKS, "generic"):
            raise ConfigError(
                f"framework {framework!r} is unknown; use one of {', '.join(FRAMEWORKS)} or None"
            )
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise ConfigError(f"rank {rank!r} must be a non-negative int or None")
        if policy not in POLICIES:
            raise ConfigError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
        if not isinstance(resume, bool):
            raise ConfigError(f"resume={resume!r} must be True or False")
        if job is not None and job.rank is not None:
            rank = job.rank
        self.name = name
        self.project = project
        self.rank = rank
        self._rank_key = NO_RANK if rank is None else rank
        self.job = job
        # the rank whose lease and end this process holds: a rank of a job (None: the run's
        # one writer, as a run logged without a job's ranks)
        self._lease_rank = rank if job is not None and job.key and rank is not None else None
        self._sourced = False
        self.framework = framework
        self.policy: Policy = policy
        self.settings = settings
        self.registry = registry
        self._config = dict(config or {})
        self._strict = policy == "strict"
        self._counters = RunCounters()
        self._queue: deque[_Item] = deque()
        # a queued `log_block` is one item for many steps: the steps beyond one per item, so
        # the depth (what the capacity and a reader waiting for room count) is in steps
        self._block_extra = 0
        self._extra_lock = threading.Lock()
        self._capacity = settings.queue_size
        self._closed = False
        self._drop_warned = False
        self._lost_at_flush = 0  # samples lost up to the last flush (what it reported)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._created = time.time()
        self._lifecycle = lifecycle or settings.lifecycle
        self._holder = this_process()
        self._lease_kind = lease_kind
        self._writer: Holder | None = None  # a follower's look at its logs' writer
        self._writer_open = False
        self._last_log = time.monotonic()  # when log() was last called: this process's view
        self._end: Status | None = None  # how the run ended, once finish() recorded it
        self._marked: str | None = None  # mark_finished()'s reason, until log() is called again
        self._uncaught: BaseException | None = None
        self.resumed = False
        """Whether this run goes on with a stored one (`resume`, or an incomplete import)."""
        # An unusable store (a corrupt file, a read-only disk) must not stop the training:
        # the worker keeps trying it, and until it opens nothing is stored (flush says False).
        # This connection is closed once the run is set up: only the worker holds the file
        # open, so when the file is deleted or replaced the worker can let go of it entirely
        # (SQLite pairs the file at a path with the write-ahead log at that path).
        outbox = self._open_outbox(quiet=False)
        self.requested_name = name
        took_over: Lease | None = None
        # a name chosen while another process kept the store locked: recorded (run, lease, the
        # job's rank) by the worker, which may wait; until then no lease of this rank exists, so
        # a rank killed before it would be missing from the run's ranks
        self._claim_pending = False
        if outbox is not None:
            try:
                claim = outbox.claim(
                    name,
                    resume=resume,
                    created=self._created,
                    holder=self._holder,
                    kind=lease_kind,
                    lease_ttl_s=self._lifecycle.lease_ttl_s,
                    job=job if self._lease_rank is not None else None,
                )
                name, self.resumed, took_over = claim.name, claim.resumed, claim.took_over
                self._claim_pending = not claim.recorded
            except RunHeld:
                outbox.close()
                raise
            except OutboxError as exc:
                _log.error("rlvitals run %r: cannot claim the name: %s", name, exc)
            self.name = name
        if name != self.requested_name:
            _log.info(
                "rlvitals: a run named %r is already in the store; this one is %r (pass "
                "resume=True to go on with the old one)",
                self.requested_name,
                name,
            )
        self._translator = BlockTranslator(
            registry,
            self._counters,
            run=name,
            rank=rank,
            policy=policy,
            framework=framework,
            last_step=_safe_last_step(outbox, name, rank),
            config=self._config,
            transforms=_safe_transforms(outbox, name),
            defer_counts=True,
            deriver=deriver,
        )
        if outbox is not None:
            outbox.close()
        if took_over is not None and lease_kind == "log":
            # a training process going on with a run whose writer died; a reader going on
            # from its read positions is not a resume (it re-reads nothing it stored)
            at = self._translator.last_step or 0
            self._queue.append(
                (
                    "event",
                    at,
                    "resume",
                    f"went on with the run after its writer ({took_over.holder.describe()}, "
                    f"{took_over.kind}) stopped without recording an end",
                    {},
                    time.time(),
                )
            )
        self._reported: set[str] = set()
        self._in_progress: list[_Item] = []
        self._run_recorded = False
        self._stored_here = 0  # samples stored through the worker's current outbox connection
        self._worker_outbox: Outbox | None = None  # that connection, for `live`'s backlog
        self._store_gone = False  # the worker found its outbox deleted or replaced
        self._refused = False  # the disk budget (or a full disk) refused values read from logs
        self._worker_lock = threading.Lock()
        self._take_lock = threading.Lock()
        self._progress_lock = threading.Lock()  # the batch in the worker's hands, given up or not
        self._given_up: tuple[list[_Item], int] | None = None  # by finish(): (batch, values)
        self._abandon = False  # the run ended: the worker takes nothing more from the queue
        self._stored_total = 0  # values the store took (what `unfinished` is counted against)
        # why the store does not open now (None: it opened): what is still queued when the run
        # ends was then lost to the store, not to finish()'s timeout, and is counted so
        self._unopenable: str | None = None
        self._forwarder = _start_forwarder(settings, self._counters)
        self._sent_seen: deque[tuple[float, int]] = deque()  # (time, rows sent) at live()
        self._worker = threading.Thread(target=self._work, name=f"rlvitals-{name}", daemon=True)
        self._worker.start()
        self._endpoint: MetricsEndpoint | None = None
        self._shared_endpoint = endpoint
        if endpoint is not None:
            endpoint.add(self)  # a sidecar serving many runs on one port
        elif settings.prometheus_port is not None:
            self._endpoint = MetricsEndpoint(
                host=settings.prometheus_host, port=settings.prometheus_port
            )
            self._endpoint.add(self)
            live_states.attach(self._endpoint, registry, settings.outbox_path)
            self._endpoint.start()
        atexit.register(self._at_exit)
        self._previous_hook: Any = None
        self._previous_sigterm: Any = None
        self._signalled: int | None = None
        if lease_kind == "log":
            # an exception nobody caught ends the process: recorded as the run's crash at exit
            self._previous_hook = sys.excepthook
            sys.excepthook = self._on_uncaught
            self._catch_sigterm()

    # -- caller side ---------------------------------------------------------------------------

    def log(
        self,
        step: int,
        values: Mapping[str, LoggedValue],
        *,
        wall_time: float | None = None,
        framework: str | None = None,
    ) -> None:
        """Record the values of one training step. Returns at once; never does I/O.

        A value may be a list of numbers: the several values of one name at this step (one per
        episode that ended). Its mean is stored under the name's field, and its count, min and
        max under measurement `spread` (`<field>/count`, `/min`, `/max`). Logging a name again
        at a step replaces its value (a replayed step after a resume is one point)."""
        if self._strict:
            self._check(step, values, framework)
        try:
            copied = dict(values)
        except (TypeError, ValueError):
            with self._counters.lock:
                self._counters.rejected += 1
            _log.warning(
                "rlvitals run %r: log() values must be a mapping, got %r", self.name, type(values)
            )
            return
        if self._closed or len(self._queue) >= self._capacity:
            self._count_dropped(len(copied))
            return
        self._last_log = time.monotonic()
        self._marked = None
        self._queue.append(
            ("log", step, copied, time.time() if wall_time is None else wall_time, framework)
        )

    def log_block(self, block: ScalarBlock) -> None:
        """Record consecutive steps read from a log, as `log` would one by one (`block.records()`,
        a step without a wall time getting the time of this call), without a dict per step: the
        worker translates them a column at a time (`BlockTranslator`) and stores them as
        columnar blocks. Returns at once; never does I/O. Under `strict` each step goes
        through `log` (and its checks)."""
        if self._strict:
            for record in block.records():
                self.log(record.step, record.values, wall_time=record.wall_time)
            return
        count = len(block)
        if not count:
            return
        if self._closed or self.queue_depth + count > self._capacity:
            self._count_dropped(block.value_count)
            return
        self._last_log = time.monotonic()
        self._marked = None
        with self._extra_lock:
            self._block_extra += count - 1
        self._queue.append(("block", block, time.time()))

    def event(self, step: int, kind: str, text: str = "", **fields: Any) -> None:
        """Record an event (checkpoint, warmup_end, grad_clip, obs_norm_update, config_change...)."""
        if self._strict:
            self._check_step(step)
            problem = event_problem(step, kind, text)
            if problem is None:
                problem = next(
                    (p for k, v in fields.items() if (p := event_field_problem(k, v))), None
                )
            if problem is not None:
                raise InvalidSample(f"run {self.name!r}: {problem}", step=step, name=str(kind))
        if self._closed or len(self._queue) >= self._capacity:
            self._count_dropped(1)
            return
        self._queue.append(("event", step, kind, text, fields, time.time()))

    def learn_config(self, config: Mapping[str, Any]) -> None:
        """For log sources: the run config as the logs now establish it (a follower decides the
        run's context from the names logged so far, and again when new ones appear: SB3 logs
        its `train/` names from the second update on). It replaces the stored config in the
        order of the calls around it, as an import reading the whole file would have stored it
        at the start; no `config_change` event (the run's setting did not change, what is
        known of it did)."""
        if not self._closed:
            self._queue.append(("config", dict(config)))

    def follow_sources(self) -> None:
        """For log sources, before the first `log`: this run is fed from log files, so the step it
        was last at is stored only together with read positions (`save_position`). A reader
        killed between two positions then re-reads from the older one without taking its own
        replay for a resume."""
        if not self._sourced:
            self._sourced = True
            self._queue.append(("sourced",))

    def save_position(self, position: SourcePosition) -> None:
        """For log sources: store how far a file was read, in the outbox transaction of the
        samples logged before this call, so a restarted reader goes on from exactly there."""
        if not self._closed:
            self._queue.append(("position", position))

    @property
    def queue_depth(self) -> int:
        """Calls waiting for the worker thread (a `log_block` counts its steps)."""
        return len(self._queue) + self._block_extra

    def wake(self) -> None:
        """Have the worker write what is queued now instead of letting the batch gather for
        the commit interval: for a reader waiting on the queue (a training loop never calls
        it; a write per call would cost it GIL hand-offs)."""
        self._wake.set()

    def _take(self) -> _Item:
        """The next queued item (the worker's side of `queue_depth`)."""
        item = self._queue.popleft()
        if not isinstance(item, threading.Event) and item[0] == "block":
            with self._extra_lock:
                self._block_extra -= len(item[1]) - 1
        return item

    def flush(self, timeout: float = 10.0, *, sent: bool = True) -> bool:
        """Wait until everything logged so far is in the outbox and, with InfluxDB configured
        and `sent` true, sent. Returns False if that did not happen within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        self._ensure_worker()
        if not self._worker.is_alive():
            return False
        marker = threading.Event()
        self._queue.append(marker)
        self._wake.set()
        if not marker.wait(timeout):
            return False
        lost, self._lost_at_flush = self._lost_at_flush, self._lost()
        if self._lost_at_flush != lost:  # something logged since the last flush was not stored
            return False
        if self._forwarder is None or not sent:
            return True
        return self._forwarder.flush(max(0.0, deadline - time.monotonic()))

    def observe_writer(self, writer: Holder | None, open_: bool) -> None:
        """A follower's look at the process writing this run's logs (`Lease.writer`): who it
        is (None: none seen) and whether it holds a log open for writing. Stored with the
        lease; it is what makes a quiet followed run stalled rather than quiet."""
        if (writer, open_) == (self._writer, self._writer_open):
            return
        self._writer, self._writer_open = writer, open_
        self._queue.append(("writer", writer, open_))
        self._wake.set()

    def mark_finished(self, reason: str) -> None:
        """Record that training ended (SB3's `learn()` returned, HF's `on_train_end`) without
        closing the run: logging to it again makes it live again."""
        if not self._closed:
            self._marked = reason
            self._queue.append(("state", "finished", reason))
            self._wake.set()

    def finish(
        self,
        timeout: float = 10.0,
        *,
        state: str | None = "finished",
        reason: str | None = None,
        at: float | None = None,
    ) -> None:
        """Flush (waiting at most `timeout` seconds), stop the threads, record how the run ended
        (`state`: `finished`, `crashed` or `ended`, with `reason`; None records no end and only
        lets go of the run, as a sidecar that stops watching it) and close the outbox. `at`:
        when the run ended, where a reader of its logs knows it was before now."""
        if self._closed:
            return
        started = time.monotonic()
        deadline = started + timeout
        why = reason or ("finish() called" if state == "finished" else f"recorded {state}")
        if self._lease_rank is not None and state in TERMINAL_STATES:
            self._end_rank(state, why)
        flushed = self.flush(timeout)
        self._closed = True
        self._stop.set()
        self._wake.set()
        self._worker.join(max(0.1, deadline - time.monotonic()))
        unfinished = self._give_up_queue(deadline)
        if self._shared_endpoint is not None:
            self._shared_endpoint.remove(self)
        atexit.unregister(self._at_exit)
        if unfinished and self._unopenable is not None:
            _log.warning(
                "rlvitals run %r: %d value(s) logged were not stored: the store does not open "
                "(%s); counted as dropped, stats.dropped_by_reason['store_error'] "
                "(rlvitals_dropped_total{reason='store_error'})",
                self.name,
                unfinished,
                self._unopenable,
            )
        elif unfinished:
            _log.warning(
                "rlvitals run %r: %d value(s) logged were not yet stored when the run ended "
                "(finish() waited %.1f s; the store took %d of %d): counted as dropped, "
                "stats.dropped_by_reason['unfinished'] (rlvitals_dropped_total{reason="
                "'unfinished'}); give finish() a longer timeout (RLVITALS_FLUSH_TIMEOUT) to "
                "store them",
                self.name,
                unfinished,
                time.monotonic() - started,
                self._stored_total,
                self._stored_total + unfinished,
            )
        self._restore_hook()
        if state is not None:
            shown = RunStatus.INCOMPLETE if state == "importing" else RunStatus(state)
            self._end = Status(shown, why, time.time() if at is None else at)
        outbox = self._open_outbox(quiet=True)
        if outbox is not None:
            # The end (or the lease let go) is what the run's status is read from: wait for
            # the store's write lock for the rest of `timeout`, not the 2 s default. A sidecar
            # whose other runs store a large catch-up keeps the lock busy for longer; the end
            # it lost left the lease held, so history read stalled, and crashed once it exited.
            wait = max(2.0, deadline - time.monotonic())
            try:
                if state is None:
                    outbox.release_lease(self.name, self._holder, wait=wait, rank=self._lease_rank)
                else:
                    outbox.record_state(
                        self.name,
                        state,
                        why,
                        holder=self._holder,
                        wait=wait,
                        at=at,
                        rank=self._lease_rank,
                        lease_ttl_s=self._lifecycle.lease_ttl_s,
                    )
            except OutboxError as exc:
                _log.error("rlvitals run %r: %s", self.name, exc)
        if self._forwarder is not None:
            self._end_forwarder(outbox, flushed, deadline)
        if outbox is not None:
            outbox.close()
        if self._endpoint is not None:
            # Prometheus reads the end before the process goes: otherwise its last reading
            # (live) is what the alert rules have, as from a process killed without an end
            if not self._endpoint.linger(self.settings.prometheus_linger_s):
                _log.warning(
                    "rlvitals run %r: Prometheus did not scrape /metrics again within %g s of "
                    "the run's end; it may read the run as gone without an end "
                    "(RLVITALS_PROMETHEUS_LINGER_S)",
                    self.name,
                    self.settings.prometheus_linger_s,
                )
            self._endpoint.stop()

    def _end_forwarder(self, outbox: Outbox | None, flushed: bool, deadline: float) -> None:
        """Stop the forwarder, or, with rows not yet sent, leave its child to send them after
        this process exits (bounded by RLVITALS_DRAIN_TIMEOUT) and say so in one line."""
        assert self._forwarder is not None
        backlog = 0 if flushed else _safe_backlog(outbox)
        drain = self.settings.drain_timeout
        pid = None
        if backlog and drain > 0 and isinstance(self._forwarder, ForwarderProcess):
            pid = self._forwarder.detach(drain)
        if pid is None:  # (a second at least: its rollups finish, or are owed in the store)
            self._forwarder.stop(max(1.0, deadline - time.monotonic()))
        if not backlog:
            return
        where = redact_url(self.settings.influx_url or "")
        if pid is not None:
            _log.warning(
                "rlvitals run %r: %d row(s) are not yet sent to InfluxDB at %s; the forwarder "
                "(pid %d) goes on sending them after this process exits, for up to %.0f s "
                "(RLVITALS_DRAIN_TIMEOUT); `rlvitals runs` shows how far it got",
                self.name,
                backlog,
                where,
                pid,
                drain,
            )
        else:
            _log.warning(
                "rlvitals run %r finished before everything was sent to InfluxDB at %s (%d "
                "row(s) wait in %s; the next run on this store with InfluxDB configured "
                "forwards them)",
                self.name,
                where,
                backlog,
                self.settings.outbox_path,
            )

    def _end_rank(self, state: str, why: str) -> None:
        """A rank of a job ending: its `RANK_END` event at its last step, and the ends of the
        job's ranks on this host that died without one (`Outbox.reap_ranks`), both stored
        before the last flush so the forwarder sends them to InfluxDB with the rest."""
        if len(self._queue) < self._capacity:
            self._queue.append(("event", None, RANK_END, why, {STATE_FIELD: state}, time.time()))
        self._queue.append(("reap",))

    def _give_up_queue(self, deadline: float) -> int:
        """What the worker has not taken when the run must end (finish()'s time is up, or the
        worker died): the worker stops taking more, the batch in its hands is stored or counted
        by it if it gets there by `deadline` (and `_WORKER_GRACE`), and the rest is counted
        dropped (`unfinished`). A batch still in its hands then (a store locked by another
        process, a disk that hangs) is counted `unfinished` too; the worker takes that count
        back if it stores or counts the batch after all. Returns how many values were given up."""
        with self._take_lock:
            self._abandon = True
            left = [self._take() for _ in range(len(self._queue))]
        if self._worker.is_alive():
            self._worker.join(max(0.0, deadline - time.monotonic()) + _WORKER_GRACE)
        with self._progress_lock:
            if self._worker.is_alive() and self._in_progress:
                held = self._in_progress
                self._given_up = (held, sum(_size(i) for i in held if _is_sample(i)))
                left += held
        left += [self._take() for _ in range(len(self._queue))]  # a log() racing the end
        for item in left:
            if isinstance(item, threading.Event):
                item.set()
        samples = [item for item in left if _is_sample(item)]
        # a batch in the worker's hands means the store opened: `unfinished`, as the worker's
        # taking the count back (`undrop`) expects
        unopenable = self._unopenable is not None and self._given_up is None
        reason = "store_error" if unopenable else "unfinished"
        self._counters.drop(reason, sum(_size(item) for item in samples))
        return sum(_size(item) for item in samples if not _is_event(item))

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish(self.settings.flush_timeout)
            return
        what = f"{exc_type.__name__}: {exc}"[:500]
        self._exception_event(what)
        self.finish(self.settings.flush_timeout, state=_end_of(exc_type), reason=what)

    @property
    def stats(self) -> RunStats:
        return self._counters.snapshot()

    @property
    def metrics_endpoint(self) -> MetricsEndpoint | None:
        """The /metrics endpoint this run started (RLVITALS_PROMETHEUS_PORT set), if any."""
        return self._endpoint

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_step(self) -> int | None:
        """The step this run was last at (what it logged last, or the stored run it goes on
        with)."""
        return self._translator.last_step

    def live(self) -> LiveState:
        """Current state for the Prometheus endpoint."""
        c = self._counters
        backlog, oldest = 0, None
        if self._forwarder is not None:
            backlog = self._backlog()
            if backlog:
                at = _safe_oldest(self._worker_outbox)
                oldest = None if at is None else max(0.0, time.time() - at)
        stats = c.snapshot()
        with c.lock:
            latest = dict(c.latest)
            step = c.step
            last_write = c.last_write
            last_activity = c.rate_window[-1][0] if c.rate_window else None
        return LiveState(
            run=self.name,
            step=step,
            steps_per_second=c.steps_per_second(time.time()),
            latest=latest,
            stats=stats,
            backlog=backlog,
            backlog_oldest_age=oldest,
            forward_rate=self._forward_rate(stats.sent + stats.server_rejected),
            queue_depth=self.queue_depth,
            last_write_age=None if last_write is None else max(0.0, time.time() - last_write),
            last_activity=last_activity,
            finished=self._closed,
            status=self.status(),
            writer=self._lease_kind == "log",
        )

    def _forward_rate(self, sent: int) -> float | None:
        """Rows/s the forwarder sent over about the last minute (between the calls of `live`,
        a scrape's pace); None until two calls are apart, or without InfluxDB."""
        if self._forwarder is None:
            return None
        now = time.monotonic()
        seen = self._sent_seen
        seen.append((now, sent))
        while len(seen) > 2 and now - seen[1][0] >= _RATE_WINDOW:
            seen.popleft()
        then, before = seen[0]
        return None if now - then < 1.0 else max(0.0, (sent - before) / (now - then))

    def status(self) -> Status:
        """The run's status as this process sees it: its recorded end once finished, else live
        or stalled by when `log()` was last called or rows last reached the store (this
        process's clock, not the trainer's `wall_time`), through the one `Lifecycle`."""
        if self._end is not None:
            return self._end
        now = time.time()
        idle = max(0.0, time.monotonic() - self._last_log)
        with self._counters.lock:
            stored = self._counters.last_write
        # Active until rows stop reaching the store too (the store's own reading, `arrived`):
        # a run whose worker still stores a backlog nobody logs to any more (a sidecar's
        # catch-up of a large log, finish() draining it) is not stalled.
        arrived = now - idle if stored is None else max(now - idle, stored)
        own = Lease(
            self._holder, self._lease_kind, self._created, now, self._writer, self._writer_open
        )
        return self._lifecycle.status(Recorded(arrived=arrived, lease=own), now, alive=_alive)

    def __repr__(self) -> str:
        return f"Run({self.name!r}, project={self.project!r}, policy={self.policy!r})"

    # -- internals -----------------------------------------------------------------------------

    def _check(self, step: object, values: object, framework: str | None) -> None:
        """Strict: raise InvalidSample for anything the store would refuse or alter. Whatever
        else a bad input makes the checks raise (a mapping whose items() fails, a value too
        deep to inspect) is an InvalidSample too: the caller handles one exception type."""
        try:
            self._check_step(step)
            self._check_values(step, values, framework)
        except InvalidSample:
            raise
        except Exception as exc:
            raise InvalidSample(
                f"run {self.name!r}: log() at step {short_repr(step)} could not be checked "
                f"({type(exc).__name__}: {short_repr(str(exc))}); log a mapping of metric name "
                "to number",
                step=step,
            ) from None

    def _check_step(self, step: object) -> None:
        problem = step_problem(step)
        influx = self.settings.influx_url is not None
        if problem is None and influx and int(step) > INFLUX_MAX_STEP:  # type: ignore[call-overload]
            problem = (
                f"step {step} is beyond {INFLUX_MAX_STEP:,}, the largest step InfluxDB can "
                "store (steps are its timestamps, in seconds, held as int64 nanoseconds); "
                "log the training step, not a sample count or a time in nanoseconds"
            )
        if problem is not None:
            raise InvalidSample(f"run {self.name!r}: {problem}", step=step)

    def _check_values(self, step: object, values: object, framework: str | None) -> None:
        if not isinstance(values, Mapping):
            raise InvalidSample(
                f"run {self.name!r}: log() values at step {step} must be a mapping of name to "
                f"number, got {type(values).__name__}",
                step=step,
            )
        istep = int(step)  # type: ignore[call-overload]
        fw = framework or self.framework
        for name, raw in values.items():
            problem = value_problem(name, raw, istep)
            if problem is not None:
                raise InvalidSample(
                    f"run {self.name!r}: {problem}", step=step, name=name, value=raw
                )
            try:
                res = self.registry.resolve(name, fw)
            except ResolveError as exc:
                raise InvalidSample(
                    f"run {self.name!r}: {name!r} at step {istep}: {exc} (policy strict; "
                    f"with RLVITALS_POLICY=warn it would be stored under '{UNREGISTERED}')",
                    step=step,
                    name=name,
                    value=raw,
                ) from exc
            for member in several(raw) or [raw]:
                value = to_number(member)
                assert value is not None
                try:
                    canonical = res.transform.apply(value)
                except (ArithmeticError, ValueError):
                    continue
                problem = limits_problem(self.registry, res, name, canonical, istep)
                if problem is not None:
                    raise InvalidSample(
                        f"run {self.name!r}: {problem}", step=step, name=name, value=raw
                    )

    def _count_dropped(self, n: int) -> None:
        self._counters.drop("finished" if self._closed else "queue_full", n)
        if not self._drop_warned:
            self._drop_warned = True
            if self._closed:
                why = "it was finished"
            else:
                why = (
                    f"the queue to the worker is full: it holds {self._capacity} calls "
                    "(RLVITALS_QUEUE_SIZE); while it is full each new call is dropped and the "
                    "queued ones are kept"
                )
            reason = "finished" if self._closed else "queue_full"
            _log.warning(
                "rlvitals run %r: samples dropped because %s; counted in "
                "run.stats.dropped_by_reason[%r] and rlvitals_dropped_total{reason=%r} (this "
                "warning is given once)",
                self.name,
                why,
                reason,
                reason,
            )

    def _lost(self) -> int:
        c = self._counters
        with c.lock:
            return c.dropped + c.refused_disk

    def _backlog(self) -> int:
        """Rows not yet sent, read through the worker's connection (an `Outbox` is
        thread-safe): the one connection the run keeps open (see `__init__`); 0 while it has
        none."""
        return _safe_backlog(self._worker_outbox)

    def _open_outbox(self, *, quiet: bool) -> Outbox | None:
        try:
            return Outbox(self.settings.outbox_path, budget_bytes=self.settings.disk_budget_bytes)
        except OutboxError as exc:
            if not quiet:
                _log.error(
                    "rlvitals run %r: %s; samples wait in memory until it opens", self.name, exc
                )
            return None

    def _exception_event(self, what: str) -> None:
        """Queue the `exception` event of a crash at the step last logged: the worker reads it
        when it gets there (step None), since calls logged before may not be translated yet."""
        if not self._closed and len(self._queue) < self._capacity:
            self._queue.append(("event", None, "exception", what, {}, time.time()))

    def _on_uncaught(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._uncaught = exc
        hook = self._previous_hook or sys.__excepthook__
        hook(exc_type, exc, tb)

    def _restore_hook(self) -> None:
        if sys.excepthook == self._on_uncaught:
            sys.excepthook = self._previous_hook or sys.__excepthook__
        self._previous_hook = None
        if self._previous_sigterm is not None and _main_thread():
            with suppress(ValueError, OSError):
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def _catch_sigterm(self) -> None:
        """SIGTERM (a scheduler or launcher stopping the job) ends the process without atexit
        hooks by default, so what the worker had not stored was lost uncounted and the run
        never ended. Turned into `SystemExit(143)` in the main thread (`finally` blocks run,
        then the exit hook finishes the run as `ended`), when nobody else handles SIGTERM (or
        another run does: its handler is called too)."""
        if not _main_thread():
            return
        try:
            previous = signal.getsignal(signal.SIGTERM)
            if previous is signal.SIG_DFL or isinstance(getattr(previous, "__self__", None), Run):
                signal.signal(signal.SIGTERM, self._on_sigterm)
                self._previous_sigterm = previous
        except (ValueError, OSError):  # not the main interpreter, or no signals here
            return

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._signalled = signum
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)  # another run's: it ends the process in turn
        raise SystemExit(128 + signum)

    def _at_exit(self) -> None:
        exc = self._uncaught
        try:
            if self._signalled is not None:
                what = f"the process was stopped by {signal.Signals(self._signalled).name}"
                self.finish(self.settings.flush_timeout, state="ended", reason=what)
            elif exc is not None:
                what = f"uncaught {type(exc).__name__}: {exc}"[:500]
                self._exception_event(what)
                self.finish(self.settings.flush_timeout, state=_end_of(type(exc)), reason=what)
            else:
                # a recorded end (SB3's learn() returned) says more than the exit that followed
                self.finish(
                    self.settings.flush_timeout,
                    reason=self._marked
                    or "the process exited without an exception (finish() was not called)",
                )
        except Exception as exc:  # interpreter is exiting: report, never raise
            _log.warning("rlvitals run %r: flush at exit failed: %s", self.name, exc)

    def _report(self, reason: str, exc: BaseException | str) -> None:
        """Say once per reason what went wrong; the counts are in stats.dropped_by_reason."""
        if reason in self._reported:
            return
        self._reported.add(reason)
        what = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        _log.error(
            "rlvitals run %r: %s; what it concerned is counted in stats.dropped_by_reason[%r] "
            "(rlvitals_dropped_total{reason=%r}) and the exporter goes on",
            self.name,
            what,
            reason,
            reason,
        )

    def _ensure_worker(self) -> None:
        """The supervisor: start a new worker thread if the current one died."""
        with self._worker_lock:
            if self._closed or self._worker.is_alive():
                return
            self._report("worker_error", "the worker thread had stopped; restarted it")
            self._worker = threading.Thread(
                target=self._work, name=f"rlvitals-{self.name}", daemon=True
            )
            self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                self._work_once()
                return
            except _StoreGone:
                continue  # a new outbox at the same path; the run is recorded in it again
            except BaseException as exc:  # the thread must not die: count, report, go on
                with self._progress_lock:
                    batch, self._in_progress = self._in_progress, []
                    counted = self._given_up is not None and self._given_up[0] is batch
                    self._given_up = None
                lost = sum(_size(item) for item in batch if _is_sample(item))
                if not counted:  # (finish() counted it `unfinished` already)
                    self._counters.drop("worker_error", lost)
                for item in batch:
                    if isinstance(item, threading.Event):
                        item.set()
                self._report("worker_error", exc)
                if self._stop.is_set() and (self._closed or not self._queue):
                    return
                time.sleep(0.05)

    def _work_once(self) -> None:
        try:
            outbox = Outbox(self.settings.outbox_path, budget_bytes=self.settings.disk_budget_bytes)
        except OutboxError as exc:
            self._unopenable = str(exc)
            self._report("store_error", exc)
            if self._stop.wait(1.0) and not self._queue:
                return
            raise
        self._unopenable = None
        self._worker_outbox = outbox
        try:
            if not self._run_recorded:
                self._run_recorded = True
                self._start_run(outbox)
            interval = self.settings.commit_interval
            renew_at = time.monotonic() + self._lifecycle.renew_every_s
            while True:
                # Let a batch gather for up to the commit interval (a flush or finish wakes
                # the worker at once): a write costs a dozen trips to sqlite, each one a wait
                # for the GIL while a training loop holds it, so fewer, larger writes are what
                # keeps the worker's share of a training step small at any logging rate.
                small = self.queue_depth < _WORKER_BATCH
                if small and not self._stop.is_set() and self._wake.wait(interval):
                    self._wake.clear()
                renew_at = self._renew(outbox, renew_at)
                batch: list[_Item] = []
                taken = 0  # steps: a queued block counts its own
                with self._take_lock:  # finish() gives up the rest under it
                    while self._queue and taken < _WORKER_BATCH and not self._abandon:
                        item = self._take()
                        batch.append(item)
                        taken += _steps(item)
                if not batch:
                    if self._stop.is_set():
                        break
                    continue
                self._in_progress = batch
                wall, cpu = time.perf_counter(), time.thread_time()
                self._process(outbox, batch)
                interval = gather_interval(
                    self.settings.commit_interval,
                    time.perf_counter() - wall,
                    time.thread_time() - cpu,
                )
                with self._progress_lock:
                    self._in_progress = []
                    given_up, self._given_up = self._given_up, None
                if given_up is not None and given_up[0] is batch:
                    # stored or counted after finish() gave it up: not lost after all
                    self._counters.undrop("unfinished", given_up[1])
                if self._store_gone:
                    self._store_gone = False
                    self._run_recorded = False
                    outbox.close()
                    outbox.set_aside_stale_journal()
                    raise _StoreGone
        finally:
            self._worker_outbox = None
            outbox.close()

    def _renew(self, outbox: Outbox, due: float) -> float:
        """The lease's heartbeat, when due; when the next one is."""
        now = time.monotonic()
        if now < due:
            return due
        if self._claim_pending:  # still unrecorded: claiming is this beat
            self._finish_claim(outbox)
            return now + self._lifecycle.renew_every_s
        try:
            if self._lease_rank is not None:
                # the job's ranks on this host watch each other: a rank gone without an end
                # (kill -9, out of memory) is recorded crashed by those that outlive it
                outbox.reap_ranks(self.name, lease_ttl_s=self._lifecycle.lease_ttl_s)
            if not outbox.renew_lease(self.name, self._holder, self._lease_rank):
                self._report(
                    "lease_lost",
                    f"another process took over run {self.name!r} (this one looked dead to it)",
                )
        except (OutboxError, sqlite3.Error) as exc:
            self._report("store_error", exc)
        return now + self._lifecycle.renew_every_s

    def _finish_claim(self, outbox: Outbox) -> None:
        """Record the claim `init` could only read (the store was locked then): this run's row,
        its lease and its rank's place in the job, under the name it already logs to."""
        try:
            outbox.claim(
                self.name,
                resume=True,  # the name is decided: rows already queued carry it
                created=self._created,
                wait=5.0,
                holder=self._holder,
                kind=self._lease_kind,
                lease_ttl_s=self._lifecycle.lease_ttl_s,
                job=self.job if self._lease_rank is not None else None,
            )
        except RunHeld as exc:
            self._claim_pending = False  # a living writer holds it: say so once, not per beat
            self._report("lease_lost", exc)
        except OutboxError as exc:
            if not exc.retryable:
                self._claim_pending = False
            self._report("store_error", exc)
        else:
            self._claim_pending = False

    def _start_run(self, outbox: Outbox) -> None:
        if self._claim_pending:
            self._finish_claim(outbox)
        now = time.time()
        try:
            before = outbox.upsert_run(
                self.name, self.project, self._config, self.framework, self._created
            )
            rows: list[SampleRow] = []
            events: list[EventRow] = []
            if self._config:
                rows = config_rows(self.name, self.rank, self._config, now)
                if before is not None and before.config and dict(before.config) != self._config:
                    changed = sorted(
                        k
                        for k in set(before.config) | set(self._config)
                        if before.config.get(k) != self._config.get(k)
                    )
                    step = outbox.last_step(self.name, self.rank) or 0
                    events = self._translator.event(
                        step, "config_change", "config changed: " + ", ".join(changed), {}, now
                    )
            self._store(outbox, [_Part(rows, events, self._translator.take_held())])
        except ExporterError as exc:
            _log.error("rlvitals run %r: cannot record the run: %s", self.name, exc)

    def _process(self, outbox: Outbox, batch: list[_Item]) -> None:
        parts: list[_Part] = []
        markers: list[threading.Event] = []
        positions: list[SourcePosition] = []
        last_step = self._translator.last_step
        at_position: int | None = None
        one_by_one = 0  # calls before this one are not looked at for a block again
        i = 0
        while i < len(batch):
            item = batch[i]
            i += 1
            if isinstance(item, threading.Event):
                markers.append(item)
                continue
            if item[0] == "position":
                positions.append(item[1])
                at_position = self._translator.last_step
                continue
            if item[0] == "state":
                # what came before is stored first: its arrival must not undo the end
                step = at_position if self._sourced else self._translator.last_step
                done = (
                    [] if step is None or step == last_step else [(self.name, self._rank_key, step)]
                )
                self._store(outbox, parts, positions, done)
                parts, positions, last_step = [], [], step
                try:
                    outbox.record_state(self.name, item[1], item[2])
                except OutboxError as exc:
                    self._report("store_error", exc)
                continue
            if item[0] == "reap":
                try:
                    outbox.reap_ranks(self.name, lease_ttl_s=self._lifecycle.lease_ttl_s)
                except (OutboxError, sqlite3.Error) as exc:
                    self._report("store_error", exc)
                continue
            if item[0] == "writer":
                try:
                    outbox.set_writer(self.name, self._holder, item[1], item[2])
                except (OutboxError, sqlite3.Error) as exc:
                    self._report("store_error", exc)
                continue
            if item[0] == "config":
                self._config = item[1]
                rows = config_rows(self.name, self.rank, self._config, time.time())
                parts.append(_Part(rows, [], self._translator.take_held()))
                try:
                    outbox.upsert_run(self.name, None, self._config, None, self._created)
                except (OutboxError, sqlite3.Error) as exc:
                    self._report("store_error", exc)
                continue
            if item[0] == "sourced":
                self._translator.restart_from(outbox.last_step(self.name, self.rank, stored=False))
                last_step = self._translator.last_step
                continue
            if item[0] == "block":
                parts += self._translate_scalar_block(item[1], item[2])
                continue
            if item[0] == "log" and one_by_one <= i - 1:
                end = _same_names(batch, i - 1)
                if end - (i - 1) >= _BLOCK_AT_LEAST:
                    got = self._translate_block(batch[i - 1 : end])
                    if got is not None:
                        parts += got
                        i = end
                        continue
                    # these calls go one by one, without looking for a block among them again
                    # (a batch would cost the square of its length)
                    one_by_one = end
            try:
                if item[0] == "log":
                    r, e = self._translator.log(item[1], item[2], item[3], item[4])
                    r = [*r, *self._translator.take_transform_rows(item[3])]
                else:
                    at = self._translator.last_step if item[1] is None else item[1]
                    if at is None:
                        continue  # a crash's event before anything was logged: no step for it
                    r, e = [], self._translator.event(at, item[2], item[3], item[4], item[5])
            except Exception as exc:  # a bug here must not stop the worker, nor lose the batch
                self._translator.take_held()
                self._counters.drop("translate_error", len(item[2]) if item[0] == "log" else 1)
                self._report("translate_error", exc)
                continue
            parts.append(_Part(r, e, self._translator.take_held()))
        step = at_position if self._sourced else self._translator.last_step
        progress = [] if step is None or step == last_step else [(self.name, self._rank_key, step)]
        self._store(outbox, parts, positions, progress)
        # before a flush hears back: what went into a deleted or replaced file is lost
        self._store_gone = self._count_if_gone(outbox)
        for marker in markers:
            marker.set()

    def _count_if_gone(self, outbox: Outbox) -> bool:
        """Whether the outbox file was deleted or replaced under this connection; if so, what
        was stored through it is counted lost (`store_lost`): nothing reads that file again."""
        why = outbox.vanished()
        if why is None:
            return False
        lost, self._stored_here = self._stored_here, 0
        self._counters.drop("store_lost", lost)
        self._report(
            "store_lost",
            f"the outbox {outbox.path} was {why} while this run wrote to it: the {lost} "
            "sample(s) stored in it since it was opened are gone from the store (with InfluxDB "
            "configured, those already sent are there); a new outbox is started at the same path",
        )
        return True

    def _translate_block(self, items: list[_Item]) -> list[_Part] | None:
        """Log calls with the same names as columnar blocks (and, in their place, a part per
        call a block cannot take); None when their names cannot go as a block (the caller
        then takes every call one by one)."""
        calls = [item for item in items if not isinstance(item, threading.Event)]
        try:
            out = self._translator.log_calls(
                [c[1] for c in calls],
                [list(c[2].values()) for c in calls],
                list(calls[0][2]),
                [c[3] for c in calls],
                calls[0][4],
            )
        except Exception as exc:  # a bug here must not stop the worker: the slow path instead
            self._translator.take_held()
            self._report("translate_error", exc)
            return None
        if out is None:
            return None
        parts = [_Part(rows, events, held, block) for block, rows, events, held in out]
        noted = self._translator.take_transform_rows(calls[0][3])
        notices = self._translator.take_notices()
        # what is still held is the notices' count (each call's own went with its part)
        left = self._translator.take_held()
        if noted or notices or any(left):
            parts.append(_Part(noted, notices, left))
        return parts

    def _translate_scalar_block(self, block: ScalarBlock, now: float) -> list[_Part]:
        """A queued `log_block`: a part per columnar group (`FastSteps`), a part per step that
        goes through `Translator.log` (see `BlockTranslator.log_block`), in step order."""
        parts: list[_Part] = []
        done = 0  # steps of the block translated
        try:
            for item in self._translator.log_block(block, now):
                if isinstance(item, FastSteps):
                    self._translator.take_held()  # counted per group below
                    # the transforms record (when a name brought one) goes with the last group
                    noted = self._translator.take_transform_rows(float(item.walls[0]))
                    notices = self._translator.take_notices()
                    groups = item.sample_blocks()
                    for k, (sample_block, group) in enumerate(groups):
                        last = k == len(groups) - 1
                        rows = noted if last else []
                        held = (group.accepted, group.unregistered, len(notices) if last else 0)
                        parts.append(_Part(rows, notices if last else [], held, sample_block))
                    if (noted or notices) and not groups:
                        parts.append(_Part(noted, notices, (0, 0, len(notices))))
                    done += len(item.steps)
                else:
                    rows, events, wall = item
                    rows = [*rows, *self._translator.take_transform_rows(wall)]
                    parts.append(_Part(rows, events, self._translator.take_held()))
                    done += 1
        except Exception as exc:  # a bug here must not stop the worker, nor lose the batch
            self._translator.take_held()
            left = int(block.starts[-1] - block.starts[min(done, len(block))])
            self._counters.drop("translate_error", left)
            self._report("translate_error", exc)
        return parts

    def _store(
        self,
        outbox: Outbox,
        parts: list[_Part],
        positions: list[SourcePosition] | None = None,
        progress: list[tuple[str, int, int]] | None = None,
    ) -> None:
        """Store the parts (one per log call) in one transaction; when the store refuses it for
        what one of them holds, halve the batch until that call is isolated, so it alone is
        dropped (counted, reported once) and its neighbours are stored."""
        room = outbox.room() if outbox.budget_bytes is not None else None
        if room is not None and sum(p.stored for p in parts) > room:
            # the disk budget: store the calls that fit, measure again, go on with the rest;
            # what does not fit then is refused (and counted), and the store stays full
            fit, rest = _within(parts, room)
            if fit:
                self._store(outbox, fit)
                self._store(outbox, rest, positions, progress)
                return
            with self._counters.lock:
                self._counters.refused_disk += sum(p.size for p in rest)
            outbox.budget_reached()
            self._refused = True
            parts = []
        if self._refused and self._sourced:
            # Values read from logs were refused (they fit once the budget is raised or space
            # is freed): how far the files were read stays where it was before them, for good,
            # so the same import or tail run again reads them again (saved past them, it would
            # go on after a gap it never fills). What is stored after them is stored again then.
            positions = progress = None
        rows: list[SampleRow] = []
        blocks: list[tuple[int, SampleBlock]] = []
        for part in parts:
            if part.block is not None:
                blocks.append((len(rows), part.block))
            rows += part.rows
        events = [event for part in parts for event in part.events]
        if not rows and not blocks and not events and not positions and not progress:
            for part in parts:
                self._translator.count_stored(part.held)
            return
        try:
            stored = self._write_retrying(outbox, rows, events, positions, progress, blocks)
        except Exception as exc:
            if len(parts) == 1 and parts[0].block is not None and len(parts[0].block.steps) > 1:
                parts = parts[0].halves()  # a block is many calls: isolate the one refused
            if len(parts) > 1:
                half = len(parts) // 2
                self._store(outbox, parts[:half])
                self._store(outbox, parts[half:], positions, progress)
                return
            self._report("store_error", exc)
            for part in parts:
                self._counters.drop("store_error", part.size)
            if positions or progress:  # how far a file was read is still true
                with suppress(Exception):
                    self._write_retrying(outbox, [], [], positions, progress)
            return
        if not stored:
            with self._counters.lock:
                self._counters.refused_disk += sum(p.size for p in parts)
            self._refused = True
            return
        self._stored_here += sum(p.size for p in parts)
        self._stored_total += sum(sum(p.held[:2]) for p in parts)
        for part in parts:
            self._translator.count_stored(part.held)
        if not rows and not blocks and not events:
            return
        with self._counters.lock:
            if self._forwarder is None:
                self._counters.last_write = time.time()
        if self._forwarder is not None:
            self._forwarder.wake()

    def _write_retrying(
        self,
        outbox: Outbox,
        rows: list[SampleRow],
        events: list[EventRow],
        positions: list[SourcePosition] | None,
        progress: list[tuple[str, int, int]] | None,
        blocks: list[tuple[int, SampleBlock]] | None = None,
    ) -> bool:
        """Write; while another process holds the outbox's lock, wait and try again (until the
        run is finished) instead of dropping the batch."""
        while True:
            try:
                return outbox.write(
                    rows,
                    events,
                    positions=positions or (),
                    progress=progress or (),
                    blocks=blocks or (),
                )
            except OutboxError as exc:
                if not exc.retryable or self._stop.is_set():
                    raise
                if "outbox_locked" not in self._reported:
                    self._reported.add("outbox_locked")
                    _log.warning(
                        "rlvitals run %r: %s; waiting for the lock (nothing is dropped)",
                        self.name,
                        exc,
                    )
                self._stop.wait(1.0)


def _within(parts: list[_Part], room: int) -> tuple[list[_Part], list[_Part]]:
    """The first calls that fit in `room` rows, in order, and the rest; a block of many calls
    is halved until its first calls fit (an import's block can be thousands of steps)."""
    kept: list[_Part] = []
    waiting = list(parts)
    used = 0
    while waiting:
        part = waiting[0]
        if used + part.stored <= room:
            kept.append(waiting.pop(0))
            used += part.stored
        elif part.block is not None and len(part.block.steps) > 1:
            waiting[:1] = part.halves()
        else:
            break
    return kept, waiting


class _StoreGone(Exception):
    """The worker's outbox file was deleted or replaced: open the one now at its path."""


@dataclass(frozen=True)
class _Part:
    """What one log or event call became: its rows, events and the counts they stand for."""

    rows: list[SampleRow]
    events: list[EventRow]
    held: tuple[int, int, int]
    block: SampleBlock | None = None  # several calls' samples as columns, before `rows`

    @property
    def stored(self) -> int:
        """Rows it takes in the store."""
        return len(self.rows) + len(self.events) + (0 if self.block is None else self.block.size)

    @property
    def size(self) -> int:
        return sum(self.held) or self.stored

    def halves(self) -> list[_Part]:
        """A block's calls in two parts, each with the rows derived at its steps and its share
        of the counts (every call of a block counts the same)."""
        assert self.block is not None
        b = self.block
        n = len(b.steps)
        mid = n // 2
        cut = b.steps[mid]
        out: list[_Part] = []
        for lo, hi, rows in (
            (0, mid, [r for r in self.rows if r[2] < cut or r[3] == RUN_CONFIG]),
            (mid, n, [r for r in self.rows if r[2] >= cut and r[3] != RUN_CONFIG]),
        ):
            block = SampleBlock(
                b.run, b.rank, b.steps[lo:hi], b.wall_times[lo:hi], b.columns, b.values[lo:hi]
            )
            held = (
                self.held[0] * (hi - lo) // n,
                self.held[1] * (hi - lo) // n,
                self.held[2] * (hi - lo) // n,
            )
            out.append(_Part(rows, [], held, block))
        return out


def _same_names(batch: list[_Item], start: int) -> int:
    """The end of the run of log calls from `start` on that logged the same names in the same
    order, for the same framework."""
    first = batch[start]
    assert not isinstance(first, threading.Event)
    names = tuple(first[2])
    framework = first[4]
    end = start + 1
    while end < len(batch):
        item = batch[end]
        if (
            isinstance(item, threading.Event)
            or item[0] != "log"
            or item[4] != framework
            or len(item[2]) != len(names)
            or tuple(item[2]) != names
        ):
            break
        end += 1
    return end


def _start_forwarder(
    settings: ExporterSettings, counters: RunCounters
) -> Forwarder | ForwarderProcess | None:
    """The run's forwarder when InfluxDB is configured: a child process unless the settings say
    thread, or no process can be started here."""
    writer = make_writer(settings)
    if writer is None:
        return None
    if settings.forwarder == "process":
        child = ForwarderProcess(settings, counters)
        try:
            child.start()
        except OSError as exc:
            _log.warning(
                "rlvitals: cannot start the forwarder process (%s); forwarding on a thread", exc
            )
        else:
            writer.close()
            return child
    own = make_writer(settings)  # the rollups run on a thread of their own, with their own
    thread = Forwarder(
        settings.outbox_path,
        writer,
        counters,
        batch_size=settings.batch_size,
        rollups=None if own is None else make_rollups(settings, own),
    )
    thread.start()
    return thread


def _safe_backlog(outbox: Outbox | None) -> int:
    try:
        return 0 if outbox is None else outbox.backlog()
    except Exception:
        return 0


def _safe_oldest(outbox: Outbox | None) -> float | None:
    try:
        return None if outbox is None else outbox.backlog_oldest()
    except Exception:
        return None


def _safe_transforms(outbox: Outbox | None, run: str) -> dict[str, tuple[FieldTransform, ...]]:
    """What a resumed run's fields went through before (none when the store is unusable)."""
    if outbox is None:
        return {}
    try:
        return outbox.transforms(run)
    except Exception:
        return {}


def _safe_last_step(outbox: Outbox | None, run: str, rank: int | None) -> int | None:
    if outbox is None:
        return None
    try:
        return outbox.last_step(run, rank)
    except Exception:
        return None


def _end_of(exc_type: type[BaseException]) -> str:
    """The end an exception leaving the run records: Ctrl-C is the user stopping it (ended), any
    other exception a crash."""
    return "ended" if issubclass(exc_type, KeyboardInterrupt) else "crashed"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _alive(lease: Lease) -> bool:
    return True  # a process judging its own run


def _is_event(item: _Item) -> bool:
    return not isinstance(item, threading.Event) and item[0] == "event"


def _is_sample(item: _Item) -> bool:
    return not isinstance(item, threading.Event) and item[0] in ("log", "event", "block")


def _size(item: _Item) -> int:
    """Samples a queued log or event call (or a `log_block`) stands for."""
    if isinstance(item, threading.Event):
        return 1
    if item[0] == "block":
        return int(item[1].value_count)
    if item[0] != "log":
        return 1
    return len(item[2])


def _steps(item: _Item) -> int:
    """Steps a queued item stands for (what a worker batch is counted in)."""
    if not isinstance(item, threading.Event) and item[0] == "block":
        return len(item[1])
    return 1


def init(
    run: str,
    *,
    project: str | None = None,
    config: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
    settings: ExporterSettings | None = None,
    framework: str | None = None,
    rank: int | None = None,
    policy: str | None = None,
    endpoint: MetricsEndpoint | None = None,
    resume: bool = False,
) -> Run:
    """Start a run: open the outbox under RLVITALS_STORE and start the background threads.

    Run identity works as in TensorBoard and W&B: when the store already holds a run named
    `run`, this one is named `run-2` (then `run-3`, ...; `Run.name` says which) unless `resume`
    is true, which goes on with the stored run: its config, its steps, and a `resume` event when
    the first step logged is below the one it was last at (a restart from a checkpoint).

    The ranks of one job are one run (docs/ranks.md): `rank` (else the launcher's `RANK` or
    `SLURM_PROCID`, read now) makes this process that rank of its job, identified by the
    launcher (`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID`, `MASTER_ADDR:MASTER_PORT`) or the process
    that started the ranks; every rank of the job calling `init` with the same `run` joins one
    run, its rows keyed by rank. Another job under the same name still gets `run-2`.

    `registry` defaults to the built-in registry, `settings` to `ExporterSettings.from_env()` and
    `policy` to the settings' policy (`strict`, `warn` or `drop`). With `endpoint`, the run is
    served on that shared `/metrics` endpoint instead of starting its own on
    RLVITALS_PROMETHEUS_PORT (a sidecar following many runs serves them all on one port).
    """
    settings = settings if settings is not None else ExporterSettings.from_env()
    chosen = policy if policy is not None else settings.policy
    if chosen not in POLICIES:
        raise ConfigError(f"policy {chosen!r} is not one of {', '.join(POLICIES)}")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise ConfigError(f"rank {rank!r} must be a non-negative int or None")
    job = job_of(rank)
    return Run(
        run,
        project=project,
        config=config,
        registry=registry if registry is not None else registry_mod.load(),
        settings=settings,
        framework=framework,
        rank=job.rank,
        policy=chosen,
        endpoint=endpoint,
        resume=resume,
        job=job,
    )
