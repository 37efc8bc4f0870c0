"""Feed the Records of log sources into runs: one run per log folder (or one named run), the
framework detected from the keys when not given, and the run's queue never overrun.

Used by `rlvitals import` (one pass) and `rlvitals tail` (repeated passes). The caller builds the
`LogSet`, the settings and the registry and passes them in; this module prints nothing and
reports through `progress` and the returned summaries. With `direct`, runs are `DirectRun`s that
write straight to InfluxDB (see `direct.py` for when that keeps the durability contract).

Past 800 lines: `Ingest` is the one state machine per run that import, follow and the direct
catch-up share (a run's start, its records, its end); what it decides with lives beside it
(how a run ends: `followed_end.py`; its setting: `log_context.py`; its sketch: `sketch.py`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from registry import Registry

from ..config import ExporterSettings
from ..counts import RunStats
from ..errors import ConfigError, OutboxError, RunHeld
from ..influx.direct import DirectRun
from ..lease import Holder, this_process
from ..lifecycle import Lifecycle
from ..processes import writers_of
from ..prometheus.metrics_endpoint import MetricsEndpoint
from ..run import Run
from ..schema import CONFIG_SOURCES, SourcePosition
from ..sources import EndMark, LogFile, Record, ScalarBlock
from ..sources.console import console_header
from ..sources.discover import last_modified
from ..sources.follow import path_key
from ..sources.text_summaries import read_text_summaries
from ..store.outbox import Outbox
from ..translate.derive import StepDeriver
from ..translate.steps import LoggedValue
from .followed_end import (
    SCAN_EVERY,
    EndEvidence,
    WriterWatch,
    judge_followed,
    judge_gone,
    judge_quiet,
    part_name,
)
from .log_context import INFERRED, context_from_logs
from .sketch import SKETCHED, sketch_rows

__all__ = ["DETECT_SAMPLE", "Ingest", "RunSummary", "import_end"]

DETECT_SAMPLE = 200  # records looked at to detect a run's framework
SKETCH_BYTES = 16 << 20
"""A log with this much left to read gets a whole-run sketch first (`_sketch`): some 330,000
one-scalar events, or 3,000 verl console lines of 120 keys; 2 s or more to store."""
_log = logging.getLogger(__name__)
_CONFIG_FACTS = ("step_source",)  # facts of a log kept in its run's config
_WANDB_CONSOLE = Path("files", "output.log")
_ROOM_CHECK_EVERY = 256
_BLOCK_SLICE = 2048
"""Steps of a `ScalarBlock` handed to a run at a time: about one worker batch (a transaction),
so the queue's bound (counted in steps) holds and the worker never waits for a whole read."""


@dataclass
class RunSummary:
    """What one run received: steps and values read, files, and the framework used."""

    name: str
    framework: str | None = None
    detected: bool = False
    steps: int = 0
    values: int = 0
    files: set[str] = field(default_factory=set)
    stats: RunStats | None = None
    renamed_from: str | None = None
    """The name asked for, when a run of that name was already in the store."""
    follows: str | None = None
    """The run whose log this one's training came later in (`Record.part`)."""
    config: dict[str, Any] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    """Every name the run logged (how many the registry recognised is said at the end)."""
    last_step: int | None = None
    """The step counted last: a step whose values come in two reads (a log followed while it
    is written) or from two files is one step, counted once."""

    def count_steps(self, first: int, last: int, count: int) -> None:
        """`count` steps read, in order, from `first` to `last` (each differing from the one
        before it)."""
        self.steps += count - (first == self.last_step)
        self.last_step = last


class _Sink(Protocol):
    """What a run is to the ingest: a `Run`, or a `DirectRun` for a direct import."""

    name: str

    def log(
        self, step: int, values: Mapping[str, LoggedValue], *, wall_time: float | None = None
    ) -> None: ...

    def log_block(self, block: ScalarBlock) -> None: ...

    def save_position(self, position: SourcePosition) -> None: ...

    def learn_config(self, config: Mapping[str, Any]) -> None: ...

    @property
    def queue_depth(self) -> int: ...

    def wake(self) -> None: ...

    @property
    def stats(self) -> RunStats: ...

    def flush(self, timeout: float = 10.0, *, sent: bool = True) -> bool: ...

    def finish(
        self,
        timeout: float = 10.0,
        *,
        state: str | None = ...,
        reason: str | None = None,
        at: float | None = None,
    ) -> None: ...


