"""TensorBoard event files: TFRecord framing (tfrecord.py), events decoded with the `tensorboard` package.

Scalars come either as `simple_value` (torch's and tensorboardX's SummaryWriter, so SB3 and
CleanRL) or as 0-d tensors tagged by the `scalars` plugin (TF2 `tf.summary.scalar`). Consecutive
events at the same step are merged into one Record. Images, histograms, text and hparams are not
scalars and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util

from .record import Malformed, Record
from .tfrecord import CorruptRecord, RecordReader

__all__ = ["TensorBoardSource", "is_event_file"]


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

    @property
    def _consumed(self) -> int:
        return self._reader.consumed if self._reader else 0

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None
        self._reader = None

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
        if self._corrupt_at is not None:
            return
        reader = self._reader
        assert reader is not None
        step: int | None = None
        values: dict[str, float] = {}
        wall_time: float | None = None
        for raw in self._records(reader):
            self._events += 1
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
                elif plugin or value.tag not in self._scalar_tags:
                    continue
                if value.tensor.tensor_shape.dim:
                    continue
                try:
                    out[value.tag] = float(tensor_util.make_ndarray(value.tensor))
                except (TypeError, ValueError):
                    continue
        return out
