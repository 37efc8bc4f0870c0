"""verl's console lines: `step:N - key:value - key:value - ...`, one line per training step.

verl's console logger prints every metric of a step on one line, the step first; values are
rounded floats in older versions (`actor/pg_loss:0.012`) and Python reprs in newer ones, where
numpy 2 spells a scalar `np.float64(0.0123)`. The line may sit behind a launcher's prefix
(Ray's `(TaskRunner pid=123)`), so it is found anywhere in the segment, not only at its start.
"""

from __future__ import annotations

import re

from .console_text import number

__all__ = ["VerlLine", "parse_verl"]

# `step:` not preceded by a word character or `/` (`global_step:` and `training/global_step:`
# are metrics inside the line, not its start), then the step and the first separator.
_START = re.compile(r"(?<![\w/])step:\s*(\d+)\s+-\s+")
_SEP = " - "
_FLAGS = frozenset({"True", "False", "np.True_", "np.False_"})


class VerlLine:
    """The step, the values read, and the pairs that were not numbers (named, never dropped)."""

    __slots__ = ("bad", "step", "values")

    def __init__(self, step: int, values: dict[str, float], bad: list[str]) -> None:
        self.step = step
        self.values = values
        self.bad = bad


def parse_verl(segment: str) -> VerlLine | None:
    """The metrics of one verl console line, or None when the segment holds none."""
    if "step:" not in segment:
        return None
    match = _START.search(segment)
    if match is None:
        return None
    values: dict[str, float] = {}
    bad: list[str] = []
    for pair in segment[match.end() :].split(_SEP):
        key, colon, raw = pair.partition(":")
        if raw.startswith("np.") and raw.endswith(")"):  # numpy 2's repr: np.float64(0.5)
            raw = raw[raw.find("(") + 1 : -1]
        try:
            value = float(raw)  # the usual case: a plain number
        except ValueError:
            key = key.strip()
            if not colon or not key or " " in key:
                bad.append(f"{pair.strip()[:60]!r} is not key:value")
                continue
            found = number(raw)
            if found is None:
                if raw.strip() not in _FLAGS:  # a flag printed among numbers is no metric
                    bad.append(f"{key}: {raw.strip()[:40]!r} is not a number")
                continue
            value = found
        if not colon or " " in key or not key:
            bad.append(f"{pair.strip()[:60]!r} is not key:value")
            continue
        values[key] = value
    if not values:
        return None
    return VerlLine(int(match.group(1)), values, bad)
