"""A trainer's console log, read for the metrics it printed.

What a job printed, redirected to a file, holds metric lines among everything else (banners,
config dumps, warnings, progress bars, tracebacks). Three kinds of metric line are read, each
wherever it sits in a line (behind a launcher's prefix, after a progress bar it overdraws):

- **verl**: `step:N - key:value - ...` (`verl_console.py`); the step is printed.
- **Hugging Face Trainer / TRL**: a printed dict `{'loss': ..., 'epoch': 0.02}` (`hf_dict.py`),
  which prints no step. Its step is decided once, by these rules in order, and the rule used is
  kept with the run (`step_source`):
  1. a `global_step` or `step` key in the dict (a custom callback may print one): `printed`;
  2. the Trainer's progress bar, printed to the same file (stdout and stderr together): tqdm
     redraws the bar right after the dict it wrote, at the optimizer step the dict was logged
     at; that step also gives the run's steps per epoch (`Trainer.log` adds the epoch,
     global step / steps per epoch, to every dict), which places a later dict whose redraw
     is not in the file (stdout flushed in bursts) by its epoch: `progress bar`;
  3. otherwise the dict's place among the training dicts, times the logging cadence when the
     log prints it (`logging_steps`), else 1; steps then count logging lines, and the run
     says so: `logging order`.
  An evaluation dict (every key `eval_...`) and the closing dict (`train_runtime`) belong to the
  step of the training dict before them.
- **OpenRLHF**: the postfix of its training progress bar (`openrlhf_console.py`).

The same metric line printed by several ranks, or twice, is read once (a line equal to the one
before it at its step). A run resumed in the same file prints earlier steps again: they are read
again, and the store keeps the later value of a step. A line that looks like metrics but cannot
be read, and a pair in it that is not a number, is reported with its line number; a last line
cut before its newline (the writer killed mid-print) is reported, never read as a shorter value.
"""

from __future__ import annotations

import re
from pathlib import Path

from .console_text import progress, segments
from .hf_dict import parse_dict
from .lines import BadLine
from .openrlhf_console import global_step_line, postfix_values
from .record import Record
from .verl_console import parse_verl

__all__ = [
    "SNIFF_BYTES",
    "ConsoleParser",
    "console_header",
    "looks_like_console_log",
]

SNIFF_BYTES = 1 << 20
"""How much of a text file is looked at to tell whether it is a console log of metrics."""
HEADER_BYTES = 1 << 20
"""How much of a console log before its first metric line is kept as the run's printed config."""

_STEP_KEYS = ("global_step", "step")
# a dict the Trainer printed, by its `epoch` entry (what could not be read of it is reported)
_LOG_DICT = re.compile(r"""\{\s*['"][^'"]+['"]\s*:.*['"]epoch['"]\s*:""")
# verl prints its last validation when the loop reaches total_training_steps, then returns
# (verl/trainer/ppo/ray_trainer.py `fit`); no other line marks a normal end
_VERL_END = "Final validation metrics"
_CADENCE = re.compile(r"""['"]?logging_steps['"]?\s*[=:]\s*(\d+)""")


