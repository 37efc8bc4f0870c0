"""The forwarder renders and rolls up the points it reads by their numbers, a batch at a time in
numpy (`exporter.influx.point_lines`, `rollups._add_points`): what it sends must be what the
row-at-a-time `LineRenderer` writes for the same rows (the renderer the line-protocol tests hold
to the reference), and the rollups must sum the same values, whatever the batch holds."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter import Outbox
from exporter.influx.forwarder import LineRenderer, _spans
from exporter.influx.point_lines import render_points
from exporter.influx.rollups import _batch
from exporter.schema import NO_RANK, SampleRow

_FIELDS = ["policy_kl", "reward_mean", "a b", "x,y", "z=1", "ünï", "step_time", "walls"]
_MEASUREMENTS = ["policy", "reward", "run config", "m,eas"]

_rows = st.lists(
    st.tuples(
        st.sampled_from(["r", "other run", "r=2"]),
        st.sampled_from([NO_RANK, 0, 3]),
        st.integers(0, 300),
        st.sampled_from(_MEASUREMENTS),
        st.sampled_from(["", "0", "gpu 1"]),
        st.sampled_from(_FIELDS),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(2**40), 2**40),
            # (no newline: the bodies are compared line by line; no lone surrogate: the store
            # keeps text as UTF-8, and every reader decodes text before it gets there)
            st.text(
                st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=5
            ),
        ),
        st.floats(0, 2e9),
    ),
    min_size=1,
    max_size=60,
)


def _read_all(path: Path, rows: list[SampleRow], limit: int) -> list:  # type: ignore[type-arg]
    box = Outbox(path)
    try:
        box.write(rows)
        batches = []
        while (points := box.pending_points(limit)) is not None:
            batches.append(points)
            box.mark_ranges(points.seq_range, None)
        return batches
    finally:
        box.close()


def _rollup_values(part: object) -> set[tuple[object, ...]]:
    batch = _batch([part])  # type: ignore[list-item]
    if batch is None:
        return set()
    return {
        (batch.combos[c], s, v)
        for c, s, v in zip(
            batch.codes.tolist(), batch.steps.tolist(), batch.values.tolist(), strict=True
        )
    }


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=_rows, limit=st.sampled_from([7, 1000]))
def test_points_read_by_number_render_and_roll_up_as_their_rows_do(
    tmp_path_factory,
    rows: list[SampleRow],
    limit: int,  # type: ignore[no-untyped-def]
) -> None:
    path = tmp_path_factory.mktemp("points") / "o.sqlite"
    projects = {"r": "proj", "other run": None, "r=2": "p q"}
    for points in _read_all(path, rows, limit):
        expected = LineRenderer().render(points.rows, (), projects)
        got = render_points(LineRenderer(), points, projects)
        assert sorted(got.split("\n") if got else []) == sorted(expected)
        assert _rollup_values(points) == _rollup_values(points.rows)
        spans: dict[str, list[int]] = {}
        for row in points.rows:
            span = spans.setdefault(row[0], [row[2], row[2]])
            span[0], span[1] = min(span[0], row[2]), max(span[1], row[2])
        assert sorted(_spans(points)) == sorted((r, lo, hi) for r, (lo, hi) in spans.items())


def test_a_point_whose_values_cannot_be_written_still_carries_its_step_and_wall_time(
    tmp_path: Path,
) -> None:
    # a NaN the store kept (sqlite keeps it as NULL) and an infinity: neither is written
    rows = [
        ("r", NO_RANK, 4, "policy", "", "policy_kl", math.nan, 12.5),
        ("r", NO_RANK, 4, "policy", "", "policy_entropy", math.inf, 12.0),
        ("r", NO_RANK, 4, "policy", "", "clip_fraction", 0.25, 11.0),
    ]
    (points,) = _read_all(tmp_path / "o.sqlite", rows, 100)
    assert render_points(LineRenderer(), points, {"r": None}) == (
        "policy,run=r clip_fraction=0.25,step=4i,wall_time=12.5 4"
    )


def test_a_field_named_like_a_point_field_is_rendered_as_the_row_renderer_does(
    tmp_path: Path,
) -> None:
    rows = [
        ("r", NO_RANK, 2, "unregistered", "", "step", 7.0, 3.0),
        ("r", NO_RANK, 2, "unregistered", "", "loss", 0.5, 3.0),
    ]
    (points,) = _read_all(tmp_path / "o.sqlite", rows, 100)
    # the point's own `step` field wins over a logged name `step` (as in every line written)
    assert render_points(LineRenderer(), points, {}) == (
        "unregistered,run=r loss=0.5,step=2i,wall_time=3.0 2"
    )
