"""The dicts the Hugging Face Trainer (and TRL's trainers built on it) print at every logging step.

`Trainer.log` hands its logs to the progress callback, which prints the dict as Python shows it:
`{'loss': 0.0123, 'grad_norm': 1.2, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.02}`.
Keys are quoted strings; values are Python reprs: floats (`nan`, `inf` unquoted), ints, numpy or
torch scalars (`np.float64(0.5)`, `tensor(0.5)`), and, since transformers formats every float
to four significant digits before printing it (`ProgressCallback.on_log`: `f"{v:.4g}"`), quoted
numbers (`'loss': '0.0123'`); other strings, lists and `None` are not metrics. The dict
carries no step (see `console.py` for how one is assigned).
"""

from __future__ import annotations

import re

from .console_text import number

__all__ = ["DictLine", "parse_dict"]

_KEY = re.compile(r"""\s*(['"])((?:\\.|(?!\1).)*)\1\s*:\s*""")
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NESTS = re.compile(r"""[(\[{'"]""")


class DictLine:
    """The numeric values of a printed dict, and its other entries by name (not metrics)."""

    __slots__ = ("skipped", "values")

    def __init__(self, values: dict[str, float], skipped: list[str]) -> None:
        self.values = values
        self.skipped = skipped


def parse_dict(segment: str) -> DictLine | None:
    """The dict a segment prints, or None when it prints none (or one that is not a flat dict
    of named values)."""
    start = segment.find("{'")
    if start < 0:
        start = segment.find('{"')
        if start < 0:
            return None
    end = segment.rfind("}")
    if end <= start:
        return None
    body = segment[start + 1 : end]
    values: dict[str, float] = {}
    skipped: list[str] = []
    pos = 0
    while pos < len(body):
        key_match = _KEY.match(body, pos)
        if key_match is None:
            return None  # not a dict of named values: ordinary output that starts with {'
        key = key_match.group(2)
        pos = key_match.end()
        value_end = _value_end(body, pos)
        raw = body[pos:value_end].strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]  # a float transformers formatted as text
        value = number(raw)
        if value is None:
            skipped.append(key)
        else:
            values[key] = value
        pos = value_end + 1  # past the comma
    if not values and not skipped:
        return None
    return DictLine(values, skipped)


def _value_end(body: str, pos: int) -> int:
    """Where the value starting at `pos` ends: the next comma outside brackets and quotes."""
    comma = body.find(",", pos)
    stop = len(body) if comma < 0 else comma
    if not _NESTS.search(body, pos, stop):  # a plain number: most values
        return stop
    depth: list[str] = []
    quote = ""
    i = pos
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _CLOSE:
            depth.append(_CLOSE[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif ch == "," and not depth:
            return i
        i += 1
    return len(body)