class ConsoleParser:
    """Turns the lines of a console log into Records (see the module doc for the step rules).

    A Trainer dict is held back until the next line: tqdm redraws its bar right after the dict
    it wrote (`tqdm.write` clears the bar, writes, and refreshes it), so when the dict follows
    that clearing (a blank carriage-return segment) the first segment of the next line is the
    bar at the step the dict was logged at, exactly; the bar before the dict may lag (tqdm
    redraws at most every 0.1 s), and a dict without the clearing came through another
    buffer (stdout flushed in bursts) than the bars."""

    def __init__(self, *, cadence: int | None = None) -> None:
        self._given_cadence = cadence
        self.reset()

    def reset(self) -> None:
        self._cadence = self._given_cadence
        self._per_epoch: float | None = None  # optimizer steps per epoch, once anchored
        self._held: dict[str, float] | None = None  # a training dict waiting for its step
        self._held_cleared = False  # ... written by tqdm.write (it cleared the bar first)
        self._dicts = 0  # training dicts (or OpenRLHF training bars) read
        self._bar_done = False  # OpenRLHF's training bar was read complete
        self._last_step: int | None = None
        self._last: tuple[int, dict[str, float]] | None = None
        self._problems: list[str] = []
        self.step_source: str | None = None
        """How this log's steps were decided: `printed` (verl's `step:N`, a dict's step key),
        `progress bar` (the Trainer's bar, and the epoch it anchors), or `logging order`."""
        self.closed = False
        """The trainer printed what it prints when it ends normally: the HF Trainer's
        `train_runtime` dict, verl's `Final validation metrics` line."""

    def facts(self) -> dict[str, object]:
        """What reading the log established about the run: how its steps were decided and
        whether the trainer printed what it prints at a normal end."""
        out: dict[str, object] = {}
        if self.step_source is not None:
            out["step_source"] = self.step_source
        if self.closed:
            out["closed"] = True
        return out

    def problems(self) -> list[str]:
        out, self._problems = self._problems, []
        return out

    def note_header(self, text: str) -> None:
        """A line printed before the metrics (config dumps): the logging cadence, when given."""
        if self._cadence is None and "logging_steps" in text:
            match = _CADENCE.search(text)
            if match is not None and int(match.group(1)) > 0:
                self._cadence = int(match.group(1))

    def parse(self, text: str) -> Record | None:
        """One line on its own (the last Record it completes): for looking at a file's head."""
        out = self.feed(text)
        return out[-1] if out else None

    def feed(self, text: str, *, terminated: bool = True) -> list[Record]:
        parts, cleared = segments(text)
        out: list[Record] = []
        if self._held is not None:
            bar = progress(parts[0]) if parts and self._held_cleared else None
            anchor = bar.n if bar is not None and not bar.desc else None
            out += self._place_held(anchor)
        if not parts:
            return out
        last = parts[-1]
        mine: list[Record] = []
        verl = parse_verl(last)
        orlhf = None if verl is not None else global_step_line(last)
        if verl is not None:
            self._problems += verl.bad
            self._set_source("printed")
            mine = self._emit(verl.step, verl.values)
        elif orlhf is not None:
            self._set_source("printed")
            mine = self._emit(orlhf[0], orlhf[1].values)
        elif "{" in last and self._dict(last, mine, cleared):
            pass
        else:
            for part in parts:
                mine += self._train_bar(part)
            if not mine:
                self.note_header(last)
                if _VERL_END in last:
                    self.closed = True
        if not terminated and (mine or self._held is not None):
            self._held = None
            self._problems.clear()
            raise BadLine("the log ends in the middle of this metric line (cut while printed)")
        return out + mine

    def _train_bar(self, segment: str) -> list[Record]:
        """OpenRLHF's training bar: its postfix when it completes (see openrlhf_console.py)."""
        bar = progress(segment)
        if bar is None or not bar.desc.startswith("Train epoch"):
            return []
        if bar.n < bar.total:
            self._bar_done = False
            return []
        if self._bar_done:
            return []  # the same completed bar drawn again (refresh, close)
        self._bar_done = True
        values, bad = postfix_values(bar)
        self._problems += bad
        if not values:
            return []
        self._dicts += 1
        self._set_source("logging order")
        return self._emit(self._dicts, values)

    def flush(self) -> list[Record]:
        return self._place_held(None) if self._held is not None else []

    @property
    def holding(self) -> bool:
        """A metric line was read and waits for the next line to be placed."""
        return self._held is not None

    def _dict(self, segment: str, out: list[Record], cleared: bool) -> bool:
        """Read a printed dict into `out` (or hold it back); False when the segment is no log
        dict.

        Only the Trainer's logs are metrics: `Trainer.log` adds `epoch` to every log it prints
        while training (evaluation and the closing summary included), and a custom loop's
        dict may carry its step. Other dicts a job prints (a config override, a sampler's
        kwargs, a final-score summary) are ordinary output."""
        parsed = parse_dict(segment)
        if parsed is None:
            if _LOG_DICT.search(segment):
                raise BadLine("a printed dict of metrics that could not be read")
            return False
        values = parsed.values
        for key in _STEP_KEYS:
            if key in values:
                step = values.pop(key)
                if step >= 0 and float(step).is_integer():
                    self._set_source("printed")
                    out += self._emit(int(step), values)
                    return True
        if "epoch" not in values:
            return False
        closing = "train_runtime" in values
        if closing:
            self.closed = True
        if closing or all(k.startswith(("eval_", "test_")) or k == "epoch" for k in values):
            # evaluation and the closing summary happen at the step trained last
            if self._last_step is not None:
                out += self._emit(self._last_step, values)
            return True
        if self._last is not None and self._last[1] == values:
            return True  # another rank printed the same dict
        self._dicts += 1
        self._held = values
        self._held_cleared = cleared
        return True

    def _place_held(self, anchor: int | None) -> list[Record]:
        values, self._held = self._held, None
        assert values is not None
        epoch = values.get("epoch")
        if anchor is not None:
            if epoch is not None and epoch > 0 and anchor > 0:
                self._per_epoch = anchor / epoch
            self._set_source("progress bar")
            return self._emit(anchor, values)
        if self._per_epoch is not None and epoch is not None:
            step = round(epoch * self._per_epoch)
            if self._cadence:
                step = max(self._cadence, round(step / self._cadence) * self._cadence)
            return self._emit(step, values)
        self._set_source("logging order")
        return self._emit(self._dicts * (self._cadence or 1), values)

    def _set_source(self, source: str) -> None:
        if self.step_source is None:
            self.step_source = source

    def _emit(self, step: int, values: dict[str, float]) -> list[Record]:
        if self._last is not None and self._last == (step, values):
            return []  # the same line again (another rank, or printed twice)
        self._last = (step, values)
        self._last_step = step
        return [Record(step=step, values=values)]


def looks_like_console_log(path: Path) -> bool:
    """Whether a text file's first `SNIFF_BYTES` hold a metric line of a known trainer."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    if not head or b"\0" in head[:4096]:
        return False  # empty, or binary
    parser = ConsoleParser()
    lines = head.decode("utf-8", errors="replace").split("\n")
    if len(head) == SNIFF_BYTES:
        lines.pop()  # cut by the read
    for line in lines:
        try:
            if parser.feed(line) or parser.holding:
                return True
        except BadLine:
            return True  # a metric line, if not a readable one: the import names it
    return False


def console_header(path: Path) -> str:
    """What a console log printed before its first metric line (config dumps, banners, the
    trainer's arguments), up to `HEADER_BYTES`: the run context is read from it."""
    out: list[str] = []
    size = 0
    parser = ConsoleParser()
    try:
        with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
            for line in fh:
                try:
                    if parser.feed(line.rstrip("\n")) or parser.holding:
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
