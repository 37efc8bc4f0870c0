"""A trainer's console log, read for the metrics it printed.

What a job printed, redirected to a file, holds metric lines among everything else (banners,
config dumps, warnings, progress bars, tracebacks). Five kinds of metric line are read, each
wherever it sits in a line (behind a launcher's prefix, after a progress bar it overdraws):

- **verl**: `step:N - key:value - ...` (`verl_console.py`); the step is printed.
- **Hugging Face Trainer / TRL**: a printed dict `{'loss': ..., 'epoch': 0.02}` (`hf_dict.py`),
  which prints no step. Its step is decided by these rules, and the rule used is kept with the
  run (`step_source`):
  1. a `global_step` or `step` key in the dict (a custom callback may print one): `printed`;
  2. the Trainer's progress bar, printed to the same file: each dict `tqdm.write` printed is
     one clearing of the bar followed by a redraw at the dict's step, in order, whether stdout
     was flushed with each dict or in bursts (`trainer_dicts.py`); a dict with no such event is
     placed by its epoch once a dict anchored the steps per epoch: `progress bar`;
  3. otherwise the dict's place among the training dicts, times the logging cadence when the
     log prints it (`logging_steps`) or the user gives it (`--set logging_steps=N`), else 1:
     steps then count logged lines, and the import says so: `logging order`.
  An evaluation dict (every key `eval_...`) and the closing dict (`train_runtime`) are placed
  like the others (their clearing's redraw), else at the step trained last.
- **OpenRLHF**: its `Global step N: {...}` lines, or in versions without them the postfix of its
  training progress bars (`openrlhf_console.py`).
- **Stable-Baselines3**: the table `verbose=1` prints at each logger dump, read once its closing
  border is (`sb3_table.py`); the step is its `time/total_timesteps` row.
- **CleanRL**: `global_step=N, episodic_return=R`, one line per finished episode
  (`cleanrl_console.py`); the lines of one step are one step's returns.

The same metric line printed by several ranks, or twice, is read once (a line equal to the one
before it at its step). A run resumed in the same file prints earlier steps again: they are read
again, and the store keeps the later value of a step. A line that looks like metrics but cannot
be read, and a pair in it that is not a number, is reported with its line number; a last line
cut before its newline (the writer killed mid-print) is reported, never read as a shorter value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..schema import MAX_STEP
from .cleanrl_console import parse_cleanrl
from .console_text import strip_ansi
from .hf_dict import parse_dict
from .lines import BadLine
from .openrlhf_console import TrainingBars, global_step_line
from .record import Record, add_value
from .sb3_table import Sb3Tables
from .trainer_dicts import TrainerDicts
from .verl_console import parse_verl

__all__ = [
    "CONSOLE_TRAINERS",
    "SNIFF_BYTES",
    "ConsoleParser",
    "console_header",
    "looks_like_console_log",
]

SNIFF_BYTES = 1 << 20
"""How much of a text file is looked at to tell whether it is a console log of metrics."""
CONSOLE_TRAINERS = (
    "verl, the Hugging Face Trainer (TRL), OpenRLHF, Stable-Baselines3 (its tables) or CleanRL"
)
"""Whose printed metric lines a console log is found by (for the messages that say none was)."""
# the bytes of text (printable, whitespace, backspace, ANSI's escape): a file whose first bytes
# are mostly anything else is binary; a stray NUL in a log (a crash's zero-filled block) is not
_TEXT_BYTES = bytes([7, 8, 9, 10, 12, 13, 27, *range(32, 256)])
HEADER_BYTES = 1 << 20
"""How much of a console log before its first metric line is kept as the run's printed config."""

_STEP_KEYS = ("global_step", "step")
Values = Mapping[str, float | list[float]]  # a step's values: a name printed twice holds both
_CUT = "the log ends in the middle of this metric line (cut while printed)"
_HEAD_STEPS = 8  # a part's first steps kept, to tell a later training from a re-print
# a dict the Trainer printed, by its `epoch` entry (what could not be read of it is reported)
_LOG_DICT = re.compile(r"""\{\s*['"][^'"]+['"]\s*:.*['"]epoch['"]\s*:""")
_CADENCE = re.compile(r"""['"]?logging_steps['"]?\s*[=:]\s*(\d+)""")


