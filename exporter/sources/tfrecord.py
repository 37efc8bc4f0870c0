"""Incremental reader of TFRecord framing (the container of TensorBoard event files).

Each record is: u64 length, masked CRC-32C of the length, payload, masked CRC-32C of the payload.
The `tensorboard` package checks those CRCs in pure Python, which made reading ~85% of an import's
time. Here the reader hands out records in batches (one buffer and the payload offsets in it) so
the events in them can be decoded as arrays, and checks a batch's CRCs as arrays too: records of
equal length (an event log is mostly a few shapes of event repeated) are checksummed together,
one byte column at a time, with the CRC-32C table. `google-crc32c` (C) has no batch call, and one
call per record cost more than the whole table pass; it still checksums lengths that occur only
a few times in a batch, and is the reference the table is tested against.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import google_crc32c
import numpy as np
import numpy.typing as npt

__all__ = [
    "CorruptRecord",
    "RecordBatch",
    "RecordReader",
    "gather_bytes",
    "masked_crc32c",
    "masked_crc32c_rows",
]

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = 12  # length (8) + length crc (4)
_FIRST_CHUNK = 64 << 10
_MASK_DELTA = 0xA282EAD8


class CorruptRecord(ValueError):
    """A record whose checksum does not match: the file is damaged at `offset`."""

    def __init__(self, offset: int, what: str) -> None:
        self.offset = offset
        super().__init__(f"{what} checksum mismatch at byte {offset}")


def masked_crc32c(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _crc_tables() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """CRC-32C (reflected Castagnoli polynomial) steps for one byte and for two bytes at once."""
    one = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        one = np.where(one & 1, (one >> 1) ^ np.uint32(0x82F63B78), one >> 1).astype(np.uint32)
    pair = np.arange(65536, dtype=np.uint32)
    low = one[pair & 0xFF]
    two = one[(low ^ (pair >> 8)) & 0xFF] ^ (low >> 8)
    return one, two


_ONE, _TWO = _crc_tables()
_FEW = 16  # below this many records of one length, one C call each is cheaper
_WIDEST = 512  # a table pass costs a numpy call per byte: longer records get a C call each


def masked_crc32c_rows(
    buf: bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint32]:
    """The masked CRC-32C of `buf[starts[i]:ends[i]]` for every i."""
    data = np.frombuffer(buf, dtype=np.uint8)
    crcs = np.empty(len(starts), dtype=np.uint32)
    if not len(starts):
        return crcs
    lengths = ends - starts
    widths, inverse = np.unique(lengths, return_inverse=True)
    if len(widths) == 1:
        groups = [np.arange(len(lengths))]
    else:
        # a stable sort of small integers is a radix sort in numpy: linear, unlike the lengths'
        key = inverse.ravel().astype(np.uint16 if len(widths) < 1 << 16 else np.int64)
        order = np.argsort(key, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(key[order])) + 1)
    for group in groups:
        width = int(lengths[group[0]])
        if len(group) < _FEW or width > _WIDEST:
            for i in group.tolist():
                crcs[i] = google_crc32c.value(buf[starts[i] : ends[i]])
            continue
        columns = gather_bytes(data, starts[group], width)
        words = np.asfortranarray(
            np.ascontiguousarray(columns[:, : width - width % 2]).view("<u2")
        )  # column j holds bytes 2j and 2j+1 of every record, contiguous
        crc = np.full(len(group), 0xFFFFFFFF, dtype=np.uint32)
        for j in range(width // 2):
            crc = _TWO[(crc ^ words[:, j]) & 0xFFFF] ^ (crc >> 16)
        if width % 2:
            crc = _ONE[(crc ^ columns[:, -1]) & 0xFF] ^ (crc >> 8)
        crcs[group] = crc ^ np.uint32(0xFFFFFFFF)
    rotated = (crcs >> np.uint32(15)) | (crcs << np.uint32(17))
    masked: npt.NDArray[np.uint32] = rotated + np.uint32(_MASK_DELTA)
    return masked


def gather_bytes(
    data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], width: int
) -> npt.NDArray[np.uint8]:
    """`width` bytes from each offset of a byte array, one row per offset (offsets may be
    unaligned; bytes past the end of `data` read as its last byte)."""
    if (
        len(offsets)
        and 0 < width <= len(data)
        and int(offsets.min()) >= 0
        and int(offsets.max()) + width <= len(data)
    ):
        # rows of a sliding window: one copy per row, no index per byte
        rows: npt.NDArray[np.uint8] = np.lib.stride_tricks.sliding_window_view(data, width)[offsets]
        return rows
    index = offsets[:, None] + np.arange(width)
    np.clip(index, 0, len(data) - 1, out=index)
    gathered: npt.NDArray[np.uint8] = data[index]
    return gathered


_CYCLE_MAX = 64  # the longest repeating pattern of record lengths looked for
_LOOK = 2 * _CYCLE_MAX


def _find_heads(buf: bytes, pos: int) -> tuple[npt.NDArray[np.int64], int]:
    """Where each complete record from `pos` begins (by its length field), and where the
    first incomplete one does.

    Following the lengths is a Python step per record. An event file mostly repeats one cycle
    of record lengths (the same tags every step), so once the last lengths repeat, the cycle
    is assumed to go on and the assumption is checked for all of the buffer at once: the
    length fields at the predicted offsets must be the predicted ones, up to the first that is
    not, from where the lengths are followed one by one again. The checksums are verified
    afterwards either way."""
    size = len(buf)
    unpack_len = _LEN.unpack_from
    parts: list[npt.NDArray[np.int64]] = []
    heads: list[int] = []
    lengths: list[int] = []
    data: npt.NDArray[np.uint8] | None = None
    next_try = _LOOK
    while size - pos >= _HEADER:
        length = unpack_len(buf, pos)[0]
        end = pos + _HEADER + length
        if size < end + 4:
            break
        heads.append(pos)
        lengths.append(length)
        pos = end + 4
        if len(lengths) < next_try:
            continue
        cycle = _cycle(lengths[-_LOOK:])
        next_try = len(lengths) + _LOOK
        if cycle is None:
            continue
        if data is None:
            data = np.frombuffer(buf, dtype=np.uint8)
        predicted, stop = _predict(data, pos, cycle)
        if len(predicted):
            parts.append(np.array(heads, dtype=np.int64))
            parts.append(predicted)
            heads, lengths = [], []
            next_try = _LOOK
            pos = stop
    parts.append(np.array(heads, dtype=np.int64))
    return np.concatenate(parts), pos


def _cycle(lengths: list[int]) -> list[int] | None:
    """The shortest cycle the lengths repeat (ending with the last one), or None."""
    count = len(lengths)
    for period in range(1, min(_CYCLE_MAX, count // 2) + 1):
        if lengths[period:] == lengths[:-period]:
            return lengths[-period:]
    return None


def _predict(
    data: npt.NDArray[np.uint8], pos: int, cycle: list[int]
) -> tuple[npt.NDArray[np.int64], int]:
    """The records from `pos` that continue `cycle` (their offsets, checked against their
    length fields), and where the first one that does not begins."""
    frames = np.array(cycle, dtype=np.int64) + _HEADER + 4
    span = int(frames.sum())
    repeats = (len(data) - pos) // span
    if repeats <= 0:
        return np.zeros(0, dtype=np.int64), pos
    within = np.concatenate([[0], np.cumsum(frames)[:-1]])
    heads = (pos + span * np.arange(repeats, dtype=np.int64)[:, None] + within).ravel()
    stored = gather_bytes(data, heads, 8).view("<u8").ravel()
    expected = np.tile(np.array(cycle, dtype=np.uint64), repeats)
    wrong = np.flatnonzero(stored != expected)
    if len(wrong):
        first = int(wrong[0])
        return heads[:first], int(heads[first])
    return heads, pos + span * repeats


def _next_frame(buf: bytes, start: int) -> int | None:
    """The first offset from `start` where a record header's length checksum matches."""
    unpack_crc = _CRC.unpack_from
    for offset in range(start, len(buf) - _HEADER + 1):
        if masked_crc32c(buf[offset : offset + 8]) == unpack_crc(buf, offset + 8)[0]:
            return offset
    return None