@dataclass
class _RunState:
    summary: RunSummary
    run: _Sink | None = None
    pending: list[Record] = field(default_factory=list)
    positions: list[SourcePosition] = field(default_factory=list)
    last_activity: float | None = None
    """When the run's logs last grew, on this reader's clock: the files' modification time for
    what was there when first read, the time of reading for what came later (never the
    trainer's own `wall_time`, which a skewed clock or a log without times would falsify)."""
    grew: bool = False
    """This reader saw the logs grow after it first read them (history already quiet at the
    first read is ended at once, and never pages)."""
    grew_since_look: bool = False
    """The logs grew since the last look at their writer (`WriterWatch`)."""
    evidence: EndEvidence = field(default_factory=EndEvidence)
    """What the logs and their writer's process say about the run's end."""
    looked: bool = False
    """Its writer was searched for since it was first read (logs quiet when first read are
    history only when no process holds them open for writing: a hung job the reader met)."""
    ended: bool = False
    """Finished by `finish_idle`: if its logs grow again, it resumes under its own name."""
    followed_by: str | None = None
    """The run a later training in the same log is read into (`Record.part`): this one is
    over."""
    handed_over: bool = False
    """Caught up through the direct path (`hand_over`): it goes on through the outbox with the
    framework and run context it had."""
    earlier: RunStats | None = None
    """What the run's catch-up counted, added to its final stats."""
    deriver: StepDeriver | None = None
    """The catch-up's derived-metrics state, for the run going on from it."""
    texts: dict[str, str] = field(default_factory=dict)
    facts: list[Callable[[], Mapping[str, Any]]] = field(default_factory=list)
    """What reading each of its files established (a console log's step rule, its closing
    summary), asked when the run starts and when it ends."""

    known: dict[str, Any] = field(default_factory=dict)
    """What they established by the end of the last read (a reader's files may be closed)."""
    sketched: set[str] = field(default_factory=set)
    """Its files a whole-run sketch was considered for (`_sketch`), read or not."""
    sketch: bool = False
    """It has a sketch in the store (dropped once the run is stored: `finish`)."""
    decided: tuple[int, int] = (0, 0)
    """How many names and texts its run config was last decided from (`_learn`)."""

    def learned(self) -> dict[str, Any]:
        out = dict(self.known)
        for facts in self.facts:
            out.update(facts())
        return out