class ConsoleParser:
    """Turns the lines of a console log into Records (see the module doc for the step rules;
    `trainer_dicts.py` for the Trainer's dicts)."""

    def __init__(self, *, cadence: int | None = None) -> None:
        self._given_cadence = cadence
        self.reset()

    def reset(self) -> None:
        self._dicts = TrainerDicts(self._given_cadence)
        self._bars = TrainingBars()  # OpenRLHF's training bars
        self._tables = Sb3Tables()  # SB3's tables
        self._last: tuple[int, Values] | None = None
        self._last_dict: dict[str, float] | None = None
        self._problems: list[str] = []
        self._printed = False  # some step came printed (verl, OpenRLHF, a dict's step key)
        self._part = 0  # which training of the log the lines belong to (`Record.part`)
        self._head: dict[int, Values] = {}  # the current part's first steps
        # CleanRL's returns at the last step printed
        self._episodes: tuple[int, dict[str, float | list[float]]] | None = None
        self._terminated = True  # the line being read ends with its newline
        self._top = -1  # the current part's highest step

    @property
    def step_source(self) -> str | None:
        """How this log's steps were decided: `printed` (verl's `step:N`, OpenRLHF's global
        step, a dict's step key), `progress bar` (the Trainer's bar, and the epoch it anchors),
        or `logging order`; None before any step."""
        if self._printed or self._tables.printed:
            return "printed"
        if self._dicts.by_bar:
            return "progress bar"
        return "logging order" if self._last is not None else None

    def facts(self) -> dict[str, object]:
        """What reading the log established about the run: how its steps were decided. (How
        it ended, a closing line or a traceback, is `run_end.py`'s: the source's `EndMark`s.)"""
        out: dict[str, object] = {}
        if self.step_source is not None:
            out["step_source"] = self.step_source
        return out

    def problems(self) -> list[str]:
        out, self._problems = self._problems, []
        return out

    @property
    def holding(self) -> bool:
        """A metric line was read and waits for a later line to be placed."""
        held = self._dicts.holding or self._bars.holding or self._tables.holding
        return held or self._episodes is not None

    @property
    def saw_metrics(self) -> bool:
        """A metric line was read, complete or not (an OpenRLHF training bar that never
        completed prints its metrics too): this is a console log of metrics."""
        return self._last is not None or self._bars.seen or self._tables.seen

    def note_header(self, text: str) -> None:
        """A line printed before the metrics (config dumps): the logging cadence, when given."""
        if self._dicts.cadence is None and "logging_steps" in text:
            match = _CADENCE.search(text)
            if match is not None and int(match.group(1)) > 0:
                self._dicts.cadence = int(match.group(1))

    def parse(self, text: str) -> Record | None:
        """One line on its own (the last Record it completes): for looking at a file's head."""
        out = self.feed(text)
        return out[-1] if out else None

    def feed(self, text: str, *, terminated: bool = True) -> list[Record]:
        raw = strip_ansi(text).split("\r")
        out: list[Record] = []
        self._terminated = True  # (a segment a carriage return ends is whole)
        for segment in raw[:-1]:
            table = self._tables.line(segment)
            if table is not None:  # a table's line ended by a lone carriage return
                self._problems += table[1]
                out += self._records(table[0])
                continue
            out += self._records(self._dicts.segments([segment]))
            if "Train epoch" in segment:
                out += self._train_bar(segment)
            else:
                # a metric line a later carriage return drew over: a dict written by a
                # buffered stdout just before stderr's bar redraws, on the same line
                out += self._metric_line(segment) or []
        last = raw[-1]
        if not last.strip():
            out += self._records(self._dicts.segments([last]))
            return out
        table = self._tables.line(last)
        if table is not None:
            placed, bad = table
            self._problems += bad
            return out + self._records(placed)
        held = self._dicts.holding
        self._terminated = terminated
        mine = self._content(last)
        if not terminated and (mine or self._dicts.holding != held):
            self._problems.clear()
            raise BadLine(_CUT)
        return out + mine

    def flush(self, *, final: bool = False) -> list[Record]:
        """What is held, placed now; an SB3 table whose closing border may still come is
        held on unless `final` (the end of the log)."""
        tables, bad = self._tables.flush(final=final)
        self._problems += bad
        out = self._records(self._dicts.flush()) + self._records(self._bars.flush())
        return out + self._records(tables) + self._episodes_done()

    def _content(self, last: str) -> list[Record]:
        """What the shown segment of a line holds."""
        found = self._metric_line(last)
        if found is not None:
            return found
        if "%|" in last:
            placed = self._dicts.segments([last])
            bar = self._train_bar(last)
            return self._records(placed) + bar
        self.note_header(last)
        return []

    def _metric_line(self, segment: str) -> list[Record] | None:
        """The Records of a verl line, an OpenRLHF global step line or a Trainer's dict in
        this segment (none while a dict waits for its step); None when it holds none."""
        verl = parse_verl(segment)
        if verl is not None:
            self._problems += verl.bad
            self._printed = True
            return self._emit(verl.step, verl.values)
        orlhf = global_step_line(segment)
        if orlhf is not None:
            self._printed = True
            self._bars.printed_steps()
            return self._emit(orlhf[0], orlhf[1].values)
        if "{" in segment:
            return self._dict(segment)
        try:
            episode = parse_cleanrl(segment)
        except BadLine:
            if self._terminated:
                raise
            raise BadLine(_CUT) from None
        if episode is None:
            return None
        if not self._terminated:  # an episode line cut while printed: never added to its step
            raise BadLine(_CUT)
        return self._episode(*episode)

    def _episode(self, step: int, read: list[tuple[str, list[float]]]) -> list[Record]:
        """A CleanRL episode line: held, since another env may end at the same step (its
        line comes next); the step before it is placed now."""
        if step > MAX_STEP:  # (named at its own line, not at the next one's, which places it)
            raise BadLine(_too_large(step))
        self._printed = True
        out = [] if self._episodes is None or self._episodes[0] == step else self._episodes_done()
        if self._episodes is None:
            self._episodes = (step, {})
        for name, values in read:
            for value in values:
                add_value(self._episodes[1], name, value)
        return out

    def _episodes_done(self) -> list[Record]:
        held, self._episodes = self._episodes, None
        return [] if held is None else self._emit(*held)

    def _dict(self, segment: str) -> list[Record] | None:
        """A printed dict's Records (none while it waits for its step); None when the segment
        is no log dict.

        Only the Trainer's logs are metrics: `Trainer.log` adds `epoch` to every log it prints
        while training (evaluation and the closing summary included), and a custom loop's
        dict may carry its step. Other dicts a job prints (a config override, a sampler's
        kwargs, a final-score summary) are ordinary output."""
        parsed = parse_dict(segment)
        if parsed is None:
            if _LOG_DICT.search(segment):
                raise BadLine("a printed dict of metrics that could not be read")
            return None
        values = parsed.values
        for key in _STEP_KEYS:
            if key in values:
                step = values.pop(key)
                if not (step >= 0 and float(step).is_integer()):
                    raise BadLine(
                        f"a printed dict of metrics whose {key!r} is {step!r}, not a step (a "
                        "non-negative integer)"
                    )
                self._printed = True
                return self._emit(int(step), values)
        if "epoch" not in values:
            return None
        if values == self._last_dict:
            return []  # another rank printed the same dict
        self._last_dict = values
        closing = "train_runtime" in values
        evaluation = all(k.startswith(("eval_", "test_")) or k == "epoch" for k in values)
        return self._records(self._dicts.add(values, training=not (closing or evaluation)))

    def _train_bar(self, segment: str) -> list[Record]:
        """OpenRLHF's training bars: the steps their completions give (openrlhf_console.py)."""
        placed, bad = self._bars.read(segment)
        self._problems += bad
        return self._records(placed)

    def _records(self, placed: list[tuple[int, dict[str, float]]]) -> list[Record]:
        out: list[Record] = []
        for step, values in placed:
            out += self._emit(step, values)
        return out

    def _emit(self, step: int, values: Values) -> list[Record]:
        if step > MAX_STEP:  # (every format's printed step comes here; SB3's names its own)
            raise BadLine(_too_large(step))
        if self._last is not None and self._last == (step, values):
            return []  # the same line again (another rank, or printed twice)
        self._last = (step, values)
        self._place_in_part(step, values)
        return [Record(step=step, values=values, part=self._part)]

    def _place_in_part(self, step: int, values: Values) -> None:
        """Start a new part when the steps start again: a step at or before the current part's
        first one, after it went further, with values other than the part printed there. A run
        resumed from a checkpoint goes back only to that checkpoint (later than its first
        step), and a rank printing the same lines again prints the same values: both stay in
        their part, whose later values replace the earlier ones at a step."""
        head = self._head
        if head:
            first = min(head)
            if step <= first < self._top and head.get(step) != values:
                self._part += 1
                head.clear()
                self._top = -1
        if len(head) < _HEAD_STEPS:
            head.setdefault(step, values)
        self._top = max(self._top, step)


