"""TensorBoard event files: TFRecord framing (tfrecord.py), events decoded with the `tensorboard` package.

Scalars come either as `simple_value` (torch's and tensorboardX's SummaryWriter, so SB3 and
CleanRL) or as 0-d tensors tagged by the `scalars` plugin (TF2 `tf.summary.scalar`). Consecutive
events at the same step are merged into one Record. Images, histograms, text and hparams are not
scalars and are skipped.

Decoding a protobuf message and walking its fields costs several microseconds per event, most of
an import's reading time. The event SummaryWriter writes for one `add_scalar` has one fixed layout
(wall_time, step, a summary holding one value with a tag and a simple_value, fields in number
order), so such a record is matched as bytes and its lengths checked against each other; any
record that differs in the least (another field, a long tag, a tensor) goes through protobuf.

`position()` / `resume()` let a new process go on at the record boundary an earlier one reached,
when the path still names the same file (device, inode, first bytes and the bytes before it).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util

from ..outbox import SourcePosition
from .record import Malformed, Record
from .tfrecord import CorruptRecord, RecordReader

__all__ = ["TensorBoardSource", "decode_simple_scalar", "is_event_file"]

# Event{wall_time=1 (double), step=2 (varint, absent when 0), summary=5 {value=1 {tag=1 (string),
# simple_value=2 (float)}}} with one-byte lengths: the groups are wall_time, step, the summary,
# value and tag lengths, the tag and the value.
_SIMPLE = re.compile(
    rb"\x09(.{8})(?:\x10([\x80-\xff]{0,9}[\x00-\x7f]))?"
    rb"\x2a([\x00-\x7f])\x0a([\x00-\x7f])\x0a([\x00-\x7f])(.*)\x15(.{4})",
    re.DOTALL,
).fullmatch
_DOUBLE = struct.Struct("<d").unpack
_FLOAT = struct.Struct("<f").unpack
_HEAD = 64
_MARK = 64


def _varint(data: bytes) -> int:
    value = 0
    for shift, byte in enumerate(data):
        value |= (byte & 0x7F) << (7 * shift)
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_simple_scalar(raw: bytes) -> tuple[int, float, str, float] | None:
    """(step, wall_time, tag, value) of a one-`simple_value` event record, or None when the
    record has any other layout (then decode it with protobuf)."""
    m = _SIMPLE(raw)
    if m is None:
        return None
    wall, step, summary_len, value_len, tag_len, tag, value = m.groups()
    n = len(tag)
    if tag_len[0] != n or value_len[0] != n + 7 or summary_len[0] != n + 9:
        return None
    try:
        name = tag.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (_varint(step) if step else 0), _DOUBLE(wall)[0], name, _FLOAT(value)[0]


def is_event_file(path: Path) -> bool:
    return "tfevents" in path.name


class TensorBoardSource:
    """Incremental reader of one event file; `poll()` yields what was appended since last time."""

    def __init__(self, path: Path, report: Callable[[Malformed], None]) -> None:
        self.path = path
        self._report = report
        self._scalar_tags: set[str] = set()
        self._handle: BinaryIO | None = None
        self._reader: RecordReader | None = None
        self._ident: tuple[int, int] | None = None
        self._events = 0
        self._corrupt_at: int | None = None
        self._resumed = False

    @property
    def _consumed(self) -> int:
        return self._reader.consumed if self._reader else 0

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None
        self._reader = None

    def position(self) -> SourcePosition | None:
        """The record boundary read up to, or None before anything was read."""
        if self._handle is None or self._ident is None or self._consumed == 0:
            return None
        fd = self._handle.fileno()
        offset = self._consumed
        mark = os.pread(fd, min(_MARK, offset), offset - min(_MARK, offset))
        return SourcePosition(
            str(self.path),
            *self._ident,
            offset,
            self._events,
            os.pread(fd, _HEAD, 0),
            mark,
        )

    def resume(self, position: SourcePosition) -> bool:
        """Go on from a saved record boundary if the path still names that file; False (nothing
        changed) otherwise."""
        if self._reader is not None or position.offset <= 0:
            return False
        try:
            st = os.stat(self.path)
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open while following
        except OSError:
            return False
        fd = handle.fileno()
        mark_len = len(position.mark)
        same = (
            (st.st_dev, st.st_ino) == (position.dev, position.ino)
            and st.st_size >= position.offset
            and os.pread(fd, _HEAD, 0) == position.head
            and os.pread(fd, mark_len, position.offset - mark_len) == position.mark
        )
        if not same:
            handle.close()
            return False
        self._handle = handle
        self._reader = RecordReader(handle, start=position.offset)
        self._ident = (st.st_dev, st.st_ino)
        self._events = position.lines
        self._corrupt_at = None
        # Tensor scalars carry their plugin name only on a tag's first event, which was before
        # the saved position: from here a 0-d numeric tensor of an unknown tag counts as one.
        self._resumed = True
        return True

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """Records appended since the last poll; consume the iterator before polling again."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return
        ident = (st.st_dev, st.st_ino)
        if self._reader is None or ident != self._ident or st.st_size < self._consumed:
            self.close()
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open while following
            except OSError as exc:
                self._report(Malformed(str(self.path), 0, f"cannot open: {exc.strerror}"))
                return
            self._reader = RecordReader(self._handle)
            self._ident = ident
            self._events = 0
            self._corrupt_at = None
            self._resumed = False
        if self._corrupt_at is not None:
            return
        reader = self._reader
        assert reader is not None
        step: int | None = None
        values: dict[str, float] = {}
        wall_time: float | None = None
        simple = decode_simple_scalar
        for raw in self._records(reader):
            self._events += 1
            decoded = simple(raw)
            if decoded is not None:
                event_step, event_wall_time, tag, value = decoded
                if event_step < 0:
                    self._report(
                        Malformed(str(self.path), self._events, f"negative step {event_step}")
                    )
                    continue
                if step is not None and event_step != step:
                    yield Record(step=step, values=values, wall_time=wall_time)
                    values = {}
                step = event_step
                values[tag] = value
                wall_time = event_wall_time or None
                continue
            try:
                event = event_pb2.Event.FromString(raw)
            except Exception:  # protobuf's DecodeError; the record passed its checksum
                self._report(
                    Malformed(str(self.path), self._events, "event record does not decode")
                )
                continue
            scalars = self._scalars(event)
            if not scalars:
                continue
            if event.step < 0:
                self._report(Malformed(str(self.path), self._events, f"negative step {event.step}"))
                continue
            if step is not None and event.step != step:
                yield Record(step=step, values=values, wall_time=wall_time)
                values = {}
            step = event.step
            values.update(scalars)
            wall_time = event.wall_time or None
        if step is not None:
            yield Record(step=step, values=values, wall_time=wall_time)
        if final and self._corrupt_at is None and os.stat(self.path).st_size > self._consumed:
            self._report(
                Malformed(
                    str(self.path),
                    self._events + 1,
                    f"unreadable event record at byte {self._consumed} "
                    "(corrupt or cut off); the rest of the file was skipped",
                )
            )

    def _records(self, reader: RecordReader) -> Iterator[bytes]:
        try:
            yield from reader.records()
        except CorruptRecord as exc:
            self._corrupt_at = exc.offset
            self._report(
                Malformed(
                    str(self.path),
                    self._events + 1,
                    f"corrupt event record at byte {exc.offset} ({exc}); the rest of the file was skipped",
                )
            )

    def _scalars(self, event: event_pb2.Event) -> dict[str, float]:
        if event.WhichOneof("what") != "summary":
            return {}
        out: dict[str, float] = {}
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                out[value.tag] = float(value.simple_value)
            elif kind == "tensor":
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "scalars":
                    self._scalar_tags.add(value.tag)
                elif plugin or (value.tag not in self._scalar_tags and not self._resumed):
                    continue
                if value.tensor.tensor_shape.dim:
                    continue
                try:
                    out[value.tag] = float(tensor_util.make_ndarray(value.tensor))
                except (TypeError, ValueError):
                    continue
        return out
