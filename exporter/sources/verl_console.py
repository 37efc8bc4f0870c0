"""verl's console lines: `step:N - key:value - key:value - ...`, one line per training step.

verl's console logger prints every metric of a step on one line, the step first; values are
rounded floats in older versions (`actor/pg_loss:0.012`) and Python reprs in newer ones, where
numpy 2 spells a scalar `np.float64(0.0123)`. The line may sit behind a launcher's prefix
(Ray's `(TaskRunner pid=123)`), so it is found anywhere in the segment, not only at its start.
"""

from __future__ import annotations

import re

from .console_text import number
from .lines import BadLine

__all__ = ["VerlLine", "parse_verl"]

# `step:` not preceded by a word character or `/` (`global_step:` and `training/global_step:`
# are metrics inside the line, not its start), then the step and the first separator.
_START = re.compile(r"(?<![\w/])step:\s*(-?[\d.]+)\s+-\s+")
_SEP = " - "
_FLAGS = frozenset({"True", "False", "np.True_", "np.False_"})


_WRAPS = ("np.float64(", "np.float32(", "np.int64(", "np.int32(")


def _fast(body: str) -> dict[str, float] | None:
    """A line of plain numbers read in a few C-level passes (numpy's `np.float64(...)` wrappers
    taken off first, then one split at every `:` and ` - `); None when anything in it needs the
    pair-by-pair reading (a key with a colon or a space, a value that is not a plain number, a
    flag), which names it."""
    if "np." in body:
        for wrap in _WRAPS:
            body = body.replace(wrap, "")
        body = body.replace(") - ", _SEP)
        body = body.rstrip()
        if body.endswith(")"):
            body = body[:-1]
        if "(" in body or ")" in body:
            return None
    parts = body.rstrip().replace(_SEP, ":").split(":")
    if len(parts) % 2:
        return None
    keys = parts[0::2]
    try:
        values = list(map(float, parts[1::2]))
    except ValueError:
        return None
    if any(" " in k or not k for k in keys):
        return None
    return dict(zip(keys, values, strict=True))


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
    step_text = match.group(1)
    if not (step_text.isascii() and step_text.isdigit()):
        raise BadLine(
            f"a verl line whose step is {step_text!r}, not a step (a non-negative integer)"
        )
    step = int(step_text)
    body = segment[match.end() :]
    fast = _fast(body)
    if fast is not None:
        return VerlLine(step, fast, [])
    values: dict[str, float] = {}
    bad: list[str] = []
    for pair in body.split(_SEP):
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
    return VerlLine(step, values, bad)
