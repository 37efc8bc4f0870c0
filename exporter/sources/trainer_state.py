"""Hugging Face Trainer's `trainer_state.json` (TRL trainers write the same file): its `log_history`
list, one entry per logging step, keyed by `step`.

The Trainer rewrites the whole file at every save, and writes one copy per checkpoint
(`<output_dir>/checkpoint-<N>/trainer_state.json`, each holding the whole history so far) plus,
after `save_state()`, one in `<output_dir>` itself. So one run is one output folder: this source
reads its newest copy (highest global step; on a tie the folder's own, then the latest checkpoint)
and yields only entries from the last step it yielded on (that step again whole, as entries may
have been added to it: re-logging a step overwrites it). A new checkpoint appearing while a run is
followed therefore adds its new steps and never replays old ones as a false resume.

Entries of one step are merged (the Trainer logs the final `train_loss`/`train_runtime` as a
second entry at the last step). Non-numeric values (strings, lists) are not metrics and skipped;
`epoch` and `total_flos` are kept as logged. A copy that does not parse while the run is followed
is being rewritten: it is tried again at the next poll (reported only on a final read).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..schema import MAX_STEP, SourcePosition
from .lines import as_value
from .record import Malformed, Record

__all__ = ["STATE_FILE", "TrainerStateSource", "run_folder"]

STATE_FILE = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def run_folder(path: Path) -> Path:
    """The output folder a `trainer_state.json` belongs to (a checkpoint's parent)."""
    parent = path.parent
    return parent.parent if _CHECKPOINT.match(parent.name) else parent


def _candidates(root: Path) -> list[tuple[int, Path]]:
    """State files of an output folder, with an order key for ties (own copy first, then the
    latest checkpoint)."""
    found: list[tuple[int, Path]] = []
    own = root / STATE_FILE
    if own.is_file():
        found.append((1 << 62, own))
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        m = _CHECKPOINT.match(entry.name)
        if m and entry.is_dir():
            state = Path(entry.path) / STATE_FILE
            if state.is_file():
                found.append((int(m.group(1)), state))
    return found


def _load(file: Path) -> dict[str, Any] | str:
    """A state file's contents, or why they do not read."""
    try:
        # utf-8-sig: a file saved by an editor may begin with a byte order mark
        data = json.loads(file.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    except ValueError as exc:  # an integer literal past Python's 4,300-digit parse limit
        return f"cannot be read as JSON: {exc}".split(";")[0]
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    return (
        data if isinstance(data, dict) else "not a JSON object (a trainer_state.json was expected)"
    )


class TrainerStateSource:
    """Reads the log history of one output folder (or of one named `trainer_state.json`)."""

    def __init__(self, path: Path, report: Callable[[Malformed], None]) -> None:
        self.path = path
        self._report = report
        self._last_step: int | None = None
        self._entries = 0
        self._seen: tuple[str, int, int] | None = None  # (file, size, mtime) last parsed
        # entries that went back below a step yielded before are named once, not at each poll
        self._went_back_said: set[int] = set()

    def close(self) -> None:
        """Nothing is kept open: the file is rewritten whole, so it is read whole."""

    def position(self) -> SourcePosition | None:
        if self._last_step is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        # offset: the last step yielded (what the next read goes on after)
        return SourcePosition(
            str(self.path), st.st_dev, st.st_ino, self._last_step, self._entries, b"", b""
        )

    def resume(self, position: SourcePosition) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (position.dev, position.ino):
            return False
        self._last_step = position.offset
        self._entries = position.lines
        return True

    def _newest(self) -> tuple[Path, dict[str, Any] | str] | None:
        """The newest copy: its file and its state, or why it did not read."""
        files = [(0, self.path)] if self.path.is_file() else _candidates(self.path)
        best: tuple[int, int, Path, dict[str, Any] | str] | None = None
        for order, file in files:
            state = _load(file)
            step = state.get("global_step") if isinstance(state, dict) else None
            key = (step if isinstance(step, int) else -1, order)
            if best is None or key > best[:2]:
                best = (*key, file, state)
        return None if best is None else (best[2], best[3])

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """Entries logged since the last poll, one Record per step."""
        newest = self._newest()
        if newest is None:
            return
        file, state = newest
        try:
            st = file.stat()
        except OSError:
            return
        seen = (str(file), st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return
        if isinstance(state, str):
            if final:
                self._report(Malformed(str(file), 0, state))
            return
        history = state.get("log_history")
        if not isinstance(history, list):
            self._seen = seen
            self._report(
                Malformed(str(file), 0, "no 'log_history' list; is it a trainer_state.json?")
            )
            return
        self._seen = seen
        yield from self._records(file, history)

    def _records(self, file: Path, history: list[Any]) -> Iterator[Record]:
        step: int | None = None
        values: dict[str, float] = {}
        # The last step yielded before this read comes again whole (entries may have been added
        # to it since); entries below it were yielded then. Within this read, an entry below a
        # step it yielded is a history that went back (a second `train()` logging into the same
        # state): the store keeps one value per step, so it is named, not stored over the first.
        before = self._last_step
        for index, entry in enumerate(history, 1):
            raw_step = entry.get("step") if isinstance(entry, dict) else None
            if isinstance(raw_step, bool) or not isinstance(raw_step, int) or raw_step < 0:
                self._report(
                    Malformed(str(file), index, f"log_history entry {index} has no integer 'step'")
                )
                continue
            if raw_step > MAX_STEP:
                self._report(
                    Malformed(
                        str(file),
                        index,
                        f"log_history entry {index} has step {raw_step}, beyond the largest "
                        f"storable step {MAX_STEP} (2**63 - 1): not stored",
                    )
                )
                continue
            if before is not None and raw_step < before:
                continue
            top = None if step is None else max(step, self._last_step or 0)
            if top is not None and raw_step < top:
                if index not in self._went_back_said:
                    self._went_back_said.add(index)
                    self._report(
                        Malformed(
                            str(file),
                            index,
                            f"log_history entry {index} goes back to step {raw_step} after step "
                            f"{top} (a second training logged into this file?): not stored over "
                            "the values already read at that step",
                        )
                    )
                continue
            if step is not None and raw_step != step:
                yield self._emit(step, values)
                values = {}
            step = raw_step
            for key, value in entry.items():
                if key == "step" or isinstance(value, bool):
                    continue
                number = as_value(value) if isinstance(value, int | float) else None
                if number is not None:
                    values[key] = number
        if step is not None:
            yield self._emit(step, values)

    def _emit(self, step: int, values: dict[str, float]) -> Record:
        self._last_step = step
        self._entries += 1
        return Record(step=step, values=values)
