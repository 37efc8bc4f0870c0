"""A batch whose blocks and rows share a key is folded by reading it back (the later value
replaced the earlier in the file); the check that finds such a key answers as the definition
does, for batches cut into many blocks too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.schema import SampleBlock
from exporter.store.outbox import _written_twice

_COLUMNS = [("policy", "", "policy_kl"), ("policy", "", "entropy"), ("reward", "", "raw_reward")]


def _shares_a_key(rows: list[tuple], blocks: list[SampleBlock]) -> bool:  # type: ignore[type-arg]
    """The definition: some (run, rank, step, measurement, gpu, field) is in two of them."""
    seen: set[tuple] = set()  # type: ignore[type-arg]
    for b in blocks:
        for step in b.steps:
            for m, g, f in b.columns:
                key = (b.run, b.rank, step, m, g, f)
                if key in seen:
                    return True
                seen.add(key)
    return any((r[0], r[1], r[2], r[3], r[4], r[5]) in seen for r in rows)


def _spans_meet(rows: list[tuple], blocks: list[SampleBlock]) -> bool:  # type: ignore[type-arg]
    """What the check promises, by spans (a block's first to last step, gaps included): two
    blocks of a series whose spans meet in a column, or a row inside such a span. It may say
    yes where no step is shared (the batch is then only folded the slower, exact way)."""
    spans = [(b.run, b.rank, b.steps[0], b.steps[-1], set(b.columns)) for b in blocks if b.steps]
    for i, (run, rank, lo, hi, cols) in enumerate(spans):
        for o_run, o_rank, o_lo, o_hi, o_cols in spans[i + 1 :]:
            if (run, rank) == (o_run, o_rank) and lo <= o_hi and o_lo <= hi and cols & o_cols:
                return True
    return any(
        (r[0], r[1]) == (run, rank) and lo <= r[2] <= hi and (r[3], r[4], r[5]) in cols
        for r in rows
        for run, rank, lo, hi, cols in spans
    )


@st.composite
def _batch(draw: st.DrawFn) -> tuple[list[tuple], list[SampleBlock]]:  # type: ignore[type-arg]
    blocks = []
    for _ in range(draw(st.integers(0, 12))):
        run = draw(st.sampled_from(["a", "b"]))
        rank = draw(st.sampled_from([-1, 0]))
        first = draw(st.integers(0, 40))
        steps = sorted(set(draw(st.lists(st.integers(first, first + 8), min_size=1, max_size=5))))
        columns = draw(st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=3, unique=True))
        values = np.zeros((len(steps), len(columns)))
        blocks.append(SampleBlock(run, rank, steps, [1.0] * len(steps), columns, values))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        m, g, f = draw(st.sampled_from(_COLUMNS))
        run = draw(st.sampled_from(["a", "b"]))
        rows.append(
            (run, draw(st.sampled_from([-1, 0])), draw(st.integers(0, 50)), m, g, f, 0.0, 1.0)
        )
    return rows, blocks


@settings(max_examples=400, deadline=None)
@given(_batch())
def test_a_key_shared_by_blocks_or_a_row_and_a_block_is_never_missed(
    batch: tuple[list[tuple], list[SampleBlock]],  # type: ignore[type-arg]
) -> None:
    rows, blocks = batch
    # (within a block steps and columns are distinct: only sharing across parts is in question)
    found = _written_twice(rows, blocks)
    assert found == _spans_meet(rows, blocks)
    if _shares_a_key(rows, blocks):  # never a shared key missed
        assert found


def test_hundreds_of_disjoint_blocks_share_no_key() -> None:
    blocks = [
        SampleBlock("a", -1, [3 * i, 3 * i + 1], [1.0, 1.0], _COLUMNS, np.zeros((2, 3)))
        for i in range(500)
    ]
    rows = [("a", -1, 3 * i + 2, *_COLUMNS[0], 0.0, 1.0) for i in range(500)]
    assert not _written_twice(rows, blocks)
    assert _written_twice([*rows, ("a", -1, 901, *_COLUMNS[2], 0.0, 1.0)], blocks)
