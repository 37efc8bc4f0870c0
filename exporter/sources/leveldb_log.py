"""The record framing of a W&B transaction log (`run-<id>.wandb`), read incrementally.

W&B writes its run log in LevelDB's log format (wandb's own reader of it, up to wandb 0.29,
was `wandb/sdk/internal/datastore.py`; its writer is now wandb-core's
`core/pkg/leveldb/record.go`): a 7-byte file header (`:W&B`, magic 0xBEE1 little-endian,
version 0), then 32 KiB blocks of chunks, each chunk a 7-byte header (CRC-32 of the chunk type
byte and the payload, little-endian uint32; payload length, uint16; type: 1 FULL, 2 FIRST,
3 MIDDLE, 4 LAST) and its payload. A record is one FULL chunk or FIRST, MIDDLE..., LAST; a
block's last < 7 bytes are zero padding. wandb 0.30 removed the Python reader (the pinned 0.31.0
has none), so the framing is read here and the payloads are decoded with wandb's own protobuf
`Record` (`wandb_offline.py`).

`poll()` returns the payloads of the records written whole since the last poll; a record whose
chunks are not all written yet is read at a later poll (reported as cut off on a final one).
A chunk whose checksum does not match is reported and the rest of its block skipped, as LevelDB's
reader recovers (the chunk's length may be the damaged part, so where the next chunk starts is not
known): the message gives the bytes skipped. A FIFO, socket or device named as a log is refused,
never read (reading would wait for a writer forever).
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["BLOCK", "RecordLog"]

BLOCK = 32 * 1024
_HEADER = 7
_FILE_HEADER = struct.pack("<4sHB", b":W&B", 0xBEE1, 0)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class RecordLog:
    """Payloads of one LevelDB-log file; `problem` gets what could not be read."""

    def __init__(self, path: Path, problem: Callable[[str], None]) -> None:
        self.path = path
        self._problem = problem
        self._ident: tuple[int, int] | None = None
        self.offset = 0
        """Bytes read: the end of the last whole record (or of the file header)."""
        self.records = 0
        self._bad = False  # not a W&B log: never read again
        # damaged records already said: one in the file's last, partly written block is read
        # again at every poll (nothing whole after it moves `offset`), and said once
        self._damaged: set[int] = set()

    def poll(self, *, final: bool = False) -> Iterator[bytes]:
        """Payloads of the records written whole since the last poll."""
        if self._bad:
            return
        try:
            # O_NONBLOCK: a plain open() of a FIFO waits for a writer (for ever, and unkillable
            # by SIGTERM); this returns at once, and fstat tells what was opened
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._bad = True
                self._problem(
                    "not a regular file (a FIFO, socket or device), so it is not read: reading "
                    "it would wait for a writer forever; replace it with the run's log W&B wrote"
                )
                return
            if (st.st_dev, st.st_ino) != self._ident or st.st_size < self.offset:
                self._ident, self.offset, self.records = (st.st_dev, st.st_ino), 0, 0
                self._damaged.clear()
            if self.offset == 0:
                head = os.pread(fd, _HEADER, 0)
                if len(head) < _HEADER and not final:
                    return
                if head != _FILE_HEADER:
                    self._bad = True
                    self._problem("not a W&B run log: it does not start with W&B's header")
                    return
                self.offset = _HEADER
            yield from self._scan(fd, final)
        finally:
            os.close(fd)

    def _scan(self, fd: int, final: bool) -> Iterator[bytes]:
        pos = self.offset
        parts: list[bytes] | None = None  # the chunks of a record read so far
        lost = False  # the bytes just before were skipped as damaged
        while True:
            base = pos - pos % BLOCK
            block = os.pread(fd, BLOCK, base)
            i = pos - base
            while True:
                if BLOCK - i < _HEADER:  # the block's zero padding
                    i = BLOCK
                    break
                if i + _HEADER > len(block):
                    self._stop(final, parts is not None or i < len(block))
                    return
                crc, length, kind = struct.unpack_from("<IHB", block, i)
                if crc == 0 and length == 0 and kind == 0:
                    if len(block) < BLOCK:
                        self._stop(final, parts is not None)
                        return
                    i = BLOCK  # a zeroed rest of block
                    break
                end = i + _HEADER + length
                if end > len(block):
                    if len(block) < BLOCK:  # written only in part so far
                        self._stop(final, True)
                        return
                    end = BLOCK  # a length running past its block: corrupt
                if end > BLOCK or zlib.crc32(block[i + 6 : end]) != crc:
                    last = base + len(block) - 1
                    if base + i not in self._damaged:
                        self._damaged.add(base + i)
                        self._problem(
                            f"a damaged record at byte {base + i} (checksum): skipped the rest of its "
                            f"32 KiB block, bytes {base + i}-{last} ({last - base - i + 1} bytes), "
                            "with every record in it (its length may be what is damaged, so where "
                            "the next record starts is not known); the log is read on from byte "
                            f"{last + 1}"
                        )
                    parts, i, lost = None, BLOCK, True
                    break
                payload = block[i + _HEADER : end]
                start, i = base + i, end
                if kind == _FULL:
                    parts, lost = None, False
                    yield from self._whole([payload], base + i)
                elif kind == _FIRST:
                    parts, lost = [payload], False
                elif kind in (_MIDDLE, _LAST) and parts is not None:
                    parts.append(payload)
                    if kind == _LAST:
                        yield from self._whole(parts, base + i)
                        parts = None
                elif lost and kind in (_MIDDLE, _LAST):
                    # the rest of a record begun in the skipped bytes: its loss was said there
                    lost = kind == _MIDDLE
                else:
                    self._problem(f"a record piece out of order at byte {start}; skipped")
                    parts = None
            pos = base + i
            if len(block) < BLOCK:
                self._stop(final, parts is not None)
                return

    def _whole(self, parts: list[bytes], end: int) -> Iterator[bytes]:
        self.offset = end
        self.records += 1
        yield b"".join(parts)

    def _stop(self, final: bool, cut: bool) -> None:
        if final and cut:
            self._problem("the last record is cut off (the writer stopped mid-record)")
