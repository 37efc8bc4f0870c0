"""What a log says about how its run ended: a known trainer's closing record, or a crash.

A narrow interface, so every reader of console text can use it (a parser of a trainer's printed
lines hands each line to an `EndScanner`; a reader of records asks `closing_record` about the
names of each record):

- **A closing record** is what a trainer writes only once training is over:
  - the HF Trainer (and TRL, built on it) logs `train_runtime`, `train_loss` and `total_flos`
    together once, when training ends (`Trainer._finalize_training` in transformers 5.24,
    `src/transformers/trainer.py`; a periodic log carries `train_runtime` without the other two
    when `include_num_input_tokens_seen` is set), printed as a Python dict on the console and
    written to its TensorBoard (`train/train_runtime`) and `trainer_state.json`;
  - the metrics block of HF's example scripts (`***** train metrics *****`, then
    `  train_runtime = 0:00:12.34`);
  - verl's `RayPPOTrainer.fit` prints `Final validation metrics: {...}` after its last step
    (`verl/trainer/ppo/ray_trainer.py`).
- **A crash** is a Python traceback (`Traceback (most recent call last):` and its frames) ended
  by its exception line (`RuntimeError: CUDA error: ...`; a Ray task's error is raised in the
  driver as `ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() ...`), the last
  thing a process killed by an uncaught exception prints. A traceback followed by more training records was handled (logged
  and gone on from): the caller drops it when it sees a step after it.

Console lines often carry a prefix: ANSI colours, and Ray's `(TaskRunner pid=123)` or
`(WorkerDict pid=45, ip=10.0.0.2)` naming the actor that printed them (`strip_prefix`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["EndMark", "EndScanner", "closing_record", "line_kind", "strip_prefix"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY = re.compile(r"^\((?:[\w.-]+ )?pid=\d+(?:, ip=[\w.:-]+)?\)\s?")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
# an exception line: its class (Ray's dual exception class is named after its cause:
# `ray.exceptions.RayTaskError(RuntimeError)`, ray python/ray/exceptions.py
# `RayTaskError.as_instanceof_cause`) and its message
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:\([A-Za-z_][\w.]*\))?)(?::\s?(.*))?$")
_HF_CLOSING = ("train_runtime", "train_loss")
_HF_METRICS_LINE = re.compile(r"^\s*train_runtime\s*=\s*\S")
# verl prints it with pprint (`pprint(f"Final validation metrics: {...}")`, ray_trainer.py), which
# writes a string's repr: in quotes, and over 80 characters as a parenthesised run of quoted
# pieces, its first line `("Final validation metrics: {...`. Published verl logs have all three.
_VERL_CLOSING = re.compile(r"""^\(?["']?Final validation metrics:""")


@dataclass(frozen=True)
class EndMark:
    """What a log said about its run's end: `crash` (with the exception line) or `closing`
    (with the closing record), at `line` (1-based) of the file."""

    kind: Literal["crash", "closing"]
    text: str
    line: int | None = None


def strip_prefix(text: str) -> str:
    """The line without ANSI colours, Ray's actor prefix, and what a progress bar wrote before
    its last carriage return."""
    text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.rsplit("\r", 1)[-1]
    return _RAY.sub("", text).rstrip()


def closing_record(names: Iterable[str]) -> str | None:
    """A description of the closing record when a record's names are one (the HF Trainer's
    final log: `train_runtime` and `train_loss` together, with or without a `train/` prefix;
    `total_flos` too where it is kept, but the console callbacks drop it before printing:
    transformers 5.24 `ProgressCallback.on_log` and `PrinterCallback.on_log`), else None."""
    short = {name.rsplit("/", 1)[-1] for name in names}
    if all(key in short for key in _HF_CLOSING):
        return "the HF Trainer's closing record (train_runtime, train_loss)"
    return None


def _dict_keys(text: str) -> set[str]:
    start = text.find("{")
    if start < 0:
        return set()
    try:
        value = ast.literal_eval(text[start:])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return set()
    return {k for k in value if isinstance(k, str)} if isinstance(value, dict) else set()


def line_kind(text: str) -> Literal["traceback", "closing"] | None:
    """Whether one console line starts a Python traceback or is a known trainer's closing
    record (see the module's docstring); None for anything else."""
    line = strip_prefix(text)
    if line.strip() == _TRACEBACK:
        return "traceback"
    if _VERL_CLOSING.match(line) or _HF_METRICS_LINE.match(line):
        return "closing"
    if "train_runtime" in line and closing_record(_dict_keys(line)) is not None:
        return "closing"
    return None


class EndScanner:
    """Reads a console log's lines in order and says when one ends a traceback (a `crash`
    mark with the exception line) or is a closing record (a `closing` mark)."""

    def __init__(self) -> None:
        self._in_traceback = False

    def reset(self) -> None:
        self._in_traceback = False

    def feed(self, text: str, number: int | None = None) -> EndMark | None:
        line = strip_prefix(text)
        kind = line_kind(line)
        if kind == "traceback":
            self._in_traceback = True
            return None
        if self._in_traceback:
            if not line.strip() or line[:1].isspace() or line.strip() in _CHAINED:
                return None  # a frame, its source line, a caret line, a chained cause
            self._in_traceback = False
            if _EXCEPTION.match(line.strip()):
                return EndMark("crash", line.strip()[:300], number)
            return None
        if kind == "closing":
            return EndMark("closing", line.strip()[:300], number)
        return None
