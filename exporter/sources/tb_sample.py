"""A sample of a long TensorBoard event file's steps, spread over the whole file, read in a
fraction of the time reading it all takes: what a whole-run chart is drawn from while an import
stores every value (`exporter.store.preview`).

The file is cut into `samples` equal byte ranges; at the start of each, a short window is read,
the first record header whose length checksum holds is taken as a record boundary (as the reader
resynchronises after damage, `tfrecord._next_frame`), and the window's records are framed and
checked (both checksums) and decoded as one-scalar events (`scalar_events`). Of the steps whole
inside the window (not the first or the last seen in it, which may be cut), the first is kept. A
window with none (another kind of record, a step wider than the window) gives nothing: this is a
sketch, the import reads everything. TensorBoard keeps a reservoir sample of 1,000 points per tag
for its charts (its `samples_per_plugin` setting, tensorboard/plugins/core/core_plugin.py); a step a
thousandth of the way apart serves the same purpose. The range's last step is added, so the
sketch reaches as far as the file does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .record import Record, add_value
from .scalar_events import decode_scalar_events
from .tfrecord import RecordBatch, _next_frame, masked_crc32c

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = 12

__all__ = ["SAMPLE_STEPS", "sample_offsets", "sample_steps"]

SAMPLE_STEPS = 1000
_WINDOW = 16 << 10
"""Bytes read at each place: some 300 one-scalar events (a step of up to a hundred tags)."""
_FEW_RECORDS = 40
_RECORDS = 256
"""Records framed per window: first 40 (three steps of up to 13 tags), then, where that held no
whole step, up to 256 (85 tags)."""


def sample_offsets(start: int, span: int, samples: int) -> Iterator[tuple[int, int]]:
    """(k, offset) of the starts of `samples` equal byte ranges of [start, start + span), each
    offset once (a span shorter than `samples` bytes repeats some): where a sample reads."""
    for k in range(samples):
        at = start + span * k // samples
        if k and at == start + span * (k - 1) // samples:
            continue
        yield k, at


def sample_steps(
    path: Path, start: int = 0, end: int | None = None, samples: int = SAMPLE_STEPS
) -> list[Record]:
    """About `samples` whole steps spread over bytes [start, end) of the event file (its end by
    default), by step; empty when nothing there is a one-scalar event."""
    size = os.stat(path).st_size if end is None else end
    span = max(0, size - start)
    if span <= 0:
        return []
    windows: dict[int, bytes] = {}
    with open(path, "rb") as fh:
        for k, at in sample_offsets(start, span, samples):
            fh.seek(at)
            windows[k] = fh.read(_WINDOW)
    found: dict[int, Record] = {}
    # few records a window first (three steps of a dozen tags); more where that was not enough
    todo = list(windows)
    for limit in (_FEW_RECORDS, _RECORDS):
        whole = _whole_steps({k: windows[k] for k in todo}, limit)
        for record in whole.values():
            found.setdefault(record.step, record)
        todo = [k for k in todo if k not in whole]
        if not todo:
            break
    last = _last_step(path, start, size)
    if last is not None:
        found.setdefault(last.step, last)
    return [found[s] for s in sorted(found)]


def _last_step(path: Path, start: int, end: int) -> Record | None:
    """The step the range ends with, whole when the window before the end holds a step before
    it (what a chart of the whole run reaches to)."""
    at = max(start, end - _WINDOW)
    with open(path, "rb") as fh:
        fh.seek(at)
        buf = fh.read(end - at)
    payloads = _records(buf, 1 << 20)
    if not payloads:
        return None
    lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(lengths)
    cols = decode_scalar_events(RecordBatch(b"".join(payloads), ends - lengths, ends))
    ok = np.flatnonzero(cols.ok)
    if not ok.size:
        return None
    step = int(cols.step[ok[-1]])
    if at > start and int(cols.step[ok[0]]) == step:
        return None  # the window may have begun inside it
    values: dict[str, float | list[float]] = {}
    wall = 0.0
    for i in ok.tolist():
        if int(cols.step[i]) == step:
            add_value(values, cols.tags[int(cols.tag[i])], float(cols.value[i]))
            wall = float(cols.wall_time[i])
    return Record(step, values, wall or None)


def _whole_steps(windows: dict[int, bytes], limit: int) -> dict[int, Record]:
    """Per window, its first whole step (framing at most `limit` records of it)."""
    payloads: list[bytes] = []
    owner: list[int] = []  # the window each payload was read in
    for k, buf in windows.items():
        for payload in _records(buf, limit):
            payloads.append(payload)
            owner.append(k)
    if not payloads:
        return {}
    # every window's records decoded as one batch: a numpy call per window cost more than the rest
    lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(lengths)
    cols = decode_scalar_events(RecordBatch(b"".join(payloads), ends - lengths, ends))
    out: dict[int, Record] = {}
    window = -1
    steps: list[int] = []
    values: list[dict[str, float | list[float]]] = []
    wall: list[float] = []
    for i in np.flatnonzero(cols.ok).tolist():
        if owner[i] != window:
            window, steps, values, wall = owner[i], [], [], []
        if window in out:
            continue
        step = int(cols.step[i])
        if not steps or steps[-1] != step:
            steps.append(step)
            values.append({})
            wall.append(0.0)
            if len(steps) == 3:  # the second step is whole: the one after it began
                out[window] = Record(steps[1], values[1], wall[1] or None)
                continue
        add_value(values[-1], cols.tags[int(cols.tag[i])], float(cols.value[i]))
        wall[-1] = float(cols.wall_time[i])
    return out


def _records(buf: bytes, limit: int) -> list[bytes]:
    """The payloads of the whole records in a window (both checksums hold), from the first
    offset whose length checksum holds; at most `limit`."""
    pos = _next_frame(buf, 0)
    out: list[bytes] = []
    while pos is not None and pos + _HEADER <= len(buf) and len(out) < limit:
        (length,) = _LEN.unpack_from(buf, pos)
        (length_crc,) = _CRC.unpack_from(buf, pos + 8)
        end = pos + _HEADER + length
        if masked_crc32c(buf[pos : pos + 8]) != length_crc or end + 4 > len(buf):
            break
        payload = buf[pos + _HEADER : end]
        if masked_crc32c(payload) != _CRC.unpack_from(buf, end)[0]:
            break
        out.append(payload)
        pos = end + 4
    return out
