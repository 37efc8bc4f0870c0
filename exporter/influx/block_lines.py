"""Line protocol for `FastSteps` (steps translated a column at a time), on the direct import.

Every step of a plan writes the same lines with other numbers, so a plan maps to one `%`
template for a step's lines; a group of steps is then rendered by one `%` formatting of that
template repeated, its values written by one `orjson.dumps` of the group's array (the shortest
text that reads back as the same double, in C) and each step's `step`/`wall_time` tail written
once for all its lines. The points written are those `LineRenderer` writes for the same rows:
one line per (measurement, tags, step), fields sorted by name. A plan a template cannot express
(a field named twice in a point, or named `step` or `wall_time`) goes to `LineRenderer`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import orjson

from ..schema import POINT_FIELDS
from ..translate.blocks import FastGroup, FastSteps, Rows
from .forwarder import LineRenderer
from .lineprotocol import escape_field_key

__all__ = ["BlockRenderer"]

_CACHE_LIMIT = 4096
_Key = tuple[Rows, tuple[str, str] | None]  # a group's rows and constant
_TAIL = -1  # in a template's argument order: the step's `,step=..i,wall_time=.. step` tail


class BlockRenderer:
    """Renders the `FastSteps` of one run (and project)."""

    def __init__(self, renderer: LineRenderer, project: str | None) -> None:
        self._renderer = renderer
        self._project = project
        self._templates: dict[_Key, tuple[str, list[int]] | None] = {}

    def render(self, fast: FastSteps) -> str:
        """The lines of every step, newline-separated (steps in any order: none shares a
        point with another)."""
        walls = []
        for wall in fast.walls.tolist():
            text = repr(wall)
            walls.append(text[:-2] if text.endswith(".0") else text)
        tails = np.array(
            [
                f",step={s}i,wall_time={w} {s}"
                for s, w in zip(fast.steps.tolist(), walls, strict=True)
            ],
            dtype=object,
        )
        parts = [self._group(fast, g, tails) for g in fast.groups]
        return "\n".join(p for p in parts if p)

    def _group(self, fast: FastSteps, group: FastGroup, tails: npt.NDArray[np.object_]) -> str:
        key = (group.rows, group.constant)
        try:
            made = self._templates[key]
        except KeyError:
            made = self._template(fast.run, fast.rank, key)
        count = len(group.index)
        if made is None or not count:
            single = FastSteps(fast.run, fast.rank, fast.steps, fast.walls, [group])
            return "\n".join(self._renderer.render(single.rows(), (), {fast.run: self._project}))
        template, order = made
        values = np.ascontiguousarray(group.values, dtype=np.float64).ravel()
        texts = np.array(
            orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY).decode()[1:-1].split(","),
            dtype=object,
        ).reshape(count, len(group.rows))
        args = np.empty((count, len(order)), dtype=object)
        columns = [p for p, o in enumerate(order) if o != _TAIL]
        args[:, columns] = texts[:, [o for o in order if o != _TAIL]]
        args[:, [p for p, o in enumerate(order) if o == _TAIL]] = tails[group.index][:, None]
        text: str = ((template + "\n") * count) % tuple(args.ravel().tolist())
        return text[:-1]

    def _template(self, run: str, rank: int, key: _Key) -> tuple[str, list[int]] | None:
        rows, constant = key
        points: dict[tuple[str, str], dict[str, int | None]] = {}
        for j, (measurement, gpu, name) in enumerate(rows):
            fields = points.setdefault((measurement, gpu), {})
            if name in fields or name in POINT_FIELDS:
                return self._keep(key, None)
            fields[name] = j
        if constant is not None:
            fields = points.setdefault((constant[0], ""), {})
            if constant[1] in fields:
                return self._keep(key, None)
            fields[constant[1]] = None
        lines: list[str] = []
        order: list[int] = []
        for (measurement, gpu), fields in points.items():
            prefix = self._renderer.prefix(measurement, run, self._project, rank, gpu)
            parts = []
            for name in sorted(fields):
                escaped = _percent(escape_field_key(name))
                column = fields[name]
                if column is None:
                    parts.append(f"{escaped}=0")  # the constant nonfinite_count
                else:
                    parts.append(f"{escaped}=%s")
                    order.append(column)
            lines.append(f"{_percent(prefix)} {','.join(parts)}%s")
            order.append(_TAIL)
        return self._keep(key, ("\n".join(lines), order))

    def _keep(self, key: _Key, made: tuple[str, list[int]] | None) -> tuple[str, list[int]] | None:
        if len(self._templates) >= _CACHE_LIMIT:
            self._templates.clear()
        self._templates[key] = made
        return made


def _percent(text: str) -> str:
    return text.replace("%", "%%")
