"""JSON Lines logs: one JSON object per line carrying a step key and scalar values.

Nested objects are flattened with `/` (RLlib's `result.json` nests learner stats); strings,
lists, booleans and nulls are not metrics: not stored, and each key holding one is named once
per file (a log that carries a text field on every line is named once, not per line). The step
key is the user's, or the first of
`step`, `global_step`, `_step`, `training_step`, `time/total_timesteps` present in the line (the
last is SB3's, whose `progress.json` is JSON Lines).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from .lines import BadLine, LineProblems, as_step, as_value, shown
from .record import Record

__all__ = ["STEP_KEYS", "WALL_TIME_KEYS", "JsonlParser"]

STEP_KEYS: tuple[str, ...] = (
    "step",
    "global_step",
    "_step",
    "training_step",
    "time/total_timesteps",
)
WALL_TIME_KEYS: tuple[str, ...] = ("wall_time", "_timestamp", "timestamp")


class JsonlParser:
    """Parses one JSON object per line into a Record."""

    def __init__(self, step_key: str | None = None) -> None:
        self._step_keys = (step_key,) if step_key else STEP_KEYS
        self._problems = LineProblems()  # keys of values not read named once per file

    def reset(self) -> None:
        """The file starts over: its keys are named again."""
        self._problems.reset()

    def problems(self) -> list[str]:
        """What the last lines held that was not read (the rest of them was); then forgotten."""
        return self._problems.take()

    def parse(self, text: str) -> Record | None:
        stripped = text.strip().lstrip("\ufeff")  # a byte order mark before the first line
        if not stripped:
            return None
        twice: list[str] = []  # names a line holds both nested and flat
        try:
            obj = json.loads(stripped)
            if not isinstance(obj, dict):
                raise BadLine(f"expected a JSON object, found {type(obj).__name__}")
            flat = _flatten(obj, twice)
        except json.JSONDecodeError as exc:
            raise BadLine(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:  # an integer literal past Python's 4,300-digit parse limit
            raise BadLine(f"not readable JSON ({str(exc).split(';')[0]})") from None
        except RecursionError:
            raise BadLine(
                "JSON nested too deeply to read (a metrics line nests a few levels at most)"
            ) from None
        for name in twice:
            self._problems.add(
                f"{name!r} is in the line twice (nested and as a flat key): the later is kept"
            )
        step_key = next((k for k in self._step_keys if k in flat), None)
        if step_key is None:
            wanted = " or ".join(repr(k) for k in self._step_keys)
            raise BadLine(f"no step key ({wanted}); pass --step-key NAME if the log uses another")
        step = as_step(flat.pop(step_key), step_key)
        wall_time = None
        for key in WALL_TIME_KEYS:
            if key in flat:
                raw_wall = flat.pop(key)
                wall_time = as_value(raw_wall) if not isinstance(raw_wall, str) else None
                if wall_time is not None and not math.isfinite(wall_time):
                    # an unknown time, not a value: the step is stored, at the time of reading
                    self._name(
                        key,
                        f"{key!r} is {shown(raw_wall)}, not a time: the step is stored",
                        kept=True,
                    )
                    wall_time = None
                break
        values: dict[str, float] = {}
        for key, raw in flat.items():
            value = as_value(raw) if not isinstance(raw, str) else None
            if value is not None:
                values[key] = value
            else:
                self._name(key, f"{key!r} holds {_kind(raw)}, not a number: not stored")
        return Record(step=step, values=values, wall_time=wall_time)

    def _name(self, key: str, problem: str, *, kept: bool = False) -> None:
        self._problems.once(key, f"{problem} (said once for this key)", kept=kept)


def _kind(raw: object) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return f"a boolean ({json.dumps(raw)})"
    if isinstance(raw, str):
        return f"text ({raw[:40]!r})"
    return f"a {type(raw).__name__}"


def _flatten(obj: Mapping[str, object], twice: list[str], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        inner = _flatten(value, twice, f"{name}/") if isinstance(value, Mapping) else {name: value}
        twice += [k for k in inner if k in out]
        out.update(inner)
    return out
