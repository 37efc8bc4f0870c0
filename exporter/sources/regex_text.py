"""Plain text logs read with a user regular expression.

The expression needs a named group `step` and either groups `name` and `value` (one metric per
match) or one group per metric. A group name cannot contain `/`, so write `__` for it:
`(?P<losses__approx_kl>...)` logs `losses/approx_kl`. An optional `wall_time` group gives the
wall-clock time. Lines the expression does not match are ordinary log output and are skipped.
"""

from __future__ import annotations

import re

from .errors import BadPattern
from .lines import BadLine, as_step, as_value
from .record import Record

__all__ = ["RegexParser", "compile_pattern"]

_RESERVED = frozenset({"step", "name", "value", "wall_time"})


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile and check a user pattern; raise BadPattern saying what is missing."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise BadPattern(
            f"--pattern {pattern!r} is not a valid regular expression: {exc}"
        ) from None
    groups = set(regex.groupindex)
    if "step" not in groups:
        raise BadPattern(
            f"--pattern {pattern!r} has no named group 'step'; "
            r"add one, e.g. 'step=(?P<step>\d+)'"
        )
    pairs = {"name", "value"} & groups
    if len(pairs) == 1:
        (missing,) = {"name", "value"} - pairs
        raise BadPattern(f"--pattern {pattern!r} has a group {pairs.pop()!r} but no {missing!r}")
    if not pairs and not groups - _RESERVED:
        raise BadPattern(
            f"--pattern {pattern!r} captures no metric: add groups 'name' and 'value', "
            r"or one group per metric such as '(?P<reward>[-\d.eE+]+)'"
        )
    return regex


class RegexParser:
    """Parses lines matched by a user regular expression into Records."""

    def __init__(self, pattern: str | re.Pattern[str]) -> None:
        self._regex = compile_pattern(pattern) if isinstance(pattern, str) else pattern
        self._pairs = "name" in self._regex.groupindex
        self._metric_groups = tuple(g for g in self._regex.groupindex if g not in _RESERVED)

    def reset(self) -> None:
        """Text lines carry no per-file state."""

    def problems(self) -> list[str]:
        """A line either matches or is not a metric line: nothing is read in part."""
        return []

    def parse(self, text: str) -> Record | None:
        match = self._regex.search(text)
        if match is None:
            return None
        step = as_step(match.group("step"), "step")
        values: dict[str, float] = {}
        if self._pairs:
            name, raw = match.group("name"), match.group("value")
            if name:
                values[name] = _number(name, raw)
        for group in self._metric_groups:
            raw = match.group(group)
            if raw is not None:
                name = group.replace("__", "/")
                values[name] = _number(name, raw)
        wall_time = None
        if "wall_time" in self._regex.groupindex and match.group("wall_time") is not None:
            wall_time = as_value(match.group("wall_time"))
        return Record(step=step, values=values, wall_time=wall_time)


def _number(name: str, raw: str | None) -> float:
    value = as_value(raw)
    if value is None:
        raise BadLine(f"value of {name!r} is {raw!r}, not a number")
    return value
