"""Rows read straight from the pages of a damaged sqlite file, where sqlite itself cannot walk to them.

sqlite finds a row by walking its table's b-tree from the root; one lost interior page (a file
truncated at the end loses the pages allocated last, interior ones among them) hides every row
under it, and each query touching it fails with "database disk image is malformed". The rows
themselves usually survive in their leaf pages. sqlite's own answer is the shell's `.recover`,
but it needs the `sqlite_dbpage` table, which Debian's and APSW's builds leave out (checked:
`no such table: sqlite_dbpage`), so this module reads leaf pages itself, following the file
format (sqlite.org/fileformat2.html: the header, b-tree pages, cells, overflow chains, records).

It reads only table leaf pages (type 13) that are in use: pages on the freelist hold deleted
rows and are skipped, as are the pages of b-trees sqlite can still walk (`skip`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["FileLayout", "freelist_pages", "layout", "leaf_records"]

Value = int | float | str | bytes | None

_TABLE_LEAF = 13
_TEXT_CODECS = {1: "utf-8", 2: "utf-16-le", 3: "utf-16-be"}


@dataclass(frozen=True)
class FileLayout:
    """What the 100-byte file header says: page size, usable bytes per page, pages present."""

    page_size: int
    usable: int
    pages: int
    freelist_trunk: int
    encoding: str


def layout(data: bytes) -> FileLayout:
    if len(data) < 100 or data[:16] != b"SQLite format 3\0":
        raise ValueError("not an sqlite 3 file (its header is missing or damaged)")
    (raw_size,) = struct.unpack_from(">H", data, 16)
    page_size = 65536 if raw_size == 1 else raw_size
    if page_size < 512 or page_size & (page_size - 1):
        raise ValueError(f"page size {page_size} in the header is not a power of two >= 512")
    (trunk,) = struct.unpack_from(">I", data, 32)
    codec = _TEXT_CODECS.get(struct.unpack_from(">I", data, 56)[0], "utf-8")
    return FileLayout(page_size, page_size - data[20], len(data) // page_size, trunk, codec)


def freelist_pages(data: bytes, fl: FileLayout) -> set[int]:
    """Every page on the freelist (trunk and leaf pages), as far as the chain is readable."""
    out: set[int] = set()
    trunk = fl.freelist_trunk
    while 0 < trunk <= fl.pages and trunk not in out:
        out.add(trunk)
        base = (trunk - 1) * fl.page_size
        nxt, count = struct.unpack_from(">II", data, base)
        if count > (fl.usable - 8) // 4:
            break  # a damaged trunk: what it lists cannot be trusted
        out.update(struct.unpack_from(f">{count}I", data, base + 8))
        trunk = nxt
    return out


def leaf_records(
    data: bytes, fl: FileLayout, skip: set[int]
) -> Iterator[tuple[int, tuple[Value, ...]]]:
    """(rowid, column values) of every cell on every in-use table leaf page not in `skip`.
    A cell that does not decode (a damaged page, an overflow chain into a lost page) is left
    out; the pages around it are still read."""
    for page in range(1, fl.pages + 1):
        if page in skip:
            continue
        base = (page - 1) * fl.page_size
        head = base + (100 if page == 1 else 0)
        if data[head] != _TABLE_LEAF:
            continue
        (cells,) = struct.unpack_from(">H", data, head + 3)
        if 8 + 2 * cells > fl.usable:
            continue
        for i in range(cells):
            (offset,) = struct.unpack_from(">H", data, head + 8 + 2 * i)
            try:
                yield _cell(data, fl, base, base + offset)
            except (IndexError, ValueError, struct.error, UnicodeDecodeError):
                continue


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A big-endian varint of 1-9 bytes at `at`: (value, position after it)."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def _cell(data: bytes, fl: FileLayout, base: int, at: int) -> tuple[int, tuple[Value, ...]]:
    if not base < at < base + fl.usable:
        raise ValueError("cell outside its page")
    size, at = _varint(data, at)
    rowid, at = _varint(data, at)
    if rowid >= 1 << 63:
        rowid -= 1 << 64
    payload = _payload(data, fl, at, size)
    return rowid, _record(payload, fl.encoding)


def _payload(data: bytes, fl: FileLayout, at: int, size: int) -> bytes:
    """The cell's payload: its part on the page, then its overflow pages in order."""
    u = fl.usable
    most = u - 35
    if size <= most:
        return data[at : at + size]
    least = (u - 12) * 32 // 255 - 23
    local = least + (size - least) % (u - 4)
    if local > most:
        local = least
    parts = [data[at : at + local]]
    (page,) = struct.unpack_from(">I", data, at + local)
    left, seen = size - local, set()
    while left > 0:
        if not 0 < page <= fl.pages or page in seen:
            raise ValueError("overflow chain into a missing page")
        seen.add(page)
        start = (page - 1) * fl.page_size
        (nxt,) = struct.unpack_from(">I", data, start)
        take = min(left, u - 4)
        parts.append(data[start + 4 : start + 4 + take])
        left -= take
        page = nxt
    return b"".join(parts)


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def _record(payload: bytes, encoding: str) -> tuple[Value, ...]:
    """Decode sqlite's record format: a header of serial types, then the values."""
    header_size, at = _varint(payload, 0)
    if not 0 < header_size <= len(payload):
        raise ValueError("record header outside its payload")
    types: list[int] = []
    while at < header_size:
        serial, at = _varint(payload, at)
        types.append(serial)
    body = header_size
    out: list[Value] = []
    for serial in types:
        if serial == 0:
            out.append(None)
        elif serial in _INT_SIZES:
            n = _INT_SIZES[serial]
            chunk = payload[body : body + n]
            if len(chunk) != n:
                raise ValueError("record shorter than its header says")
            out.append(int.from_bytes(chunk, "big", signed=True))
            body += n
        elif serial == 7:
            (number,) = struct.unpack_from(">d", payload, body)
            out.append(number)
            body += 8
        elif serial in (8, 9):
            out.append(serial - 8)
        elif serial >= 12:
            n = (serial - 12) // 2
            chunk = payload[body : body + n]
            if len(chunk) != n:
                raise ValueError("record shorter than its header says")
            out.append(chunk.decode(encoding) if serial % 2 else bytes(chunk))
            body += n
        else:
            raise ValueError(f"reserved serial type {serial}")
    return tuple(out)