def _too_large(step: int) -> str:
    return f"a metric line at step {step}, beyond the largest storable step {MAX_STEP} (2**63 - 1)"


def looks_like_console_log(path: Path) -> bool:
    """Whether a text file's first `SNIFF_BYTES` hold a metric line of a known trainer."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    sample = head[:4096]
    if not head or len(sample.translate(None, _TEXT_BYTES)) * 10 > len(sample):
        return False  # empty, or binary (a tenth of its first bytes not text)
    parser = ConsoleParser()
    lines = head.decode("utf-8", errors="replace").split("\n")
    if len(head) == SNIFF_BYTES:
        lines.pop()  # cut by the read
    for line in lines:
        try:
            # a CRLF line's carriage return ends it, as the reader (`tail.py`) takes it off
            if parser.feed(line.removesuffix("\r")) or parser.holding or parser.saw_metrics:
                return True
        except BadLine:
            return True  # a metric line, if not a readable one: the import names it
    return False


def console_header(path: Path) -> str:
    """What a console log printed before its first metric line (config dumps, banners, the
    trainer's arguments), up to `HEADER_BYTES`, and that first metric line (how it prints its
    values): the run context is read from it."""
    out: list[str] = []
    size = 0
    parser = ConsoleParser()
    try:
        with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
            for line in fh:
                try:
                    if parser.feed(line.rstrip("\n").removesuffix("\r")):
                        out.append(line)
                        break
                    if parser.holding:
                        break
                except BadLine:
                    break
                out.append(line)
                size += len(line)
                if size >= HEADER_BYTES:
                    break
    except OSError:
        return ""
    return "".join(out)
