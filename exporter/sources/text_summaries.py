"""The text summaries of a TensorBoard event file (`add_text`): TRL's `args` and `model_config`,
CleanRL's `hyperparameters` table. They describe the run, so the run context is read from them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_TEXT_EVENTS", "read_text_summaries"]

MAX_TEXT_EVENTS = (
    2000  # trainers write their text summaries first; a long file is not read to its end
)


def read_text_summaries(path: Path, max_events: int = MAX_TEXT_EVENTS) -> dict[str, str]:
    """`{tag: text}` of the text-plugin summaries among the file's first events (first value wins);
    an unreadable or damaged file gives what was read before the damage."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out: dict[str, str] = {}
    try:
        for i, event in enumerate(EventFileLoader(str(path)).Load()):
            if i >= max_events:
                break
            if event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "text":
                    continue
                strings = value.tensor.string_val
                if strings and value.tag not in out:
                    out[value.tag] = strings[0].decode("utf-8", errors="replace")
    except Exception:  # a damaged record ends the read; the scalars' reader reports damage
        return out
    return out
