"""What every log source yields: one step's scalar values, and where a line could not be read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["KeptNote", "Malformed", "Record", "add_value"]


@dataclass(frozen=True)
class Record:
    """Scalar values logged at one training step, under the names the log used. A name logged
    several times at one step (CleanRL logs one episodic return per finishing env) holds the
    list of its values, in order."""

    step: int
    values: Mapping[str, float | list[float]] = field(default_factory=dict)
    wall_time: float | None = None
    part: int = 0
    """Which training of its log the step belongs to: 0, the first; a console log whose steps
    start again with other values holds a later training (an SFT phase, then a GRPO one; SB3's
    second `learn()`), read as a run of its own (`console.py`)."""


def add_value(values: dict[str, float | list[float]], name: str, value: float) -> None:
    """Add one value of `name` at a step: a name written again at the same step is another
    value of that step, not a correction (CleanRL writes one episodic return per env that
    finished), so a second value turns its entry into the list of them, in order."""
    seen = values.get(name)
    if seen is None:
        values[name] = value
    elif isinstance(seen, list):
        seen.append(value)
    else:
        values[name] = [seen, value]


class KeptNote(str):
    """A parser's problem about a line whose values were all stored all the same (a wall time
    that is not a time): a warning, not a line skipped."""


@dataclass(frozen=True)
class Malformed:
    """A line (or record) a source skipped, with the reason; `line` is 1-based (0: not line-based).
    `kept`: nothing was skipped, the values were stored (said as a warning, not counted as a
    malformed line). `part`: the line (or the records named) was read and the rest of it
    stored; only the values the reason names were not (counted apart from lines skipped)."""

    path: str
    line: int
    reason: str
    kept: bool = False
    part: bool = False

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"
