"""A columnar block may carry holes (NaN: a value the translator rejected there): the store keeps
exactly the other cells, and its statistics and rollups, summed from the block in hand, agree
with the rows it kept, as when they are read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import Outbox
from exporter.schema import NO_RANK, SampleBlock

_COLUMNS = [("policy", "", "policy_kl"), ("policy", "", "entropy"), ("reward", "", "raw_reward")]


def _block(steps: list[int], values: np.ndarray) -> SampleBlock:  # type: ignore[type-arg]
    return SampleBlock("r", NO_RANK, steps, [1000.0 + s for s in steps], _COLUMNS, values)


def test_holes_are_not_stored_and_the_rest_is(tmp_path: Path) -> None:
    values = np.array([[0.1, np.nan, 1.0], [0.2, 0.5, np.nan], [np.nan, np.nan, 3.0]])
    block = _block([10, 11, 12], values)
    assert (block.cells, block.size) == (9, 5)
    assert [(r[2], r[5], r[6]) for r in block.rows()] == [
        (10, "policy_kl", 0.1),
        (10, "raw_reward", 1.0),
        (11, "policy_kl", 0.2),
        (11, "entropy", 0.5),
        (12, "raw_reward", 3.0),
    ]
    box = Outbox(tmp_path / "o.sqlite")
    assert box.write([], blocks=[(0, block)])
    for field, steps, kept in (
        ("policy_kl", [10, 11], [0.1, 0.2]),
        ("entropy", [11], [0.5]),
        ("raw_reward", [10, 12], [1.0, 3.0]),
    ):
        got_steps, got = box.series("r", field)
        assert got_steps.tolist() == steps and got.tolist() == kept
    assert box.backlog() == 5
    assert box.disagreements() == {}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 70), min_size=1, max_size=6),
    st.data(),
)
def test_statistics_of_blocks_with_holes_agree_with_the_rows_kept(
    tmp_path_factory: object, gaps: list[int], data: st.DataObject
) -> None:
    steps = list(np.cumsum(gaps).tolist())  # rising, across 64-step blocks
    values = np.array(
        [[data.draw(st.one_of(st.just(np.nan), st.floats(-5, 5))) for _ in _COLUMNS] for _ in steps]
    )
    path = Path(str(tmp_path_factory.mktemp("holes"))) / "o.sqlite"  # type: ignore[attr-defined]
    box = Outbox(path)
    assert box.write([], blocks=[(0, _block(steps, values))])
    assert box.disagreements() == {}
    stored = sum(len(box.series("r", f)[0]) for _, _, f in _COLUMNS)
    assert stored == int(np.count_nonzero(~np.isnan(values)))
    box.close()
