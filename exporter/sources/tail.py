"""Read a growing text file line by line, across rotation, truncation and in-place rewrites.

`TextTail.poll()` returns the complete lines written since the last call, numbered from the start
of the current file. It notices three things a training job does to its logs:

- rotation (the path now names a different file): the old file is read to its end, then the new
  one from its start;
- truncation (the file is shorter than what was read): it starts over from the first line;
- an in-place rewrite of the first line (SB3 rewrites the CSV header when a new key appears,
  padding the old rows): the new header is returned again and the rows already read are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["Line", "TextTail"]

_CHUNK = 1 << 20
_HEAD_LIMIT = 1 << 16


@dataclass(frozen=True)
class Line:
    """One complete line of text and its 1-based number; `restart` marks a file starting over."""

    number: int
    text: str
    restart: bool = False


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
            yield self._emit(pending, len(pending))

    def _emit(self, raw: bytes, consumed: int) -> Line:
        if self._lines == 0:
            self._head = raw + b"\n"
        self._offset += consumed
        self._lines += 1
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        line = Line(self._lines, text, restart=self._restart_pending)
        self._restart_pending = False
        return line
