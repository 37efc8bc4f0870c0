"""What an integration needs from a run: the subset of `exporter.Run` it calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

__all__ = ["StepLogger", "numeric_values"]


class StepLogger(Protocol):
    """The part of `exporter.Run` the integrations use."""

    def log(
        self,
        step: int,
        values: Mapping[str, float],
        *,
        wall_time: float | None = None,
        framework: str | None = None,
    ) -> None: ...

    def event(self, step: int, kind: str, text: str = "", **fields: object) -> None: ...

    def flush(self, timeout: float = 10.0) -> bool: ...

    def mark_finished(self, reason: str) -> None: ...


def numeric_values(
    items: Mapping[str, object], skip: frozenset[str] = frozenset()
) -> dict[str, float]:
    """The scalar entries of a framework's log dict (numbers, numpy and 0-d torch scalars).

    Strings, booleans, arrays, videos and figures are not metrics and are left out.
    """
    out: dict[str, float] = {}
    for key, value in items.items():
        if key in skip or isinstance(value, bool | str | bytes):
            continue
        if isinstance(value, int | float):
            out[key] = float(value)
            continue
        size = getattr(value, "size", None)
        numel = getattr(value, "numel", None)
        if size == 1 or (callable(numel) and numel() == 1):
            try:
                out[key] = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
    return out
