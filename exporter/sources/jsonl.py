"""JSON Lines logs: one JSON object per line carrying a step key and scalar values.

Nested objects are flattened with `/` (RLlib's `result.json` nests learner stats); strings,
lists and booleans are not metrics and are skipped. The step key is the user's, or the first of
`step`, `global_step`, `_step`, `training_step`, `time/total_timesteps` present in the line (the
last is SB3's, whose `progress.json` is JSON Lines).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .lines import BadLine, as_step, as_value
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

    def reset(self) -> None:
        """JSON lines carry no per-file state."""

    def parse(self, text: str) -> Record | None:
        stripped = text.strip()
        if not stripped:
            return None
        try:
            obj = json.loads(stripped)
            if not isinstance(obj, dict):
                raise BadLine(f"expected a JSON object, found {type(obj).__name__}")
            flat = _flatten(obj)
        except json.JSONDecodeError as exc:
            raise BadLine(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise BadLine(
                "JSON nested too deeply to read (a metrics line nests a few levels at most)"
            ) from None
        step_key = next((k for k in self._step_keys if k in flat), None)
        if step_key is None:
            wanted = " or ".join(repr(k) for k in self._step_keys)
            raise BadLine(f"no step key ({wanted}); pass --step-key NAME if the log uses another")
        step = as_step(flat.pop(step_key), step_key)
        wall_time = None
        for key in WALL_TIME_KEYS:
            if key in flat:
                wall_time = as_value(flat.pop(key))
                break
        values: dict[str, float] = {}
        for key, raw in flat.items():
            value = as_value(raw) if not isinstance(raw, str) else None
            if value is not None:
                values[key] = value
        return Record(step=step, values=values, wall_time=wall_time)


def _flatten(obj: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}/"))
        else:
            out[name] = value
    return out
