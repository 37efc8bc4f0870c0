"""Read a growing text file line by line, across rotation, truncation and in-place rewrites.

`TextTail.poll()` returns the complete lines written since the last call, numbered from the start
of the current file. It notices three things a training job does to its logs:

- rotation (the path now names a different file): the old file is read to its end, then the new
  one from its start;
- truncation (the file is shorter than what was read): it starts over from the first line;
- an in-place rewrite of the first line (SB3 rewrites the CSV header when a new key appears,
  padding the old rows): the new header is returned again and the rows already read are skipped.

`position()` says how far it has read and `resume(position)` goes on from there in a new process,
only when the path still names the same file (device, inode, first line and the bytes just before
the position all match); otherwise the file is read from its start.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..schema import SourcePosition

__all__ = ["Line", "TextTail", "read_mark"]

_CHUNK = 1 << 20
_HEAD_LIMIT = 1 << 16
_MARK = 64


def read_mark(fh: BinaryIO, offset: int) -> bytes:
    """The bytes just before `offset` (up to 64): with the device, inode and head they tell a
    file that only grew from one replaced under the same name (inode numbers get reused)."""
    start = max(0, offset - _MARK)
    # pread: a reader in the middle of the file keeps its place
    return os.pread(fh.fileno(), offset - start, start)


@dataclass(frozen=True)
class Line:
    """One complete line of text and its 1-based number; `restart` marks a file starting over."""

    number: int
    text: str
    restart: bool = False
    terminated: bool = True
    """False for a last line read without its newline (`poll(final=True)`)."""


class TextTail:
    """Incremental line reader of one path; call `close()` when done."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        self._lines = 0
        self._head: bytes | None = None
        self._restart_pending = False

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def position(self) -> SourcePosition | None:
        """How far the current file has been read, or None before anything was read."""
        if self._fh is None or self._ino is None or self._offset == 0:
            return None
        return SourcePosition(
            str(self.path),
            self._ino[0],
            self._ino[1],
            self._offset,
            self._lines,
            self._head or b"",
            read_mark(self._fh, self._offset),
        )

    def resume(self, position: SourcePosition) -> bool:
        """Go on from a position saved by an earlier reader if the path still names that file
        (and it did not shrink); False, and nothing changed, otherwise."""
        if self._fh is not None or position.offset <= 0 or not position.head:
            return False
        try:
            st = os.stat(self.path)
            fh = open(self.path, "rb")  # noqa: SIM115 - held open across polls
        except OSError:
            return False
        same = (
            (st.st_dev, st.st_ino) == (position.dev, position.ino)
            and st.st_size >= position.offset
            and fh.readline(_HEAD_LIMIT) == position.head
            and read_mark(fh, position.offset) == position.mark
        )
        if not same:
            fh.close()
            return False
        self._fh = fh
        self._ino = (st.st_dev, st.st_ino)
        self._offset = position.offset
        self._lines = position.lines
        self._head = position.head
        self._restart_pending = False
        return True

    def poll(self, *, final: bool = False) -> Iterator[Line]:
        """New complete lines; with `final`, a last line without a newline counts too.

        Consume the iterator before polling again.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._fh is not None:  # deleted or rotated away with nothing new in its place
                yield from self._drain(final=True)
                self.close()
            return
        if not stat.S_ISREG(st.st_mode):  # replaced by a FIFO or device: reading would block
            return
        ident = (st.st_dev, st.st_ino)
        if self._fh is not None and ident != self._ino:
            yield from self._drain(final=True)  # rotated: finish the old file first
            self.close()
        if self._fh is None:
            if self._ino is not None:  # a new file under the same path
                self._reset()
            self._open(ident)
        assert self._fh is not None
        if os.fstat(self._fh.fileno()).st_size < self._offset:
            self._reset()  # truncated
        elif self._head is not None and self._read_head() != self._head:
            yield from self._resync()
            return
        yield from self._drain(final=final)

    def _open(self, ident: tuple[int, int]) -> None:
        self._fh = open(self.path, "rb")  # noqa: SIM115 - held open across polls
        self._ino = ident

    def _reset(self) -> None:
        self._offset = 0
        self._lines = 0
        self._head = None
        self._restart_pending = True

    def _read_head(self) -> bytes | None:
        assert self._fh is not None
        self._fh.seek(0)
        head = self._fh.readline(_HEAD_LIMIT)
        return head if head.endswith(b"\n") else None

    def _resync(self) -> Iterator[Line]:
        """The first line changed in place: re-emit it, skip the rows already read, go on."""
        done = self._lines
        self._reset()
        for line in self._drain(final=False):
            if line.number == 1 or line.number > done:
                yield line

    def _drain(self, *, final: bool) -> Iterator[Line]:
        fh = self._fh
        assert fh is not None
        fh.seek(self._offset)
        pending = b""
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            parts = (pending + chunk).split(b"\n")
            pending = parts.pop()
            for raw in parts:
                yield self._emit(raw, len(raw) + 1)
        if final and pending:
            yield self._emit(pending, len(pending), terminated=False)

    def _emit(self, raw: bytes, consumed: int, *, terminated: bool = True) -> Line:
        if self._lines == 0:
            self._head = raw + b"\n"
        self._offset += consumed
        self._lines += 1
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        line = Line(self._lines, text, restart=self._restart_pending, terminated=terminated)
        self._restart_pending = False
        return line
