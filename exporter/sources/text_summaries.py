"""The text summaries of a TensorBoard event file (`add_text`): TRL's `args` and `model_config`,
CleanRL's `hyperparameters` table. They describe the run, so the run context is read from them.

Only events that are not one-scalar events (`scalar_events.py` tells them apart a batch at a
time) are decoded with protobuf: `tensorboard`'s own loader decodes and converts every event in
Python, which cost an import of a long log more than translating its first steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.compat.proto import event_pb2

from .scalar_events import decode_scalar_events
from .tfrecord import RecordReader

__all__ = ["MAX_TEXT_EVENTS", "read_text_summaries"]

MAX_TEXT_EVENTS = (
    2000  # trainers write their text summaries first; a long file is not read to its end
)


def read_text_summaries(path: Path, max_events: int = MAX_TEXT_EVENTS) -> dict[str, str]:
    """`{tag: text}` of the text-plugin summaries among the file's first events (first value wins);
    an unreadable or damaged file gives what was read before the damage."""
    out: dict[str, str] = {}
    seen = 0
    try:
        with open(path, "rb") as fh:
            for batch in RecordReader(fh, 1 << 20).batches():
                count = min(len(batch), max_events - seen)
                others = np.flatnonzero(~decode_scalar_events(batch).ok[:count])
                for i in others.tolist():
                    _add_texts(event_pb2.Event.FromString(batch.payload(i)), out)
                seen += count
                if seen >= max_events:
                    break
    except Exception:  # a damaged record ends the read; the scalars' reader reports damage
        return out
    return out


def _add_texts(event: event_pb2.Event, out: dict[str, str]) -> None:
    if event.WhichOneof("what") != "summary":
        return
    for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name != "text":
            continue
        strings = value.tensor.string_val
        if strings and value.tag not in out:
            out[value.tag] = strings[0].decode("utf-8", errors="replace")
