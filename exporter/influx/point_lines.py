"""Line protocol for `PendingPoints` (unsent points read by their numbers), on the forwarder.

The same lines `LineRenderer.render` writes for the same rows (one per run, tag set and step:
fields sorted by name with `step` and `wall_time` among them, the point's newest wall time), made
a batch at a time in numpy instead of a row at a time: the rows are grouped into points by one
sort, each point's `step` and `wall_time` become two more rows, a second sort puts every point's
fields in name order, and the body is one join of `separator + key= + value + tail` pieces
(`" "` after the point's prefix or `","` before a field; the step's timestamp after a point's
last field), the four parts of every piece laid side by side in one array. Only the names of
the few run fields and tag sets a batch holds are looked at in Python. A batch with a field named `step` or `wall_time` (which the point fields override) goes
to `LineRenderer`. Lines come in (run, tag set, step) order, not the order read: InfluxDB does
not care, and no two lines of a batch share a point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..schema import POINT_FIELDS, STEP_FIELD, WALL_TIME_FIELD, PendingPoints
from .lineprotocol import value_texts

if TYPE_CHECKING:  # (the forwarder imports this module)
    from .forwarder import LineRenderer

__all__ = ["render_points"]


def render_points(
    renderer: LineRenderer, points: PendingPoints, projects: Mapping[str, str | None]
) -> str:
    """The points' lines, newline-separated ('' for none)."""
    n = len(points)
    if not n:
        return ""
    names_of = points.fields
    field_ids, tags, steps = points.numbers
    present = np.unique(field_ids).tolist()
    names = {names_of[i][1] for i in present}
    if names & set(POINT_FIELDS):
        return "\n".join(renderer.render(points.rows, (), projects))
    order_of = {name: k for k, name in enumerate(sorted(names | set(POINT_FIELDS)))}
    name_rank = np.zeros(present[-1] + 1, np.int64)
    run_index = np.zeros(present[-1] + 1, np.int64)
    runs: dict[str, int] = {}
    for i in present:
        run, name = names_of[i]
        name_rank[i] = order_of[name]
        run_index[i] = runs.setdefault(run, len(runs))
    walls = np.fromiter(points.wall_times, np.float64, n)
    runs_of_rows = run_index[field_ids]

    # the points: rows sorted by (run, tag set, step), a point where any of them changes
    by_point = np.lexsort((steps, tags, runs_of_rows))
    sorted_runs, sorted_tags, sorted_steps = (
        runs_of_rows[by_point],
        tags[by_point],
        steps[by_point],
    )
    starts = np.r_[
        True,
        (sorted_runs[1:] != sorted_runs[:-1])
        | (sorted_tags[1:] != sorted_tags[:-1])
        | (sorted_steps[1:] != sorted_steps[:-1]),
    ]
    point_of_sorted = np.cumsum(starts) - 1
    count = int(point_of_sorted[-1]) + 1
    point_of_row = np.empty(n, np.int64)
    point_of_row[by_point] = point_of_sorted
    first_rows = by_point[starts]
    point_steps = steps[first_rows].tolist()
    newest = np.full(count, -np.inf)
    np.maximum.at(newest, point_of_row, walls)

    # every field of every point, `step` and `wall_time` included, in (point, name) order
    point_ids = np.arange(count)
    pieces_point = np.concatenate([point_of_row, point_ids, point_ids])
    pieces_rank = np.concatenate(
        [
            name_rank[field_ids],
            np.full(count, order_of[STEP_FIELD]),
            np.full(count, order_of[WALL_TIME_FIELD]),
        ]
    )
    texts: npt.NDArray[np.object_] = np.array(
        value_texts(points.values) + [f"{s}i" for s in point_steps] + value_texts(newest.tolist()),
        dtype=object,
    )
    in_order = np.lexsort((pieces_rank, pieces_point))
    texts = texts[in_order]
    written = texts != None  # noqa: E711 (element-wise: a NaN or infinity is never written)
    if not written.all():
        in_order, texts = in_order[written], texts[written]
    piece_points = pieces_point[in_order]
    first = np.r_[True, piece_points[1:] != piece_points[:-1]]
    last = np.r_[first[1:], True]

    # each point's `measurement,tags ` head: one per (run, tag set) of the batch
    run_names = list(runs)
    heads_of: dict[tuple[int, int], str] = {}
    heads = np.empty(count, dtype=object)
    for p, key in enumerate(
        zip(runs_of_rows[first_rows].tolist(), tags[first_rows].tolist(), strict=True)
    ):
        head = heads_of.get(key)
        if head is None:
            run = run_names[key[0]]
            measurement, rank, gpu = points.tags[key[1]]
            head = heads_of[key] = (
                renderer.prefix(measurement, run, projects.get(run), rank, gpu) + " "
            )
        heads[p] = head
    separators = np.full(len(in_order), ",", dtype=object)
    separators[first] = heads[piece_points[first]]
    tails = np.full(len(in_order), "", dtype=object)
    tails[last] = np.array([f" {s}\n" for s in point_steps], dtype=object)[piece_points[last]]
    keys = np.array(
        [renderer.key(name) + "=" for name in sorted(order_of, key=order_of.__getitem__)],
        dtype=object,
    )
    # the four parts of every piece side by side, joined once (adding them first made three
    # strings a piece)
    pieces = np.empty((len(in_order), 4), dtype=object)
    pieces[:, 0] = separators
    pieces[:, 1] = keys[pieces_rank[in_order]]
    pieces[:, 2] = texts
    pieces[:, 3] = tails
    return "".join(pieces.ravel().tolist())[:-1]