@dataclass(frozen=True)
class RecordBatch:
    """Complete records read in one go: payload `i` is `data[starts[i]:ends[i]]`."""

    data: bytes
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    base: int = 0
    """File offset of `data[0]`."""

    def record_offset(self, i: int) -> int:
        """File offset where record `i` begins (its length header)."""
        return self.base + int(self.starts[i]) - _HEADER

    def __len__(self) -> int:
        return len(self.starts)

    def payload(self, i: int) -> bytes:
        return self.data[int(self.starts[i]) : int(self.ends[i])]


class RecordReader:
    """Yields batches of complete records from an open file, remembering where a partial one
    began.

    Calling `batches()` again after the file grew continues from the first incomplete record,
    so a writer caught mid-record is never misread.
    """

    def __init__(self, handle: BinaryIO, chunk_size: int = 4 << 20, *, start: int = 0) -> None:
        """Read from `start`, a record boundary (a `consumed` offset saved earlier)."""
        self._handle = handle
        self._chunk_size = chunk_size
        # The first reads are small so the first records come out (and an import's first write
        # goes out) at once; later reads are large, which is cheaper per record.
        self._chunk = min(chunk_size, _FIRST_CHUNK)
        self._buffer = b""
        self._base = start  # file offset of the first byte of `_buffer`
        handle.seek(start)
        self._pos = 0  # position in `_buffer` of the first record not yet handed out
        self._scanning = False  # looking for the next valid record after a damaged length

    @property
    def consumed(self) -> int:
        """File offset just past the last complete record handed out."""
        return self._base + self._pos

    def batches(
        self, on_corrupt: Callable[[CorruptRecord], None] | None = None
    ) -> Iterator[RecordBatch]:
        """Every complete record from here on. At a damaged record: without `on_corrupt`, raise
        CorruptRecord after the records before it; with it, report it there and go on with the
        next valid record (right after it when only its payload is damaged, else at the next
        offset whose length checksum matches)."""
        while True:
            if self._scanning:
                found = _next_frame(self._buffer, self._pos)
                if found is None:
                    self._pos = max(self._pos, len(self._buffer) - _HEADER + 1)
                else:
                    self._pos = found
                    self._scanning = False
            if not self._scanning:
                batch, corrupt, skip_to = self._frame()
                if batch is not None:
                    yield batch
                if corrupt is not None:
                    if on_corrupt is None:
                        raise corrupt
                    on_corrupt(corrupt)
                    if skip_to is not None:
                        self._pos = skip_to
                    else:
                        self._pos = corrupt.offset - self._base + 1
                        self._scanning = True
                    continue
            data = self._handle.read(self._chunk)
            self._chunk = min(self._chunk_size, self._chunk * 4)
            if not data:
                return
            self._buffer = self._buffer[self._pos :] + data
            self._base += self._pos
            self._pos = 0

    def _frame(self) -> tuple[RecordBatch | None, CorruptRecord | None, int | None]:
        """The complete records from `_pos`; the first damaged one, if any; and where the next
        record starts after it when its framing (length) is intact."""
        buf = self._buffer
        size = len(buf)
        found, pos = _find_heads(buf, self._pos)
        heads = found.tolist()
        corrupt: CorruptRecord | None = None
        skip_to: int | None = None
        if size - pos >= _HEADER:
            # A record still incomplete: its length must be right, or this waits forever.
            (length_crc,) = _CRC.unpack_from(buf, pos + 8)
            if masked_crc32c(buf[pos : pos + 8]) != length_crc:
                corrupt = CorruptRecord(self._base + pos, "length")
        if not heads:
            return None, corrupt, None
        data = np.frombuffer(buf, dtype=np.uint8)
        head = found
        lengths = gather_bytes(data, head, 8).view("<u8").ravel().astype(np.int64)
        ends = head + _HEADER + lengths
        # The length is checked first: a damaged length frames the records after it wrongly.
        stored_length_crcs = gather_bytes(data, head + 8, 4).view("<u4").ravel()
        stored_payload_crcs = gather_bytes(data, ends, 4).view("<u4").ravel()
        bad_length = masked_crc32c_rows(buf, head, head + 8) != stored_length_crcs
        bad_payload = masked_crc32c_rows(buf, head + _HEADER, ends) != stored_payload_crcs
        bad = np.flatnonzero(bad_length | bad_payload)
        if len(bad):
            first = int(bad[0])
            what = "length" if bad_length[first] else "payload"
            corrupt = CorruptRecord(self._base + heads[first], what)
            if what == "payload":
                skip_to = int(ends[first]) + 4
            head, ends = head[:first], ends[:first]
            pos = heads[first]
        self._pos = pos
        if not len(head):
            return None, corrupt, skip_to
        return RecordBatch(buf, head + _HEADER, ends, self._base), corrupt, skip_to
