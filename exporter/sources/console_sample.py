"""A sample of a long console log's steps, spread over the whole file, read in a fraction of the
time reading it all takes: what a whole-run chart is drawn from while an import stores every value
(`exporter.store.preview`), as `tb_sample` does for an event file.

The file is cut into `samples` equal byte ranges; at the start of each, a short window is read,
the text up to its first newline dropped (the middle of a line), and the first whole line after it
that prints its own step is kept: verl's `step:N - key:value - ...` (`verl_console`) or OpenRLHF's
`Global step N: {...}` (`openrlhf_console`), behind whatever prefix, colour codes and overdrawn
progress bars the line carries (`console_text`). The Hugging Face Trainer's printed dicts are not
sampled: their step is placed by what was printed before them (`trainer_dicts`), which a window in
the middle of the file does not hold, so a log of them gets no sketch. A window with no such line
(a stretch of other output, a line longer than the window) gives nothing: this is a sketch, the
import reads everything. The range's last whole metric line is added, so the sketch reaches as far
as the file does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from ..schema import MAX_STEP
from .console_text import strip_ansi
from .lines import BadLine
from .openrlhf_console import global_step_line
from .record import Record
from .tb_sample import SAMPLE_STEPS, sample_offsets
from .verl_console import parse_verl

__all__ = ["sample_steps"]

_WINDOW = 32 << 10
"""Bytes read at each place: a verl line of 120 keys is some 5 KB."""
_LAST = 1 << 20
"""How far back from the range's end its last metric line is looked for."""


def sample_steps(
    path: Path, start: int = 0, end: int | None = None, samples: int = SAMPLE_STEPS
) -> list[Record]:
    """About `samples` steps printed by lines spread over bytes [start, end) of a console log
    (its end by default), by step; empty when none of those lines prints its step."""
    size = os.stat(path).st_size if end is None else end
    span = max(0, size - start)
    if span <= 0:
        return []
    found: dict[int, Record] = {}
    with open(path, "rb") as fh:
        for _, at in sample_offsets(start, span, samples):
            fh.seek(at)
            buf = fh.read(min(_WINDOW, size - at))
            record = _first(buf, whole_start=at == start)
            if record is not None:
                found.setdefault(record.step, record)
        last = _last(fh, start, size)
    if last is not None:
        found[last.step] = last
    return [found[s] for s in sorted(found)]


def _first(buf: bytes, *, whole_start: bool) -> Record | None:
    """The first whole line of a window that prints its step (the window's start is a line's
    start only at the start of the range: a read position is just past a line)."""
    lines = buf.split(b"\n")
    lines.pop()  # not ended inside the window
    if not whole_start and lines:
        lines.pop(0)  # begun before the window
    for line in lines:
        record = _record(line)
        if record is not None:
            return record
    return None


def _last(fh: BinaryIO, start: int, end: int) -> Record | None:
    """The last whole line before `end` that prints its step, looked for up to `_LAST` back."""
    at = end
    tail = b""
    while at > start and end - at < _LAST:
        step = min(_WINDOW, at - start)
        at -= step
        fh.seek(at)
        tail = fh.read(step) + tail
        lines = tail.split(b"\n")
        lines.pop()  # after the last newline: a line cut at the range's end, or nothing
        if at > start:
            lines = lines[1:]  # may have begun before what was read
        for line in reversed(lines):
            record = _record(line)
            if record is not None:
                return record
    return None


def _record(line: bytes) -> Record | None:
    """A line's printed step and values, as the import reads the line shown (`console.py`)."""
    text = line.decode("utf-8", errors="replace").rstrip("\r")
    if "step" not in text.lower():
        return None
    shown = strip_ansi(text).split("\r")[-1]
    try:
        verl = parse_verl(shown)
        orlhf = None if verl is not None else global_step_line(shown)
    except BadLine:
        return None  # the import names it; a sketch passes it by
    if verl is not None and verl.step <= MAX_STEP:
        return Record(verl.step, dict(verl.values))
    if orlhf is not None and orlhf[0] <= MAX_STEP:
        return Record(orlhf[0], dict(orlhf[1].values))
    return None  # (a step beyond the largest storable one: the import names it)
