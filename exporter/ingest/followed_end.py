"""How a followed run ended, from what its logs and the process writing them say.

A follower (`rlvitals tail --follow`, `serve LOGDIR`) is not the trainer: it knows what the logs
hold and, on its own host, which process writes them. What it keeps per run (`EndEvidence`):

- from the logs: a known trainer's **closing record** (`sources.run_end`: the HF Trainer's last
  log, verl's final line), the **planned length** reached (`planned_steps` of the run context), a
  **traceback** in a console log not followed by more training, the last step's values
  **non-finite**;
- from the process table (`processes.py`): the **writer** (a process holding one of the run's logs
  open for writing), whether it still **holds** them, whether it **closed** them while it ran,
  and, once it is gone, how it **exited** when that can still be read (a zombie's status).

`judge_gone` says how a run ended once its writer is gone; `judge_quiet` what the logs alone say
once they stopped growing with no writer seen. Where nothing tells a normal exit from a kill (an
SB3 or CleanRL log, which write no closing record, from a process already reaped), the end is
`ended` with that said, never a guess either way.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lease import Holder
from ..processes import Exit, describe_exit, holds_for_writing, process_state, writers_of
from ..sources import EndMark, Record, ScalarBlock, closing_record

__all__ = [
    "SCAN_EVERY",
    "EndEvidence",
    "WriterWatch",
    "judge_followed",
    "judge_gone",
    "judge_quiet",
    "part_name",
]

SCAN_EVERY = 10.0
"""Seconds between two searches of the process table for the writers of logs that grew (one
pass over every process's open files); a known writer is checked at every look."""
MISSED_BACKOFF = 6
"""Searches' time before a run whose writer was not found is searched for again."""
_CLOSING_FRAMEWORKS = frozenset({"trl"})
"""Frameworks whose trainer writes a closing record when training ends (TRL runs on the HF
Trainer): from them, a writer gone without one was stopped."""


@dataclass
class EndEvidence:
    """What a follower knows about one run's end (see the module's docstring)."""

    closing: str | None = None
    closing_step: int | None = None
    closing_log: str | None = None
    """The log the closing record was read from: only training read after it in that same log
    says the run went on (a run's other logs, read after it, hold its earlier steps)."""
    crash: EndMark | None = None
    last_step: int | None = None
    nonfinite_step: int | None = None
    writer: Holder | None = None
    writer_open: bool = False
    closed_alive: bool = False
    """The writer was seen running after it had closed the run's logs."""
    gone_at: float | None = None
    """When the writer was first seen gone (the end is judged at the next look, once what it
    wrote before going was read)."""
    exit: Exit | None = None
    zombie: bool = False

    def reset_writer(self) -> None:
        self.writer, self.writer_open, self.closed_alive = None, False, False
        self.gone_at, self.exit, self.zombie = None, None, False

    def record(self, record: Record, log: str | None = None) -> None:
        """A training record read (from `log`): its step, whether it closes the run, whether it
        is non-finite; a traceback before it was handled (training went on), and a closing
        record before it in the same log, unless at the closing step (an evaluation printed
        after training), did not end the run either (another training began in that log: an
        SFT then a GRPO phase of one job)."""
        self.crash = None
        self._went_on(record.step, log)
        self._step(record.step)
        closing = closing_record(record.values)
        if closing is not None:
            self.closing, self.closing_step, self.closing_log = closing, record.step, log
        finite = all(_finite(v) for v in record.values.values())
        self.nonfinite_step = None if finite else record.step

    def block(self, block: ScalarBlock, log: str | None = None) -> None:
        if not len(block):
            return
        self.crash = None
        used = {block.names[t] for t in np.unique(block.tag).tolist()}
        self._went_on(int(block.steps[0]), log)
        closing = closing_record(used)
        if closing is not None:
            self.closing, self.closing_step, self.closing_log = closing, int(block.steps[-1]), log
        self._step(int(block.steps[-1]))
        last = block.record(len(block) - 1)
        finite = all(_finite(v) for v in last.values.values())
        self.nonfinite_step = None if finite else last.step

    def mark(self, mark: EndMark, log: str | None = None) -> None:
        if mark.kind == "crash":
            self.crash = mark
        elif self.closing is None:
            self.closing = f"its console log's closing line ({mark.text[:120]})"
            self.closing_step, self.closing_log = self.last_step, log

    def _went_on(self, step: int, log: str | None) -> None:
        if self.closing is None or log is None or log != self.closing_log:
            return
        if self.closing_step is not None and step != self.closing_step:
            self.closing, self.closing_step, self.closing_log = None, None, None

    def _step(self, step: int) -> None:
        self.last_step = step if self.last_step is None else max(self.last_step, step)


def _finite(value: Any) -> bool:
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def _reached(evidence: EndEvidence, config: Mapping[str, Any]) -> str | None:
    planned = config.get("planned_steps")
    last = evidence.last_step
    if isinstance(planned, int) and planned > 0 and last is not None and last >= planned:
        return f"its logs reach the planned length ({planned:,} steps)"
    return None


def _closed_by_logs(evidence: EndEvidence, config: Mapping[str, Any]) -> str | None:
    if evidence.closing is not None:
        at = "" if evidence.closing_step is None else f" at step {evidence.closing_step:,}"
        return f"{evidence.closing}{at}"
    return _reached(evidence, config)


def judge_gone(
    evidence: EndEvidence, config: Mapping[str, Any], framework: str | None
) -> tuple[str, str]:
    """(state, reason) of a run whose writer is gone: its crash, its closing record or planned
    length, its exit status (a zombie's), its logs closed before it exited, non-finite values;
    a trainer that always closes its logs with a record and did not was stopped; otherwise the
    end is unknown (`ended`, said)."""
    who = evidence.writer.describe() if evidence.writer is not None else "the writer"
    how = f" ({describe_exit(evidence.exit)})" if evidence.exit is not None else ""
    zombie = (
        ", and was never reaped by its parent (a zombie: the launcher does not wait for it)"
        if evidence.zombie
        else ""
    )
    if evidence.crash is not None:
        return "crashed", f"{who} exited{how} after a traceback: {evidence.crash.text}"
    if evidence.exit is not None and not evidence.exit.normal:
        return "crashed", f"{who}, which wrote its logs, {describe_exit(evidence.exit)}{zombie}"
    closed = _closed_by_logs(evidence, config)
    if closed is not None:
        return "finished", f"{closed}; then {who} exited{how}"
    if evidence.exit is not None:
        return "finished", f"{who}, which wrote its logs, {describe_exit(evidence.exit)}{zombie}"
    if evidence.closed_alive:
        return "finished", f"{who} closed its logs, then exited"
    if evidence.nonfinite_step is not None:
        return "crashed", (
            f"{who} exited after logging non-finite values at step {evidence.nonfinite_step:,}"
        )
    planned = config.get("planned_steps")
    if isinstance(planned, int) and planned > 0 and evidence.last_step is not None:
        return "crashed", (
            f"{who} exited at step {evidence.last_step:,} of the planned {planned:,}, holding "
            "its logs open and without a closing record: killed (kill -9, out of memory) or failed"
        )
    if framework in _CLOSING_FRAMEWORKS:
        return "crashed", (
            f"{who} exited holding its logs open without the closing record its trainer writes "
            "when training ends: killed (kill -9, out of memory) or failed"
        )
    return "ended", (
        f"{who}, which wrote its logs, exited; they record no end (no closing record, no planned "
        "length), so a normal exit cannot be told from a kill"
    )


def judge_quiet(evidence: EndEvidence, config: Mapping[str, Any]) -> tuple[str, str] | None:
    """(state, reason) the logs alone give a run quiet past the stall window with no writer
    seen running: their closing record or planned length, a traceback they end with; None when
    they do not say (the run reads quiet)."""
    if evidence.crash is not None:
        return "crashed", f"its console log ends with a traceback: {evidence.crash.text}"
    closed = _closed_by_logs(evidence, config)
    if closed is not None:
        return "finished", closed
    return None


def part_name(run: str, part: int) -> str:
    """The run a later training in a log is read into (`Record.part`): `run-part2` for the
    second."""
    return run if part == 0 else f"{run}-part{part + 1}"


def judge_followed(evidence: EndEvidence, later: str) -> tuple[str, str]:
    """(state, reason) of a run whose log went on with another training (read as run `later`)
    and says nothing more of its end."""
    at = f" after step {evidence.last_step:,}" if evidence.last_step is not None else ""
    return "ended", (
        f"another training began in its log{at} (read as run {later!r}); the log does not "
        "record how this one ended"
    )


@dataclass
class WriterWatch:
    """Finds and checks the processes writing followed logs, on this host. A known writer is
    checked at every look (its process and its open files: a few system calls); logs that grew
    without a known writer are searched for together, at most every `scan_every` seconds."""

    scan_every: float = SCAN_EVERY
    _last_scan: float = field(default=-math.inf)
    _host: str = field(default_factory=socket.gethostname)
    _pending: set[str] = field(default_factory=set)
    """Runs whose logs grew with no writer known, waiting for the next search."""
    _missed: dict[str, float] = field(default_factory=dict)
    """When a search last found no writer for a run: it is searched for again only after
    `MISSED_BACKOFF` searches' time (a log written from another container grows at every poll,
    and a search reads every process's open files)."""

    def look(
        self,
        runs: Mapping[str, tuple[EndEvidence, Collection[str], bool]],
        now: float,
        *,
        scan: bool = True,
    ) -> set[str]:
        """Update each run's evidence: `runs` maps a name to (evidence, its log files, whether
        to look for their writer: they grew since the last look, or were first read quiet).
        Returns the runs whose writer was searched for in this look (none without `scan`: the
        known writers are checked, the search waits for a look that may scan)."""
        for name, (evidence, files, grew) in runs.items():
            writer = evidence.writer
            if writer is not None and evidence.zombie:
                # a zombie seen once may be one its parent reaps a moment later (a launcher
                # that waits, a moment late): "never reaped" only while it still is one
                evidence.zombie = process_state(writer.pid, writer.started).state == "zombie"
            if writer is not None and evidence.gone_at is None:
                state = process_state(writer.pid, writer.started)
                if state.running:
                    holds = holds_for_writing(writer.pid, files)
                    if evidence.writer_open and not holds:
                        evidence.closed_alive = True
                    evidence.writer_open = holds
                else:
                    evidence.gone_at = now
                    evidence.writer_open = False
                    evidence.exit = state.exit
                    evidence.zombie = state.state == "zombie"
            seeking = writer is None or evidence.gone_at is not None or not evidence.writer_open
            missed = self._missed.get(name)
            waited = missed is None or now - missed >= MISSED_BACKOFF * self.scan_every
            if grew and seeking and waited:
                self._pending.add(name)
            elif not seeking:
                self._pending.discard(name)
        if not scan:  # a partial look (one run): others' pending searches wait for a full one
            return set()
        self._pending &= set(runs)  # a full look names every run still followed
        if not self._pending or now - self._last_scan < self.scan_every:
            return set()
        self._last_scan = now
        wanted = {name: [str(f) for f in runs[name][1]] for name in self._pending}
        self._pending.clear()
        found = writers_of({f for files in wanted.values() for f in files})
        for name, files in wanted.items():
            seen = [w for f in files for w in found.get(f, ())]
            if not seen:
                self._missed[name] = now
                continue
            self._missed.pop(name, None)
            first = min(seen, key=lambda w: w.pid)
            evidence = runs[name][0]
            evidence.reset_writer()
            evidence.writer = Holder(first.pid, self._host, first.started)
            evidence.writer_open = True
        return set(wanted)
