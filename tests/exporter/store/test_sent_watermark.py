"""Points sent are a prefix of the sequence: marking a batch moves one watermark, and everything
that reads "sent" (the forwarder's next batch, the backlog, the `samples` view, a file written
before the watermark) answers as when every row was marked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from exporter import Outbox
from exporter.schema import NO_RANK


def _row(step: int, value: float, field: str = "policy_kl", run: str = "r") -> tuple:  # type: ignore[type-arg]
    return (run, NO_RANK, step, "policy", "", field, value, 1000.0 + step)


def _read_as_sent(path: Path) -> list[tuple[int, int]]:
    """(step, sent) of every sample as the `samples` view reads it (the watermark applied)."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT step, sent FROM samples ORDER BY step").fetchall()
    finally:
        db.close()


def _physical(path: Path) -> list[tuple[int, int, int]]:
    """(step, seq, sent) of every point as the table holds it, not as the view reads it."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT step, seq, sent FROM points ORDER BY seq").fetchall()
    finally:
        db.close()


def test_marking_a_batch_sent_moves_the_watermark_and_leaves_the_rows_unwritten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    box = Outbox(path)
    box.write([_row(s, s / 10) for s in range(6)])
    rows, seq_range = box.pending_rows(4)
    assert [r[2] for r in rows] == [0, 1, 2, 3]
    box.mark_ranges(seq_range, None)
    # the rows themselves were not rewritten (that was the cost the watermark removes) ...
    assert {sent for _, _, sent in _physical(path)} == {0}
    # ... yet every reader sees the first four sent and the last two waiting
    assert box.backlog() == 2 and box.backlog("r") == 2 and box.backlog("other") == 0
    assert [r[2] for r in box.pending_rows(10)[0]] == [4, 5]
    assert box.backlog_oldest() == 1004.0
    assert _read_as_sent(path) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 0), (5, 0)]


def test_a_step_relogged_below_the_watermark_is_sent_again(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    box.write([_row(s, 0.0) for s in range(3)])
    box.mark_ranges(box.pending_rows(10)[1], None)
    assert box.backlog() == 0
    box.write([_row(1, 0.5)])  # a resume re-logging step 1: a new number, past the watermark
    rows, _ = box.pending_rows(10)
    assert [(r[2], r[6]) for r in rows] == [(1, 0.5)]


def test_a_range_that_leaves_unsent_rows_before_it_marks_only_its_own_rows(
    tmp_path: Path,
) -> None:
    # moving the watermark past rows nobody read would lose them: such a range is marked row
    # by row, and the rows before it stay unsent
    box = Outbox(tmp_path / "o.sqlite")
    box.write([_row(s, 0.0) for s in range(4)])
    _, seq_range = box.pending_rows(10)
    assert seq_range is not None
    first, last = seq_range
    box.mark_ranges((first + 2, last), None)
    assert [r[2] for r in box.pending_rows(10)[0]] == [0, 1]
    box.mark_ranges((first, first + 1), None)
    assert box.backlog() == 0


def test_points_refused_by_influxdb_stay_refused_when_the_watermark_passes_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    box = Outbox(path)
    box.write([_row(s, 0.0) for s in range(3)])
    _, seq_range = box.pending_rows(10)
    box.mark_ranges(seq_range, None)
    box.reject(
        [(("sample", "r", NO_RANK, 1, "policy", ""), "policy,run=r x=1 1", "bad")], seq_range
    )
    assert _read_as_sent(path) == [(0, 1), (1, 2), (2, 1)]
    assert box.backlog() == 0


_OLD_VIEW = """CREATE VIEW samples AS
SELECT f.run AS run, t.rank AS rank, p.step AS step, t.measurement AS measurement, t.gpu AS gpu,
       f.field AS field, p.value AS value, p.wall_time AS wall_time, p.seq AS seq, p.sent AS sent
FROM points p JOIN run_fields f ON f.id = p.run_field JOIN tag_sets t ON t.id = p.tag_set"""


def test_a_store_from_before_the_watermark_keeps_what_it_had_sent_and_what_it_had_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    box = Outbox(path)
    box.write([_row(s, s / 10) for s in range(4)])
    box.close()
    # the file as the version before the watermark left it: rows marked one by one (two sent),
    # the view reading the column, no watermark table
    db = sqlite3.connect(path)
    db.execute("DROP VIEW samples")
    db.execute(_OLD_VIEW)
    db.execute("DROP TABLE points_sent_upto")
    db.execute("UPDATE points SET sent = 1 WHERE step < 2")
    db.commit()
    db.close()

    box = Outbox(path)
    assert box.backlog() == 2
    rows, seq_range = box.pending_rows(10)
    assert [r[2] for r in rows] == [2, 3]
    box.mark_ranges(seq_range, None)
    assert box.backlog() == 0
    # the view was made again with its triggers: writing through it still works
    box.write([_row(0, 9.0)])
    assert [(r[2], r[6]) for r in box.pending_rows(10)[0]] == [(0, 9.0)]
    steps, values = box.series("r", "policy_kl")
    assert steps.tolist() == [0, 1, 2, 3] and values.tolist() == [9.0, 0.1, 0.2, 0.3]


def test_points_the_watermark_passed_are_marked_while_idle_and_leave_the_unsent_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    box = Outbox(path)
    box.write([_row(s, 0.0) for s in range(25)])
    _, seq_range = box.pending_rows(20)
    box.mark_ranges(seq_range, None)
    # a chunk at a time, oldest first, never past the watermark
    assert box.settle_sent(limit=8) == 8
    assert box.settle_sent(limit=8) == 8
    assert box.settle_sent(limit=8) == 4
    assert box.settle_sent(limit=8) == 0
    assert [sent for _, _, sent in _physical(path)] == [1] * 20 + [0] * 5
    db = sqlite3.connect(path)
    (indexed,) = db.execute(
        "SELECT count(*) FROM points INDEXED BY points_unsent WHERE sent = 0"
    ).fetchone()
    view = db.execute("SELECT sent, count(*) FROM samples GROUP BY sent").fetchall()
    db.close()
    assert indexed == 5
    assert view == [(0, 5), (1, 20)]
    assert box.backlog() == 5 and [r[2] for r in box.pending_rows(10)[0]] == list(range(20, 25))
