"""TensorBoard event files: TFRecord framing (tfrecord.py), events decoded with the `tensorboard` package.

Scalars come either as `simple_value` (torch's and tensorboardX's SummaryWriter, so SB3 and
CleanRL) or as one-element tensors tagged by the `scalars` plugin (TF2 `tf.summary.scalar`).
Consecutive events at the same step are merged into one Record. Images, histograms, text and
hparams are not scalars and are skipped. A `scalars` tensor that holds no number (a string, a
type with no numbers, several values, contents that do not decode) is skipped and reported, as is
a record that does not decode. An event whose wall time is not a finite number is read as one
without a wall time (its values get the time they are read), and each file with such events is
reported once, with their count.

Records are read in batches; the one-scalar events SummaryWriter writes are decoded for a whole
batch at once as arrays (scalar_events.py) and only the other records go through protobuf.

`position()` / `resume()` let a new process go on at the record boundary an earlier one reached,
when the path still names the same file (device, inode, first bytes and the bytes before it).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tensorboard.compat.proto import event_pb2, tensor_pb2, types_pb2
from tensorboard.util import tensor_util

from ..schema import SourcePosition
from .record import Malformed, Record, add_value
from .scalar_block import ScalarBlock
from .scalar_events import ScalarColumns, decode_scalar_events
from .tfrecord import CorruptRecord, RecordBatch, RecordReader

__all__ = ["TensorBoardSource", "is_event_file"]

_HEAD = 64
_MARK = 64
_TEXT_TYPES = (types_pb2.DT_STRING, types_pb2.DT_STRING_REF)


def is_event_file(path: Path) -> bool:
    return "tfevents" in path.name


class TensorBoardSource:
    """Incremental reader of one event file; `poll()` yields what was appended since last time."""

    def __init__(
        self, path: Path, report: Callable[[Malformed], None], *, chunk_size: int = 4 << 20
    ) -> None:
        """`chunk_size`: bytes read at a time (records are decoded a read at a time)."""
        self.path = path
        self._chunk_size = chunk_size
        self._report = report
        self._scalar_tags: set[str] = set()
        self._handle: BinaryIO | None = None
        self._reader: RecordReader | None = None
        self._ident: tuple[int, int] | None = None
        self._events = 0
        self._corrupt_at: int | None = None
        self._resumed = False
        self._unclocked = 0  # events whose wall time was not finite, not yet reported
        self._unclocked_step = 0  # the first one's step
        self._unclocked_said = False  # reported once per file

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

    def _position_at(self, offset: int, events: int) -> SourcePosition | None:
        """The position of a record boundary `offset`, `events` records in."""
        if self._handle is None or self._ident is None or offset <= 0:
            return None
        fd = self._handle.fileno()
        mark = os.pread(fd, min(_MARK, offset), offset - min(_MARK, offset))
        return SourcePosition(
            str(self.path), *self._ident, offset, events, os.pread(fd, _HEAD, 0), mark
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
        self._reader = RecordReader(handle, self._chunk_size, start=position.offset)
        self._ident = (st.st_dev, st.st_ino)
        self._events = position.lines
        self._corrupt_at = None
        # Tensor scalars carry their plugin name only on a tag's first event, which was before
        # the saved position: from here a 0-d numeric tensor of an unknown tag counts as one.
        self._resumed = True
        return True

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """Records appended since the last poll; consume the iterator before polling again."""
        for item in self._poll(final, blocks=False):
            assert isinstance(item, Record)
            yield item

    def poll_blocks(self, *, final: bool = False) -> Iterator[Record | ScalarBlock]:
        """Like `poll`, with runs of complete one-scalar steps as `ScalarBlock`s (the same
        Records, in columns)."""
        yield from self._poll(final, blocks=True)

    def _poll(self, final: bool, *, blocks: bool) -> Iterator[Record | ScalarBlock]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return
        if not stat.S_ISREG(st.st_mode):  # replaced by a FIFO or device: reading would block
            return
        ident = (st.st_dev, st.st_ino)
        if self._reader is None or ident != self._ident or st.st_size < self._consumed:
            self.close()
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open while following
            except OSError as exc:
                self._report(Malformed(str(self.path), 0, f"cannot open: {exc.strerror}"))
                return
            self._reader = RecordReader(self._handle, self._chunk_size)
            self._ident = ident
            self._events = 0
            self._corrupt_at = None
            self._resumed = False
            self._unclocked, self._unclocked_said = 0, False
        if self._corrupt_at is not None:
            return
        reader = self._reader
        assert reader is not None
        pending = _Pending()
        for batch in self._batches(reader):
            yield from self._decode(batch, pending, blocks)
        if pending.step is not None:
            yield pending.record()
        self._say_unclocked(final)
        if final and self._corrupt_at is None and os.stat(self.path).st_size > self._consumed:
            self._report(
                Malformed(
                    str(self.path),
                    self._events + 1,
                    f"unreadable event record at byte {self._consumed} "
                    "(corrupt or cut off); the rest of the file was skipped",
                )
            )

    def _note_unclocked(self, count: int, step: int) -> None:
        if count and not self._unclocked:
            self._unclocked_step = step
        self._unclocked += count

    def _say_unclocked(self, final: bool) -> None:
        """Events read without their wall time (not a finite number): said once per file, as
        a warning on every event would drown the other problems."""
        if not self._unclocked or self._unclocked_said:
            return
        self._report(
            Malformed(
                str(self.path),
                0,
                f"the wall time of {self._unclocked} event(s) is not a finite number (NaN or "
                f"infinite; the first at step {self._unclocked_step}): their values were stored "
                "with the time they were read instead; the clock or the writer of the host that "
                "wrote this file is at fault, fix it to have the training's own times"
                + ("" if final else " (later ones in this file are not reported again)"),
                kept=True,
            )
        )
        self._unclocked_said = True

    def _batches(self, reader: RecordReader) -> Iterator[RecordBatch]:
        def skipped(exc: CorruptRecord) -> None:
            self._report(
                Malformed(
                    str(self.path),
                    self._events + 1,
                    f"corrupt event record at byte {exc.offset} ({exc}); skipped, reading on "
                    "from the next valid record",
                )
            )

        yield from reader.batches(skipped)

    def _decode(
        self, batch: RecordBatch, pending: _Pending, blocks: bool
    ) -> Iterator[Record | ScalarBlock]:
        """The records completed by a batch of events; the last step stays in `pending`, as
        the next batch may bring more of its events. With `blocks`, the steps of a run of
        one-scalar events that no later event can add to come as one `ScalarBlock`."""
        cols = decode_scalar_events(batch)
        base = self._events
        unclocked = np.flatnonzero(cols.ok & cols.unclocked)
        if len(unclocked):
            self._note_unclocked(len(unclocked), int(cols.step[unclocked[0]]))
        names = np.array(cols.tags, dtype=object)
        start = 0
        for stop in [*np.flatnonzero(~cols.ok).tolist(), len(batch)]:
            if stop > start:
                steps = cols.step[start:stop]
                cuts = [0, *(np.flatnonzero(steps[1:] != steps[:-1]) + 1).tolist(), stop - start]
                if blocks and len(cuts) > 3:
                    yield from self._block(batch, cols, start, stop, cuts, pending, base)
                else:
                    step_list = steps[np.array(cuts[:-1], dtype=np.int64)].tolist()
                    tags = names[cols.tag[start:stop]].tolist()
                    values = cols.value[start:stop].tolist()
                    walls = cols.wall_time[start:stop].tolist()
                    for i, step in enumerate(step_list):
                        a, b = cuts[i], cuts[i + 1]
                        done = pending.add(
                            step, zip(tags[a:b], values[a:b], strict=True), walls[b - 1]
                        )
                        if done is not None:
                            yield done
            if stop == len(batch):
                break
            self._events = base + stop + 1
            event = self._event(batch.payload(stop))
            if event is not None:
                yield from self._general(event, pending)
            start = stop + 1
        self._events = base + len(batch)

    def _general(self, event: event_pb2.Event, pending: _Pending) -> Iterator[Record]:
        """An event decoded by protobuf: its scalars join the pending step."""
        scalars = self._scalars(event)
        if scalars:
            if event.step < 0:
                self._report(Malformed(str(self.path), self._events, f"negative step {event.step}"))
            else:
                wall = event.wall_time
                if not math.isfinite(wall):  # read as not given (scalar_events.py says why)
                    self._note_unclocked(1, event.step)
                    wall = 0.0
                done = pending.add(event.step, scalars.items(), wall)
                if done is not None:
                    yield done

    def _block(
        self,
        batch: RecordBatch,
        cols: ScalarColumns,
        start: int,
        stop: int,
        cuts: list[int],
        pending: _Pending,
        events: int,
    ) -> Iterator[Record | ScalarBlock]:
        """Events start..stop-1 (one-scalar events of several steps): the first step joins the
        pending one when it is the same step, the last one stays pending, the steps between
        come as a block."""
        names = cols.tags
        steps = cols.step[start:stop]
        first, last = 0, len(cuts) - 2  # step indexes, `cuts` ends with stop - start
        if pending.step is not None and int(steps[0]) == pending.step:
            a, b = start + cuts[0], start + cuts[1]
            tags = [names[t] for t in cols.tag[a:b].tolist()]
            pending.add(
                pending.step,
                zip(tags, cols.value[a:b].tolist(), strict=True),
                float(cols.wall_time[b - 1]),
            )
            first = 1
        if first < last:
            if pending.step is not None:
                yield pending.record()
                pending.step = None
            heads = np.array(cuts[first : last + 1], dtype=np.int64)
            ends = heads[1:] - 1
            yield ScalarBlock.build(
                names,
                steps[heads[:-1]],
                cols.wall_time[start:stop][ends],
                heads,
                cols.tag[start:stop],
                cols.value[start:stop].astype(np.float64),
                self._position_at(
                    batch.record_offset(start + cuts[last]), events + start + cuts[last]
                ),
            )
        if first <= last:
            a, b = start + cuts[last], start + cuts[last + 1]
            tags = [names[t] for t in cols.tag[a:b].tolist()]
            done = pending.add(
                int(steps[cuts[last]]),
                zip(tags, cols.value[a:b].tolist(), strict=True),
                float(cols.wall_time[b - 1]),
            )
            if done is not None:
                yield done

    def _event(self, raw: bytes) -> event_pb2.Event | None:
        try:
            return event_pb2.Event.FromString(raw)
        except Exception:  # protobuf's DecodeError; the record passed its checksum
            self._report(Malformed(str(self.path), self._events, "event record does not decode"))
            return None

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
                number, problem = _tensor_number(value.tensor)
                if number is not None:
                    out[value.tag] = number
                elif value.tag in self._scalar_tags:
                    # a tag the scalars plugin named: its value is lost, so say so (a resumed
                    # read's unknown tags may be another plugin's tensors, skipped quietly)
                    self._report(
                        Malformed(
                            str(self.path),
                            self._events,
                            f"step {event.step}, tag {value.tag!r}: {problem}; the value was "
                            "skipped (log a number: a float or int with tf.summary.scalar)",
                        )
                    )
        return out


def _tensor_number(tensor: tensor_pb2.TensorProto) -> tuple[float | None, str]:
    """A scalars-plugin tensor's number, or None and why it holds none.

    TensorBoard's own scalars plugin reads `tensor_util.make_ndarray(tensor).item()`
    (tensorboard/backend/event_processing/data_provider.py, `_convert_scalar_event`): any shape
    with exactly one element (a 0-d tensor, or [1] as a TF1 writer may give) is the scalar."""
    dims = [d.size for d in tensor.tensor_shape.dim]
    count = math.prod(dims)
    if min(dims, default=1) < 0:
        return None, f"a scalars-plugin tensor of shape {dims} (a size not known), not one value"
    if count != 1:
        # checked before decoding: make_ndarray would allocate a huge declared shape
        return None, f"a scalars-plugin tensor of shape {dims} holds {count} values, not one"
    kind = _type_name(tensor.dtype)
    if tensor.dtype in _TEXT_TYPES:
        text = (tensor.string_val[0] if tensor.string_val else tensor.tensor_content)[:40]
        return None, f"a scalars-plugin tensor holding a string ({text!r}, {kind}), not a number"
    try:
        array = tensor_util.make_ndarray(tensor)
    except Exception as exc:  # any damage in a file must not stop the import
        # KeyError for DT_VARIANT / DT_RESOURCE (no numpy type), TypeError for a type
        # tensorboard does not know, ValueError for contents that do not fit the shape
        return None, (
            f"a scalars-plugin tensor of type {kind} that does not decode as a number "
            f"({type(exc).__name__}: {exc})"
        )
    if array.dtype.kind not in "biuf":  # complex, quantized (structured) types
        return None, f"a scalars-plugin tensor of type {kind}, not a real number"
    return float(array.reshape(-1)[0]), ""


def _type_name(dtype: int) -> str:
    try:
        return str(types_pb2.DataType.Name(dtype))
    except ValueError:  # a number no TensorFlow type has
        return f"unknown data type {dtype}"


class _Pending:
    """The step being assembled from consecutive events."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.values: dict[str, float | list[float]] = {}
        self.wall_time: float | None = None

    def add(
        self, step: int, values: Iterable[tuple[str, float]], wall_time: float
    ) -> Record | None:
        """Add an event's values; returns the previous step's Record when this starts a new
        step. The last event's wall time is the step's (0: not given)."""
        done = None
        if step != self.step:
            if self.step is not None:
                done = self.record()
            self.step = step
            self.values = {}
        known = self.values
        for tag, value in values:
            add_value(known, tag, value)
        self.wall_time = wall_time or None
        return done

    def record(self) -> Record:
        assert self.step is not None
        return Record(step=self.step, values=self.values, wall_time=self.wall_time)
