"""Line protocol for a batch of translated log calls, on the direct import path.

`LineRenderer` groups any mix of outbox rows into points and formats each value with `repr`,
which for the float32 values of an event file costs about a microsecond each: most of an import's
time. Here the rows of one `Translator.log` call share a run, rank, step and wall time, and a log
keeps writing the same metrics, so each call's shape (measurement, gpu label and field of every
row) maps to a cached plan: one `%`-template for all of the call's lines and the order in which
its values fill it. A batch is then rendered at once: its numbers by one `orjson.dumps` (the
shortest text that reads back as the same float, in C) and its lines by one `%` formatting.

Shapes a template cannot express exactly (a field named twice in a point, or named like `step` or
`wall_time`) and batches with a number orjson cannot write go to `LineRenderer`, which has the
general rules; both write the same points.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import orjson

from ..schema import POINT_FIELDS, SampleRow
from .forwarder import LineRenderer
from .lineprotocol import escape_field_key

__all__ = ["StepRenderer"]

_CACHE_LIMIT = 4096
_Shape = tuple[tuple[str, str, str], ...]  # (measurement, gpu, field) of each row


class _Plan:
    """How to render one shape of call: a template for all its lines, and a getter that puts
    the call's values (then its step and wall time) in the template's order."""

    __slots__ = ("getter", "template")

    def __init__(self, template: str, getter: itemgetter[Any]) -> None:
        self.template = template
        self.getter = getter


class StepRenderer:
    """Collects the rows of `Translator.log` calls of one run and rank; `take` renders them.

    The rows of one call share their step and wall time and carry finite float values (the
    translator converts every number it accepts to a float and refuses NaN and Inf).
    """

    def __init__(self, renderer: LineRenderer, project: str | None) -> None:
        self._renderer = renderer
        self._project = project
        self._plans: dict[_Shape, _Plan | None] = {}
        self._templates: list[str] = []
        self._numbers: list[float | int] = []

    def add(self, rows: Sequence[SampleRow]) -> None:
        """Add one `Translator.log` call's rows."""
        if not rows:
            return
        run, rank, step, _, _, _, _, wall_time = rows[0]
        shape = tuple([(r[3], r[4], r[5]) for r in rows])
        try:
            plan = self._plans[shape]
        except KeyError:
            plan = self._plan(run, rank, shape)
        if plan is None:
            lines = self._renderer.render(rows, (), {run: self._project})
            self._templates.append("\n".join(lines).replace("%", "%%"))
            return
        values: list[Any] = [r[6] for r in rows]
        values.append(step)
        values.append(float(wall_time))
        self._numbers.extend(plan.getter(values))
        self._templates.append(plan.template)

    def add_general(self, rows: Sequence[SampleRow]) -> None:
        """Add rows of any shape (a text field, another step), rendered by the general rules."""
        lines = self._renderer.render(rows, (), {rows[0][0]: self._project}) if rows else []
        if lines:
            self._templates.append("\n".join(lines).replace("%", "%%"))

    def take(self) -> str | None:
        """The lines added since the last `take`, newline-separated; None when a number could
        not be written this way (then render the rows with `LineRenderer`)."""
        templates, numbers = self._templates, self._numbers
        self._templates, self._numbers = [], []
        if not numbers:
            return "\n".join(templates) % ()
        try:
            text = orjson.dumps(numbers).decode()
        except orjson.JSONEncodeError:  # an integer beyond 64 bits
            return None
        if "null" in text:  # NaN or Inf, which the translator never lets through
            return None
        return "\n".join(templates) % tuple(text[1:-1].split(","))

    def _plan(self, run: str, rank: int, shape: _Shape) -> _Plan | None:
        points: dict[tuple[str, str], list[int]] = {}
        for i, (measurement, gpu, _) in enumerate(shape):
            points.setdefault((measurement, gpu), []).append(i)
        step, wall = len(shape), len(shape) + 1  # where log() puts them after the values
        lines: list[str] = []
        order: list[int] = []
        plan: _Plan | None = None
        for (measurement, gpu), members in points.items():
            fields = {shape[i][2]: i for i in members}
            if len(fields) < len(members) or not POINT_FIELDS.isdisjoint(fields):
                break
            prefix = self._renderer.prefix(measurement, run, self._project, rank, gpu)
            names = sorted(fields)
            keys = ",".join(f"{_percent(escape_field_key(name))}=%s" for name in names)
            lines.append(f"{_percent(prefix)} {keys},step=%si,wall_time=%s %s")
            order += [fields[name] for name in names]
            order += [step, wall, step]
        else:
            plan = _Plan("\n".join(lines), itemgetter(*order))
        if len(self._plans) >= _CACHE_LIMIT:
            self._plans.clear()
        self._plans[shape] = plan
        return plan


def _percent(text: str) -> str:
    return text.replace("%", "%%")
