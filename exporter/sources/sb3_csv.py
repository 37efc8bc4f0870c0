"""Stable-Baselines3 `progress.csv`: a header of logger keys, then one row per logger dump.

The step is the `time/total_timesteps` column. SB3 leaves a cell empty when a key was not logged
in that dump, and rewrites the header in place when a new key first appears (the follower handles
that rewrite; this parser only sees lines). A cell that is not a number (text SB3 wrote for a
string it was given, a decimal comma) is not stored, and its column is named once per file; a
column named twice in the header is named there (a row's later cell is kept).
"""

from __future__ import annotations

import csv

from .lines import BadLine, LineProblems, as_step, as_value
from .record import Record

__all__ = ["SB3_STEP_KEY", "Sb3CsvParser"]

SB3_STEP_KEY = "time/total_timesteps"


class Sb3CsvParser:
    """Parses SB3 progress.csv lines; the first line of a file is its header."""

    def __init__(self, step_key: str | None = None) -> None:
        self._step_key = step_key or SB3_STEP_KEY
        self._header: list[str] | None = None
        self._problems = LineProblems()  # columns of cells not read named once per file

    def reset(self) -> None:
        self._header = None
        self._problems.reset()

    def problems(self) -> list[str]:
        """What the last lines held that was not read (the rest of them was); then forgotten."""
        return self._problems.take()

    def parse(self, text: str) -> Record | None:
        if self._header is None:
            text = text.lstrip("\ufeff")  # a byte order mark before the header
        if not text.strip():
            return None
        try:
            cells = next(csv.reader([text]))
        except csv.Error as exc:
            raise BadLine(f"not a CSV row ({exc})") from None
        if self._header is None:
            if self._step_key not in cells:
                raise BadLine(
                    f"header has no {self._step_key!r} column, so rows have no step; "
                    "pass --step-key NAME to name the step column"
                )
            self._header = cells
            twice = sorted({c for c in cells if cells.count(c) > 1})
            if twice:
                self._problems.add(
                    f"column(s) {', '.join(map(repr, twice))} named twice in the header: "
                    "a row's later cell is kept"
                )
            return None
        header = self._header
        if len(cells) > len(header):
            raise BadLine(f"{len(cells)} cells but the header has {len(header)} columns")
        row = dict(zip(header, cells, strict=False))
        raw_step = row.pop(self._step_key, "")
        if raw_step == "":
            raise BadLine(f"empty {self._step_key!r} cell")
        step = as_step(raw_step, self._step_key)
        values: dict[str, float] = {}
        for key, cell in row.items():
            if cell == "":
                continue
            value = as_value(cell)
            if value is not None:
                values[key] = value
            else:
                self._problems.once(
                    key,
                    f"column {key!r} holds {cell[:40]!r}, not a number: not stored "
                    "(said once for this column)",
                )
        return Record(step=step, values=values)
