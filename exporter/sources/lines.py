"""The contract of a line-oriented log parser, and the value conversion the text formats share."""

from __future__ import annotations

import math
from typing import Protocol

from ..schema import MAX_STEP
from .record import Record

__all__ = ["BadLine", "LineParser", "as_step", "as_value"]


class BadLine(ValueError):
    """One line a parser cannot read; the source reports it with file:line and goes on."""


class LineParser(Protocol):
    """Turns one line of text (without its newline) into a Record, or None for a line to skip."""

    def parse(self, text: str) -> Record | None: ...

    def reset(self) -> None:
        """Forget per-file state (a CSV header) because the file starts over."""


def as_value(raw: object) -> float | None:
    """A scalar for a metric value: numbers and numeric strings; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
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