class Ingest:
    """Routes records to runs, starting each run once its framework is known."""

    def __init__(
        self,
        *,
        registry: Registry,
        settings: ExporterSettings,
        run_name: str | None = None,
        project: str | None = None,
        framework: str | None = None,
        on_run_start: Callable[[RunSummary], None] | None = None,
        direct: bool = False,
        endpoint: MetricsEndpoint | None = None,
        resume: bool | Callable[[str], bool] = False,
        config: Mapping[str, Any] | None = None,
        follow: bool = False,
    ) -> None:
        """`resume` (true, or true for a run name) goes on with a run of that name already in
        the store; otherwise such a run gets a new name (`name-2`), as `exporter.init` does.
        `config`: the user's run config (`--config`/`--set`); it overrides what each run's logs
        say about its setting (see `log_context.py`), and both are stored with the run."""
        if direct and not settings.influx_url:
            raise ConfigError("a direct import needs InfluxDB configured (RLVITALS_INFLUX_URL)")
        self._direct = direct
        self._registry = registry
        self._settings = settings
        self._run_name = run_name
        self._project = project
        self._framework = framework
        self._on_run_start = on_run_start
        self._endpoint = endpoint
        self._resume = resume
        self._runs: dict[str, _RunState] = {}
        self._since_check = 0
        self._stuck: set[str] = set()  # runs not waited for: their queue stopped going down
        self._config = dict(config or {})
        self._follow = follow
        self._read: set[str] = set()  # files read at least once
        self._last_fed: str | None = None  # the run the last feed() logged records to
        self._renamed: dict[str, str] = {}
        # the writer of a log that grew is looked for at least four times in a stall window
        self._writers = WriterWatch(min(SCAN_EVERY, settings.lifecycle.stall_after_s / 4))
        self._writers_at_start: dict[str, Holder] | None = None

    @property
    def summaries(self) -> list[RunSummary]:
        return [state.summary for state in self._runs.values()]

    @property
    def runs(self) -> list[_Sink]:
        return [state.run for state in self._runs.values() if state.run is not None]

    def run_name(self, log: LogFile) -> str:
        name = self._run_name or log.run
        return self._renamed.get(name, name)

    def look_for_writers(self, paths: Collection[Path]) -> None:
        """Before a follower's first pass: which processes write these logs now, in one search
        (a log quiet when first read, held open by a process that still runs, is a hung job
        the follower met, not history)."""
        if not self._follow:
            return
        host = this_process().host
        found = writers_of([str(p) for p in paths])
        self._writers_at_start = {str(p): Holder(-1, host, None) for p in paths}
        for path, writers in found.items():
            first = min(writers, key=lambda w: w.pid)
            self._writers_at_start[path] = Holder(first.pid, host, first.started)

    def follow_renames(self, renamed: Mapping[str, str]) -> None:
        """Runs renamed since their logs were read (`rlvitals runs rename`): the name their
        logs give (folder or `--run`) -> the name they have now, which they go on under."""
        self._renamed = dict(renamed)

    def feed(
        self,
        log: LogFile,
        records: Iterable[Record | ScalarBlock | SourcePosition | EndMark],
        *,
        facts: Callable[[], Mapping[str, Any]] | None = None,
    ) -> int:
        """Log one file's new records into its run; returns how many records were read. A
        `ScalarBlock` counts as the records it holds (a direct run logs it as columns); a
        `SourcePosition` among them is saved with what came before it; an `EndMark` (a console
        log's traceback or closing line) is kept as evidence of how the run ended. `facts`:
        what reading the file establishes about the run (`LogSet.facts`), asked when it starts
        and ends."""
        name = self.run_name(log)
        judged = self._last_fed
        if judged is not None and judged != name:
            self._last_fed = None
            # The reader moved on to another run: judge the one it left now, not only at the
            # end of the pass. History read early in a long first pass (a folder of many old
            # runs) would otherwise be served, and stored with this reader's lease, for as long
            # as the pass goes on: stalled once that passed `stall_after_s`, and paged.
            self.finish_idle(self._settings.lifecycle, time.time(), runs=(judged,))
        base, part = name, 0
        state = self._state_of(log, name, facts)
        summary = state.summary
        arrival = self._arrival(log)
        count = 0
        for record in records:
            if isinstance(record, SourcePosition):
                self.save_position(log, record)
                continue
            if isinstance(record, EndMark):
                state.evidence.mark(record, str(log.path))
                continue
            if record.part != part:
                # a later training in this log (its steps started again): a run of its own,
                # which ends the one before it
                self._read_so_far(state, facts)
                part, earlier = record.part, state
                name = part_name(base, part)
                state = self._state_of(log, name, facts, part=part)
                summary = state.summary
                if earlier is not state and earlier.followed_by is None:
                    earlier.followed_by = name
                if summary.follows is None and earlier is not state:
                    summary.follows = earlier.summary.name
            if not isinstance(record, ScalarBlock) or len(record):
                state.followed_by = None  # logging again (as after its log was truncated): live
            if isinstance(record, ScalarBlock):
                count += len(record)
                if len(record):
                    self._grew(state, arrival)
                    state.evidence.block(record, str(log.path))
                self._feed_block(log, state, record)
                continue
            count += 1
            self._grew(state, arrival)
            state.evidence.record(record, str(log.path))
            summary.count_steps(record.step, record.step, 1)
            summary.values += len(record.values)
            summary.names.update(record.values)
            if state.run is None:
                state.pending.append(record)
                if len(state.pending) >= DETECT_SAMPLE or state.handed_over:
                    self._start(state)
                continue
            self._log(state.run, record)
        self._read_so_far(state, facts)
        if count and self._follow and not self._direct:  # a catch-up's runs are handed over
            self._last_fed = base  # (its later trainings' runs are judged with the pass)
        return count

    def _state_of(
        self,
        log: LogFile,
        name: str,
        facts: Callable[[], Mapping[str, Any]] | None,
        *,
        part: int = 0,
    ) -> _RunState:
        """The state of run `name`, which `log` (or its training `part`) is read into; the
        first time the log is: its writer known before the first pass, what it says of the run
        beside its metrics."""
        state = self._runs.get(name)
        if state is None:
            state = self._runs[name] = _RunState(RunSummary(name))
        summary = state.summary
        known = (
            None if self._writers_at_start is None else self._writers_at_start.get(str(log.path))
        )
        if known is not None and str(log.path) not in summary.files:
            state.looked = True  # searched for before the first pass
            if known.pid > 0 and state.evidence.writer is None:
                state.evidence.writer, state.evidence.writer_open = known, True
        if str(log.path) not in summary.files:
            if log.format == "tensorboard":
                for tag, text in read_text_summaries(log.path).items():
                    state.texts.setdefault(tag, text)
            elif log.format == "console" and part == 0:
                # (a later training's setting is not in the log's head: unknown, not the first's)
                state.texts.setdefault("console", console_header(log.path))
            elif log.format == "wandb" and (log.path.parent / _WANDB_CONSOLE).is_file():
                # the console the W&B run captured: what it printed before its metrics
                # (verl's config dump, the Trainer's banner); its metrics are in the history
                state.texts.setdefault("console", console_header(log.path.parent / _WANDB_CONSOLE))
            if facts is not None:
                state.facts.append(facts)
        summary.files.add(str(log.path))
        return state

    def _read_so_far(self, state: _RunState, facts: Callable[[], Mapping[str, Any]] | None) -> None:
        """What the read established about the run, kept; its config decided again."""
        if facts is not None:
            state.known.update(facts())
        self._learn(state)

    def _arrival(self, log: LogFile) -> tuple[float, bool]:
        """(when this file's new records arrived, whether they are new to this reader): its
        modification time on the first read (what it held was written then or earlier), now
        on later reads."""
        key = str(log.path)
        if key in self._read:
            return time.time(), True
        self._read.add(key)
        return last_modified(log) or time.time(), False

    @staticmethod
    def _grew(state: _RunState, arrival: tuple[float, bool]) -> None:
        at, new = arrival
        state.last_activity = at if state.last_activity is None else max(state.last_activity, at)
        state.grew = state.grew or new
        state.grew_since_look = state.grew_since_look or new

    def _feed_block(self, log: LogFile, state: _RunState, block: ScalarBlock) -> None:
        if not len(block):
            return
        state.summary.count_steps(int(block.steps[0]), int(block.steps[-1]), len(block))
        state.summary.values += block.value_count
        state.summary.names.update(block.names)
        if state.run is None:
            # the detection sample is made of Records, as when they come one by one
            take = 0 if state.handed_over else min(len(block), DETECT_SAMPLE - len(state.pending))
            state.pending += block.slice(0, take).records()
            if len(state.pending) < DETECT_SAMPLE and not state.handed_over:
                return
            self._start(state)
            block = block.slice(take, len(block))
        run = state.run
        assert run is not None
        if isinstance(run, DirectRun):
            run.log_block(block)
        else:
            sketch = log.format in SKETCHED and str(log.path) not in state.sketched
            # in slices of about a worker batch, waiting for room before each as `_log` does
            for lo in range(0, len(block), _BLOCK_SLICE):
                self._room(run)
                run.log_block(block.slice(lo, min(len(block), lo + _BLOCK_SLICE)))
            if sketch:
                # after the first steps are handed over: the worker stores them while the
                # sketch is read (1-2 s for a long console log, which the store waited for)
                state.sketched.add(str(log.path))
                self._sketch(log, state, block)
        if block.position is not None:
            run.save_position(replace(block.position, path=path_key(log.path)))

    def _sketch(self, log: LogFile, state: _RunState, block: ScalarBlock) -> None:
        """Before a long log's steps go to the store (an event file's, a console log's: one of
        `SKETCHED`), a sample of the steps it holds past this block, spread over the rest of the
        file and translated as the run's own rows are, kept as the run's sketch
        (`exporter.store.preview`): a chart of the whole run is drawn from it while every value
        is being stored. A console log, read from its start every time (`LineFileSource.resume`)
        and marking its read position only every `linefile.MARK_EVERY` lines, is sampled from
        its start. A file with less left to read than `SKETCH_BYTES` gets none (it is stored in
        about a second); a sketch that cannot be read or kept is skipped (said at debug level):
        the import goes on the same."""
        at = block.position.offset if block.position is not None else None
        if at is None and log.format == "console":
            at = 0
        try:
            size = os.stat(log.path).st_size
        except OSError:
            return
        if at is None or size - at < SKETCH_BYTES:
            return
        summary = state.summary
        try:
            rows = sketch_rows(
                self._registry,
                log.path,
                at,
                size,
                run=summary.name,
                framework=summary.framework,
                config=summary.config,
                policy=self._settings.policy,
                format=log.format,
            )
            with Outbox(self._settings.outbox_path) as box:
                box.write_preview(summary.name, rows)
            state.sketch = True
        except (OSError, OutboxError) as exc:
            _log.debug("rlvitals: no sketch of %s: %s", log.path, exc)

    def save_position(self, log: LogFile, position: SourcePosition) -> None:
        """Store how far `log` was read, together with the samples read before it (a run not
        started yet keeps it until it starts)."""
        state = self._runs.get(self.run_name(log))
        if state is None:
            return
        if state.run is None:
            state.positions.append(position)
        else:
            state.run.save_position(position)

    @property
    def direct(self) -> bool:
        """Whether runs started from here write straight to InfluxDB (see `hand_over`)."""
        return self._direct

    def hand_over(self, timeout: float) -> list[str]:
        """End the catch-up of a `tail`: finish every direct run (call `flush` first, so what
        it read is in InfluxDB and its read positions are stored) and go on through the
        outbox. Each run goes on under its own name, framework, run context and derived
        metrics' state as soon as its logs grow. Returns the runs' names."""
        self.settle()
        names = []
        deadline = time.monotonic() + timeout
        for state in self._runs.values():
            run = state.run
            if not isinstance(run, DirectRun):
                continue
            run.keep_transforms()
            run.finish(max(0.1, deadline - time.monotonic()), state=None)
            if run.failure is None:
                state.earlier = run.stats
                state.deriver = run.deriver
            # else: what InfluxDB did not take is read again from the stored positions
            state.run = None
            state.handed_over = True
            names.append(state.summary.name)
        self._direct = False
        return names

    def settle(self) -> None:
        """Start every run still waiting for a detection sample (end of a pass over the logs)."""
        for state in self._runs.values():
            if state.run is None and state.pending:
                self._start(state)

    def flush(self, timeout: float, *, sent: bool = True) -> bool:
        """Wait for every run's samples to be stored (and, with `sent` and InfluxDB configured,
        sent)."""
        self.settle()
        deadline = time.monotonic() + timeout
        return all(run.flush(max(0.0, deadline - time.monotonic()), sent=sent) for run in self.runs)

    def finish_idle(
        self,
        lifecycle: Lifecycle,
        now: float,
        timeout: float = 10.0,
        *,
        runs: Collection[str] | None = None,
    ) -> list[str]:
        """Look at each followed run's writer and record the end its evidence gives
        (`followed_end.py`): once its writer is gone, how it went; once its logs are quiet for
        `lifecycle.stall_after_s` with no writer seen running and holding them, what the logs
        say (a closing record, the planned length, a traceback), else nothing (the run reads
        quiet). Also `ended`: history already quiet for `stall_after_s` when this reader first
        read it (it never pages), logs quiet for `lifecycle.ended_after_s` after growing while
        no writer holds them, and logs that are all gone. An ended run's gauges leave /metrics;
        new lines in its logs start it again. `runs`: judge only these."""
        chosen = {
            name: state
            for name, state in self._runs.items()
            if (runs is None or name in runs)
            and state.run is not None
            and state.last_activity is not None
        }
        if self._follow:  # the search for new writers waits for a full look, once a pass
            self._look_at_writers(chosen, now, scan=runs is None)
        ended = []
        for name, state in chosen.items():
            assert state.run is not None and state.last_activity is not None
            evidence = state.evidence
            config = state.summary.config
            files = state.summary.files
            gone = bool(files) and not any(Path(f).exists() for f in files)
            quiet = now - state.last_activity
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.last_activity))
            holding = evidence.writer is not None and evidence.gone_at is None
            holding = holding and evidence.writer_open
            at: float | None = state.last_activity
            if state.followed_by is not None:
                # another training began in its log: what its logs say of its end, else ended
                end, reason = judge_quiet(evidence, config) or judge_followed(
                    evidence, state.followed_by
                )
            elif evidence.gone_at is not None and evidence.gone_at < now:
                # seen gone at an earlier look: what it wrote before going has been read since
                end, reason = judge_gone(evidence, config, state.summary.framework)
                at = evidence.gone_at
            elif evidence.gone_at is not None:
                continue  # judged at the next look
            elif gone:
                end, reason = "ended", "its log files were deleted"
            elif holding:
                continue  # its writer runs and holds them: live, or stalled (Lifecycle)
            elif quiet >= lifecycle.stall_after_s and (said := judge_quiet(evidence, config)):
                end, reason = said
            elif not state.grew and quiet >= lifecycle.stall_after_s:
                end, reason = (
                    "ended",
                    (
                        f"its logs were already quiet when this reader first read them (last "
                        f"written {when}); they do not record how the run ended"
                    ),
                )
            elif quiet >= lifecycle.ended_after_s:
                end, reason = (
                    "ended",
                    (f"its logs have not grown since {when}; they do not record how the run ended"),
                )
            else:
                continue
            # Let the worker store the run's backlog first (the reader may wait; it does for
            # room in the queue too): a finish() timing out on a large one recorded the end,
            # and the worker's later writes then undid it (a run logging again is live again).
            # A backlog that does not go down meanwhile (a long catch-up under load: `serve` on
            # an old verl log, each write of 2,000 steps x 120 keys taking over `_STUCK_AFTER`)
            # is judged at the next look: finishing now dropped what `timeout` did not store.
            if not _wait_for_room(state.run, 0):
                continue
            state.run.finish(timeout, state=end, reason=reason, at=at if end != "ended" else None)
            state.summary.stats = _plus(state.earlier, state.run.stats)
            state.earlier = None
            state.run = None
            state.ended = True
            state.grew = False
            state.evidence = EndEvidence()
            ended.append(name)
        return ended

    def _look_at_writers(self, runs: Mapping[str, _RunState], now: float, *, scan: bool) -> None:
        """Find and check the processes writing the followed runs' logs; tell each run."""
        searched = self._writers.look(
            {
                name: (
                    state.evidence,
                    state.summary.files,
                    state.grew_since_look or not state.looked,
                )
                for name, state in runs.items()
            },
            now,
            scan=scan,
        )
        for name, state in runs.items():
            state.looked = state.looked or name in searched
            state.grew_since_look = False
            if isinstance(state.run, Run):
                state.run.observe_writer(state.evidence.writer, state.evidence.writer_open)

    def failure(self) -> str | None:
        """Why a run stopped for good (a direct import whose InfluxDB stayed unreachable)."""
        for run in self.runs:
            why = getattr(run, "failure", None)
            if why:
                return str(why)
        return None

    def finish(self, timeout: float, *, complete: bool = True) -> None:
        """Finish every run. An import records how each ended (`finished` when its logs close
        it or reach its planned length, `crashed` when they end with a traceback, else
        `ended`), or, when it did not `complete`, leaves it `importing` (incomplete: the same
        command goes on with it); a tail records no end (it only stops watching)."""
        self.settle()
        deadline = time.monotonic() + timeout
        for state in self._runs.values():
            if state.run is not None:
                end, why = self._end(state, complete)
                # a crash read from old logs happened when they were last written, not now
                at = state.last_activity if end == "crashed" else None
                state.run.finish(
                    max(0.1, deadline - time.monotonic()), state=end, reason=why, at=at
                )
                state.summary.stats = _plus(state.earlier, state.run.stats)
                if state.sketch:
                    self._drop_sketch(state)
            elif state.summary.stats is None and state.earlier is not None:
                state.summary.stats = state.earlier

    def _drop_sketch(self, state: _RunState) -> None:
        """The run's sketch gone once its rows are in (a reader shows stored rows where both
        reach, so one left behind only costs room)."""
        try:
            with Outbox(self._settings.outbox_path) as box:
                box.drop_preview(state.summary.name)
            state.sketch = False
        except OutboxError as exc:
            _log.debug("rlvitals: sketch of run %r kept: %s", state.summary.name, exc)

    def _end(self, state: _RunState, complete: bool) -> tuple[str | None, str | None]:
        if self._follow:
            return None, None
        if not complete:
            return "importing", (
                "the import stopped before it was complete (SIGTERM, Ctrl-C, or not everything "
                "it read was stored); running the same command again goes on with this run"
            )
        said = judge_quiet(state.evidence, state.summary.config)
        if said is not None:
            return said
        if state.followed_by is not None:
            return judge_followed(state.evidence, state.followed_by)
        return import_end(
            state.summary.config, getattr(state.run, "last_step", None), state.learned()
        )

    def _start(self, state: _RunState) -> None:
        summary = state.summary
        if state.handed_over:
            framework = summary.framework
            config = summary.config
            resume = True
        else:
            framework = self._framework
            if framework is None:
                names = {name for record in state.pending for name in record.values}
                framework = self._registry.detect_framework(sorted(names))
                summary.detected = framework is not None
            summary.framework = framework
            resume = self._resume(summary.name) if callable(self._resume) else self._resume
            # A run this ingest ended (quiet past the lifecycle's limit) that logs again is the
            # same run going on, never a new one under a new name.
            resume = resume or state.ended
            config = summary.config = self._decide_config(state)
        try:
            if self._direct:
                state.run = DirectRun(
                    summary.name,
                    project=self._project,
                    registry=self._registry,
                    settings=self._settings,
                    framework=framework,
                    resume=resume,
                    config=config,
                )
            else:
                run = Run(
                    summary.name,
                    project=self._project,
                    config=config or None,
                    registry=self._registry,
                    settings=self._settings,
                    framework=framework,
                    rank=None,
                    policy=self._settings.policy,
                    endpoint=self._endpoint,
                    resume=resume,
                    deriver=state.deriver,
                    lease_kind="tail" if self._follow else "import",
                )
                state.deriver = None
                run.follow_sources()
                state.run = run
        except (RunHeld, ConfigError):
            # another live process writes this run, or its name cannot be stored: refused (the
            # caller says so); what was read for it is not tried again at the next settle
            state.pending, state.positions = [], []
            raise
        if state.run.name != summary.name:
            summary.renamed_from = summary.name
            summary.name = state.run.name
        if self._on_run_start is not None and not state.handed_over:
            self._on_run_start(summary)
        pending, state.pending = state.pending, []
        for record in pending:
            self._log(state.run, record)
        positions, state.positions = state.positions, []
        for position in positions:
            state.run.save_position(position)

    def _decide_config(self, state: _RunState) -> dict[str, Any]:
        """The run config: what the logs read so far establish about the run's setting
        (`context_from_logs`, from every name read and every text summary of its files), under
        what the user gave (`--config`/`--set`), with where each key came from. One decision
        for every reader: an import decides it from the file read whole, a follower from what
        the file held when it started, and again as it grows (`_learn`), so both end at the
        same config."""
        summary = state.summary
        learned = state.learned()
        tracker = learned.get("tracker_config")
        from_logs = {
            **context_from_logs(
                summary.framework,
                summary.names,
                state.texts,
                tracker=tracker if isinstance(tracker, Mapping) else None,
            ),
            **{k: v for k, v in learned.items() if k in _CONFIG_FACTS},
        }
        config = {**from_logs, **self._config}
        # where each key came from, for whoever reads the config (the run page marks
        # inferred ones); a framework given with --framework was not inferred
        sources = {
            k: "inferred" if k in INFERRED else "logs"
            for k in from_logs
            if k not in self._config and not (k == "framework" and not summary.detected)
        }
        if sources:
            config[CONFIG_SOURCES] = sources
        state.decided = (len(summary.names), len(state.texts))
        return config

    def _learn(self, state: _RunState) -> None:
        """Decide a started run's config again when its logs hold names or texts it was not
        decided from (SB3 logs `train/` names from its second update on; a file added to the
        run brings its own text summaries), and store it when it changed: a run followed from
        its first lines ends with the config an import of its finished logs gives it."""
        summary = state.summary
        if state.run is None or state.decided == (len(summary.names), len(state.texts)):
            return
        config = self._decide_config(state)
        if config != summary.config:
            summary.config = config
            state.run.learn_config(config)

    def _log(self, run: _Sink, record: Record) -> None:
        self._since_check += 1
        if self._since_check >= _ROOM_CHECK_EVERY:
            self._since_check = 0
            self._room(run)
        run.log(record.step, record.values, wall_time=record.wall_time)

    def _room(self, run: _Sink) -> None:
        """Wait while the run's queue is over half full (see `_wait_for_room`)."""
        if run.name not in self._stuck:
            if not _wait_for_room(run, self._settings.queue_size):
                self._stuck.add(run.name)
        elif run.queue_depth <= self._settings.queue_size // 2:
            self._stuck.discard(run.name)  # it moves again


