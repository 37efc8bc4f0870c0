"""The contract of a line-oriented log parser, and the value conversion the text formats share."""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

from ..schema import MAX_STEP
from .record import KeptNote, Record

__all__ = ["BadLine", "LineParser", "LineProblems", "StreamParser", "as_step", "as_value", "shown"]


class BadLine(ValueError):
    """One line a parser cannot read; the source reports it with file:line and goes on."""


class LineParser(Protocol):
    """Turns one line of text (without its newline) into a Record, or None for a line to skip."""

    def parse(self, text: str) -> Record | None: ...

    def reset(self) -> None:
        """Forget per-file state (a CSV header) because the file starts over."""

    def problems(self) -> list[str]:
        """What the lines parsed since the last call held that was not read (the rest of them
        was); each is reported with its line's number. Calling it forgets them."""
        ...


@runtime_checkable
class StreamParser(Protocol):
    """A parser whose lines are read in context: a line may complete what an earlier one began
    (the Hugging Face Trainer's dict is placed by the progress bar it redraws on the next line),
    may be read only in part (a console line of many `key:value` pairs, one of them garbled),
    and the last one may have been cut while it was printed."""

    def feed(self, text: str, *, terminated: bool = True) -> list[Record]:
        """The Records this line completes (raises BadLine for a line that looks like metrics
        but cannot be read); `terminated` is False for a last line without its newline."""
        ...

    def flush(self, *, final: bool = False) -> list[Record]:
        """The Records still held back, placed with what is known now (end of a read; `final`:
        the end of the log, nothing more will come)."""
        ...

    def problems(self) -> list[str]:
        """What the lines fed since the last call held that could not be read (the rest of
        them was); each is reported with its line's number. Calling it forgets them."""
        ...

    def reset(self) -> None: ...


class LineProblems:
    """What a line parser's lines held that was not read (the rest of them was), until asked
    for (`take`); `once` names something once per file (a key holding text on every line is
    named on its first), `reset` when the file starts over."""

    def __init__(self) -> None:
        self._named: set[str] = set()
        self._said: list[str] = []

    def add(self, problem: str) -> None:
        self._said.append(problem)

    def once(self, key: str, problem: str, *, kept: bool = False) -> None:
        """`problem` unless `key` was named in this file; `kept`: its values were stored."""
        if key not in self._named:
            self._named.add(key)
            self._said.append(KeptNote(problem) if kept else problem)

    def take(self) -> list[str]:
        out, self._said = self._said, []
        return out

    def reset(self) -> None:
        self._named.clear()


def shown(value: object, limit: int = 40) -> str:
    """`value`'s repr for a message, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def as_value(raw: object) -> float | None:
    """A scalar for a metric value: numbers and numeric strings; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError:  # an integer past a float's range is as far out as infinity
            return math.inf if raw > 0 else -math.inf
    if isinstance(raw, float):
        return raw
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return None
    return None


def as_step(raw: object, key: str) -> int:
    """A training step: a non-negative integer (an integral float such as 100.0 is accepted)."""
    value: float | int
    if isinstance(raw, bool) or raw is None:
        raise BadLine(f"step key {key!r} is {raw!r}, not an integer")
    if isinstance(raw, int | float):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            try:
                value = float(raw.strip())
            except ValueError:
                raise BadLine(f"step key {key!r} is {raw!r}, not an integer") from None
    else:
        raise BadLine(f"step key {key!r} is {raw!r}, not an integer")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise BadLine(f"step key {key!r} is {raw!r}, not an integer")
        value = int(value)
    if value < 0:
        raise BadLine(f"step key {key!r} is {value}, a step cannot be negative")
    if value > MAX_STEP:
        raise BadLine(
            f"step key {key!r} is {raw!r}, beyond the largest storable step {MAX_STEP} (2**63 - 1)"
        )
    return value
