"""Stable-Baselines3's console tables: what `verbose=1` prints at every logger dump.

SB3's `HumanOutputFormat` (stable_baselines3/common/logger.py, 2.x) writes each dump as one
table between two borders of dashes, a row per key in sorted order, `| key | value |`. A key's
prefix up to its first `/` is printed once as a row of its own with an empty value (`| rollout/ |
|`), and the keys under it are indented by three spaces without it (`|    ep_rew_mean | 22.2 |`).
A float is printed with three significant digits (`f"{value:<8.3g}"`: `0.00867`, `1.23e+03`),
anything else as `str` (an int exactly, a numpy float32 in full). Keys and values longer than
its `max_length` (36 by default) are cut to `max_length - 3` characters and `...`.

Borders are not told apart by their look: SB3 prints a table's closing border and the next
table's opening one alike. A border closes the open table if it holds rows, else opens one; rows
that come right after a border that closed a table (no border of their own: that border was
theirs too, shared with a job's own banner table, or the closing one of the table before was
never printed, or that table was cut by a relaunch) open a table with them.

The step is the table's `time/total_timesteps` (SB3 dumps with `step=self.num_timesteps`, which
the table does not print otherwise), as in `progress.csv` (`sb3_csv.py`); a table without it (a
custom `logger.dump`) is placed by its order among such tables, step 1, 2, ..., in a log whose
tables never print it (else it is named, not placed). A table is SB3's
when one of its keys has a `/` (every dump of SB3's algorithms does); other two-column tables a
job prints are not metrics. A key cut with `...` and a value that is not a number are named,
never read under a wrong name. The three-digit floats are what the console holds: the run's
`progress.csv` or TensorBoard file has them in full.
"""

from __future__ import annotations

import re

from .console_text import number
from .lines import BadLine, as_step
from .sb3_csv import SB3_STEP_KEY

__all__ = ["MAX_ROWS", "Sb3Tables"]

MAX_ROWS = 4096
"""The most rows a table is held for: SB3 prints one per key it logged (a few dozen)."""

Placed = tuple[int, dict[str, float]]

# a border: dashes to the end of the line, behind whatever prefix a launcher adds
_DASHES = "-" * 9
_BORDER = re.compile(r"(?:^|\s)-{9,}$")
# a row: `| key | value |`, the key cell as printed (its indent kept)
_ROW = re.compile(r"\|\s(?P<key>.*?)\s*\|\s(?P<value>.*?)\s*\|\s*$")
_CUT = "..."


class Sb3Tables:
    """Reads SB3's tables line by line: a table's values once its closing border is read."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._rows: list[tuple[str, str]] | None = None  # None: outside a table
        self._named = False  # a row of the open table has a key with a `/` (SB3's)
        self._closed = False  # the last border closed a table: rows after it open the next
        self._unstepped = 0  # tables read without their step
        self.printed = False  # a table printed its step
        self.seen = False  # an SB3 table was read

    @property
    def holding(self) -> bool:
        """Rows of an SB3 table were read and its closing border was not (yet)."""
        return self._named

    def line(self, segment: str) -> tuple[list[Placed], list[str]] | None:
        """The values a line completes and the problems in them; None when the line is no
        part of a table (another reader may look at it)."""
        tail = segment.rstrip()
        # (the regular expressions only for lines ending as a table's do: any other line of a
        # console log, a verl line of 5 KB among them, costs two string tests)
        if tail.endswith(_DASHES) and _BORDER.search(tail):
            if self._rows:
                self._closed = True
                return self._close()
            self._rows, self._named, self._closed = [], False, False  # an opening border
            return [], []
        if not tail.endswith("|") or (self._rows is None and not self._closed):
            return None
        match = _ROW.search(tail)
        if match is None:
            return None  # other output between a table's lines: the table goes on
        if self._rows is None:  # the border before was this table's opening one too
            self._rows, self._named, self._closed = [], False, False
        if len(self._rows) >= MAX_ROWS:  # (held in memory until its border: bounded)
            self._rows, self._named = None, False
            return [], [
                f"more than {MAX_ROWS:,} rows of `| key | value |` before a border: not a "
                "table SB3 prints (one row per logged key); not read"
            ]
        self._rows.append((match.group("key"), match.group("value")))
        self._named = self._named or "/" in match.group("key")
        return [], []

    def flush(self, *, final: bool = False) -> tuple[list[Placed], list[str]]:
        """At the end of a read: a table whose closing border may still come is held, unless
        `final` (the log ends inside it: cut while printed), when its complete rows are read
        if they hold the step."""
        if not final or not self.holding:
            return [], []
        count = len(self._rows or ())
        placed, bad = self._close(cut=True)
        note = f"the log ends inside an SB3 table, after {count} of its rows (cut while printed)"
        if placed:
            return placed, [*bad, f"{note}: the rows before the cut are read"]
        return [], [*bad, note]

    def _close(self, *, cut: bool = False) -> tuple[list[Placed], list[str]]:
        rows, named = self._rows or [], self._named
        self._rows, self._named = None, False
        if not named:
            return [], []  # a table of something else
        self.seen = True
        values: dict[str, float] = {}
        bad: list[str] = []
        tag = ""
        for cell, text in rows:
            key = cell.strip()
            if cell.startswith("   ") and tag:
                key = tag + key
            elif key.endswith("/") and not text:
                tag = key  # the rows under it print their keys without it
                continue
            if key.endswith(_CUT):
                bad.append(
                    f"{key!r}: SB3 cut this name to fit its table (HumanOutputFormat's "
                    "max_length), so it is not read; its full name is in the run's "
                    "progress.csv or TensorBoard file"
                )
                continue
            value = number(text)
            if value is None:
                bad.append(f"{key}={text!r} is not a number")
                continue
            if key in values:
                bad.append(
                    f"{key} printed twice in one table: its first value ({values[key]!r}) is "
                    "not read, the later one is"
                )
            values[key] = value
        if not cut:  # (read at its closing border, whose line the problems are named at)
            bad = [f"in the SB3 table this border closes: {b}" for b in bad]
        raw = values.pop(SB3_STEP_KEY, None)
        if raw is None:
            if not values or cut:
                return [], bad  # (a cut table's step may be in the rows never printed)
            if self.printed:
                return [], [
                    *bad,
                    f"an SB3 table without {SB3_STEP_KEY} among tables that print it (cut "
                    f"while printed, or a dump of its own): its {len(values)} values have no "
                    "step and are not read",
                ]
            self._unstepped += 1
            return [(self._unstepped, values)], bad
        try:
            step = as_step(raw, SB3_STEP_KEY)
        except BadLine as exc:
            return [], [*bad, f"an SB3 table whose values are not read: {exc}"]
        self.printed = True
        return [(step, values)], bad
