"""Decode a batch of one-scalar TensorBoard events as arrays, without protobuf.

The event SummaryWriter writes for one `add_scalar` (torch's and tensorboardX's, so SB3 and
CleanRL) has one fixed layout, fields in number order:

    0x09 wall_time(f64)  [0x10 step(varint), absent when 0]
    0x2a len(n+9)  0x0a len(n+7)  0x0a len(n) tag(n bytes)  0x15 simple_value(f32)

so for a payload of length L the tag length is n = L - p - 11, where p (9, or 10 plus the step's
varint length) is where the summary starts, and every length byte can be checked against n.
Decoding a protobuf message costs microseconds per event, most of an import's reading time;
checking these bytes for a whole batch at once with numpy costs a small fraction of that. A
record that differs in the least (another field, a tag of 119 bytes or more, a tensor, a negative
step, a tag that is not UTF-8) is marked not `ok` and left to protobuf.

A wall time that is not a finite number (NaN, infinite: a broken clock or writer) is given as 0,
"not given", as an event without one: the store needs a time for every value, and a step without
one gets the time it is read (`Run.log`); `unclocked` marks them, for the reader to say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .tfrecord import RecordBatch, gather_bytes

__all__ = ["ScalarColumns", "decode_scalar_events"]

_MAX_TAG = 118  # the summary's length (n + 9) must fit one varint byte
_VARINT = 10


@dataclass(frozen=True)
class ScalarColumns:
    """Per record of a batch: whether it is a one-scalar event (`ok`), and if so its fields.

    Entries where `ok` is False hold garbage. `tag` indexes `tags`. `unclocked`: the event's
    wall time was not a finite number (its `wall_time` is 0, not given).
    """

    ok: npt.NDArray[np.bool_]
    step: npt.NDArray[np.int64]
    wall_time: npt.NDArray[np.float64]
    value: npt.NDArray[np.float32]
    tag: npt.NDArray[np.int64]
    tags: list[str]
    unclocked: npt.NDArray[np.bool_]


def decode_scalar_events(batch: RecordBatch) -> ScalarColumns:
    data = np.frombuffer(batch.data, dtype=np.uint8)
    start, length = batch.starts, batch.ends - batch.starts
    count = len(start)
    head = gather_bytes(data, start, 10)
    has_step = head[:, 9] == 0x10
    varint = gather_bytes(data, start + 10, _VARINT)
    more = varint >= 0x80
    size = np.argmin(more, axis=1) + 1  # bytes in the step's varint (first without the high bit)
    valid_varint = ~more.all(axis=1)
    summary = np.where(has_step, 10 + size, 9).astype(np.int64)
    n = length - summary - 11
    frame = gather_bytes(data, start + summary, 6)
    ok = (
        (length >= 20)
        & (head[:, 0] == 0x09)
        & (~has_step | valid_varint)
        & (n >= 0)
        & (n <= _MAX_TAG)
        & (frame[:, 0] == 0x2A)
        & (frame[:, 1] == n + 9)
        & (frame[:, 2] == 0x0A)
        & (frame[:, 3] == n + 7)
        & (frame[:, 4] == 0x0A)
        & (frame[:, 5] == n)
        & (gather_bytes(data, start + length - 5, 1)[:, 0] == 0x15)
    )

    low = (varint & 0x7F).astype(np.uint64)
    shifts = (np.arange(_VARINT, dtype=np.uint64) * np.uint64(7))[None, :]
    used = np.arange(_VARINT)[None, :] < size[:, None]
    step = (np.where(used, low << shifts, np.uint64(0)).sum(axis=1, dtype=np.uint64)).view(np.int64)
    step = np.where(has_step, step, 0)
    ok &= step >= 0  # a negative step is reported by the general path

    wall_time = np.ascontiguousarray(head[:, 1:9]).view("<f8").ravel()
    unclocked = ~np.isfinite(wall_time)
    if unclocked.any():  # NaN would reach the store as NULL, which it refuses (module doc)
        wall_time = np.where(unclocked, 0.0, wall_time)
    value = gather_bytes(data, start + length - 4, 4).view("<f4").ravel()

    tag = np.zeros(count, dtype=np.int64)
    tags: list[str] = []
    tag_start = start + summary + 6
    for width in np.unique(n[ok]).tolist():
        rows = np.flatnonzero(ok & (n == width))
        if width == 0:
            tag[rows] = len(tags)
            tags.append("")
            continue
        raw = gather_bytes(data, tag_start[rows], width)
        unique, inverse = np.unique(
            raw.view(np.dtype((np.void, width))).ravel(), return_inverse=True
        )
        ids = np.empty(len(unique), dtype=np.int64)
        for i, key in enumerate(unique.tolist()):
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                ids[i] = -1
                continue
            ids[i] = len(tags)
            tags.append(name)
        mapped = ids[inverse.ravel()]
        ok[rows[mapped < 0]] = False
        tag[rows] = mapped
    return ScalarColumns(ok, step, wall_time, value, tag, tags, unclocked)
