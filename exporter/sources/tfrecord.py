"""Incremental reader of TFRecord framing (the container of TensorBoard event files).

Each record is: u64 length, masked CRC-32C of the length, payload, masked CRC-32C of the payload.
The `tensorboard` package checks those CRCs in pure Python, which made reading ~85% of an import's
time; `google-crc32c` computes the same checksum in C. Event payloads are still decoded with the
`tensorboard` package's protobufs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c

__all__ = ["CorruptRecord", "RecordReader", "masked_crc32c"]

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = 12  # length (8) + length crc (4)
_MASK_DELTA = 0xA282EAD8


class CorruptRecord(ValueError):
    """A record whose checksum does not match: the file is damaged at `offset`."""

    def __init__(self, offset: int, what: str) -> None:
        self.offset = offset
        super().__init__(f"{what} checksum mismatch at byte {offset}")


def masked_crc32c(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class RecordReader:
    """Yields complete records from an open file, remembering where a partial one began.

    Calling `records()` again after the file grew continues from the first incomplete record,
    so a writer caught mid-record is never misread.
    """

    def __init__(self, handle: BinaryIO, chunk_size: int = 1 << 20, *, start: int = 0) -> None:
        """Read from `start`, a record boundary (a `consumed` offset saved earlier)."""
        self._handle = handle
        self._chunk = chunk_size
        self._buffer = b""
        self._base = start  # file offset of the first byte of `_buffer`
        handle.seek(start)
        self._pos = 0  # position in `_buffer` of the first record not yet yielded

    @property
    def consumed(self) -> int:
        """File offset just past the last complete record yielded."""
        return self._base + self._pos

    def records(self) -> Iterator[bytes]:
        crc = google_crc32c.value
        unpack_len = _LEN.unpack_from
        unpack_crc = _CRC.unpack_from
        while True:
            buf = self._buffer
            pos = self._pos
            size = len(buf)
            while size - pos >= _HEADER:
                (length,) = unpack_len(buf, pos)
                (length_crc,) = unpack_crc(buf, pos + 8)
                c = crc(buf[pos : pos + 8])
                if (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
                    raise CorruptRecord(self._base + pos, "length")
                end = pos + _HEADER + length
                if size < end + 4:
                    break
                payload = buf[pos + _HEADER : end]
                (payload_crc,) = unpack_crc(buf, end)
                c = crc(payload)
                if (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF != payload_crc:
                    raise CorruptRecord(self._base + pos, "payload")
                pos = self._pos = end + 4
                yield payload
            data = self._handle.read(self._chunk)
            if not data:
                return
            self._buffer = self._buffer[self._pos :] + data
            self._base += self._pos
            self._pos = 0