def import_end(
    config: Mapping[str, Any], last: object, facts: Mapping[str, Any] | None = None
) -> tuple[str, str]:
    """(state, reason) an import that read a run's logs to their end records: `finished` when
    they reach its planned length (`planned_steps` of its run config) or the tracker recorded a
    normal end (`facts`' `closed`), else `ended`. (A console log's closing line or traceback is
    judged before this, from its `EndMark`s: `followed_end.judge_quiet`.)"""
    closed = facts.get("closed") if facts else None
    if isinstance(closed, str):  # a tracker's own record of a normal end
        return "finished", closed
    planned = config.get("planned_steps")
    if isinstance(planned, int) and isinstance(last, int) and last >= planned > 0:
        return "finished", f"its logs reach the planned length ({planned:,} steps)"
    at = f" at step {last:,}" if isinstance(last, int) else ""
    return "ended", f"imported from its logs, which end{at} without recording how the run ended"


def _plus(earlier: RunStats | None, later: RunStats) -> RunStats:
    """The counts of a run's catch-up and of its following, together."""
    if earlier is None:
        return later
    out: dict[str, Any] = {}
    for name in RunStats.__dataclass_fields__:
        a, b = getattr(earlier, name), getattr(later, name)
        if isinstance(a, Mapping):
            merged = dict(a)
            for key, value in b.items():
                merged[key] = merged.get(key, 0) + value
            out[name] = merged
        else:
            out[name] = a + b
    return RunStats(**out)


_STUCK_AFTER = 5.0  # seconds without the queue going down: the run is stuck


def _wait_for_room(run: _Sink, capacity: int) -> bool:
    """Block the reader (never the training: this is the sidecar) while the run's queue is
    more than half full, so a large import is never dropped for a full queue. A run whose queue
    does not go down for `_STUCK_AFTER` seconds is not waited for (its overflow is counted as
    dropped), so one stuck run cannot stall every other run a tail follows."""
    limit = max(1, capacity // 2)
    depth = run.queue_depth
    if depth > limit:
        # the worker may be letting a small batch gather for the commit interval (no training
        # loop here to spare): this reader waits on it, so it goes at once (a folder's many
        # small runs, each finished when the reader moves on, waited 0.1-0.3 s each)
        run.wake()
    since = time.monotonic()
    while depth > limit:
        time.sleep(0.002)
        now_depth = run.queue_depth
        if now_depth < depth:
            since = time.monotonic()
        elif time.monotonic() - since > _STUCK_AFTER:
            return False
        depth = now_depth
    return True
