"""The outbox keeps running statistics and step rollups exact: on first write, on re-logging (a
resume replaying steps with new values), on deletes, and for a file from before them (backfill)."""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import exporter
import registry
from exporter.schema import NO_RANK, ROLLUP_LEVELS, SampleBlock
from exporter.store.outbox import _SCHEMA, Outbox

Key = tuple[str, str, int, str, str]


def _counted(value: object, measurement: str) -> bool:
    return (
        measurement != "run_config"
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _raw(path: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(
            "SELECT run, field, rank, measurement, gpu, step, value FROM samples"
        ).fetchall()
    finally:
        db.close()


def _expected_stats(path: Path) -> dict[Key, tuple[int, float, float, int, int]]:
    """Brute force over the stored rows: count, sum, sum of squares, first and last step."""
    acc: dict[Key, list[Any]] = {}
    for run, field, rank, measurement, gpu, step, value in _raw(path):
        if not _counted(value, measurement):
            continue
        a = acc.setdefault((run, field, rank, measurement, gpu), [0, 0.0, 0.0, step, step])
        a[0] += 1
        a[1] += value
        a[2] += value * value
        a[3], a[4] = min(a[3], step), max(a[4], step)
    return {k: (a[0], a[1], a[2], a[3], a[4]) for k, a in acc.items()}


def _stored_stats(path: Path) -> dict[Key, tuple[int, float, float, int, int]]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT run, field, rank, measurement, gpu, n, total, total_sq, first_step, last_step "
            "FROM sample_stats"
        ).fetchall()
    finally:
        db.close()
    return {tuple(r[:5]): tuple(r[5:]) for r in rows}  # type: ignore[misc]


def _kept_levels(path: Path) -> dict[tuple[str, str], list[int]]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT run, field, levels FROM rollup_series").fetchall()
    finally:
        db.close()
    return {
        (run, field): [lv for i, lv in enumerate(ROLLUP_LEVELS) if bits & (1 << i)]
        for run, field, bits in rows
    }


def _expected_rollups(path: Path) -> dict[tuple[str, str, int, int], tuple[int, float, int]]:
    """Brute force, for the levels the outbox keeps for each series."""
    kept = _kept_levels(path)
    acc: dict[tuple[str, str, int, int], list[Any]] = defaultdict(lambda: [0, 0.0, -1])
    for run, field, _rank, measurement, _gpu, step, value in _raw(path):
        if not _counted(value, measurement):
            continue
        for level in kept.get((run, field), []):
            a = acc[(run, field, level, step // level)]
            a[0] += 1
            a[1] += value
            a[2] = max(a[2], step)
    return {k: (a[0], a[1], a[2]) for k, a in acc.items()}


def _stored_rollups(path: Path) -> dict[tuple[str, str, int, int], tuple[int, float, int]]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT run, field, level, block, n, total, last_step FROM sample_rollups"
        ).fetchall()
    finally:
        db.close()
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}  # type: ignore[misc]


def _assert_exact(path: Path) -> None:
    stats, expected = _stored_stats(path), _expected_stats(path)
    assert stats.keys() == expected.keys()
    for key, (n, total, total_sq, first, last) in expected.items():
        got = stats[key]
        assert (got[0], got[3], got[4]) == (n, first, last), key
        assert got[1] == pytest.approx(total, rel=1e-12, abs=1e-9), key
        assert got[2] == pytest.approx(total_sq, rel=1e-12, abs=1e-9), key
    rollups, expected_r = _stored_rollups(path), _expected_rollups(path)
    assert rollups.keys() == expected_r.keys()
    for key, (n, total, last) in expected_r.items():
        got_r = rollups[key]
        assert (got_r[0], got_r[2]) == (n, last), key
        assert got_r[1] == pytest.approx(total, rel=1e-12, abs=1e-9), key


def _row(step: int, value: object, field: str = "policy_kl", **kw: Any) -> tuple[Any, ...]:
    return (
        kw.get("run", "r"),
        kw.get("rank", NO_RANK),
        step,
        kw.get("measurement", "policy"),
        kw.get("gpu", ""),
        field,
        value,
        1000.0 + step,
    )


def test_stats_stay_exact_after_a_resume_replays_steps_with_new_values(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, policy="strict")
    with exporter.init("resumed", registry=reg, settings=settings) as run:
        for step in range(5000):
            run.log(step, {"losses/clipfrac": 0.1 + step * 1e-5, "train/approx_kl": 0.01})
    # a new process resumes from the checkpoint at step 3000 and replays it with other values
    with exporter.init("resumed", registry=reg, settings=settings, resume=True) as run:
        for step in range(3000, 6000):
            run.log(step, {"losses/clipfrac": 0.5 - step * 1e-5, "train/approx_kl": 0.02})
    _assert_exact(settings.outbox_path)
    with Outbox(settings.outbox_path) as box:
        (clip,) = box.stats("resumed", "clip_fraction")
        (kl,) = box.stats("resumed", "policy_kl")
    expected_clip = [0.1 + s * 1e-5 for s in range(3000)] + [
        0.5 - s * 1e-5 for s in range(3000, 6000)
    ]
    assert (clip.count, clip.first_step, clip.last_step) == (6000, 0, 5999)
    assert clip.mean == pytest.approx(sum(expected_clip) / 6000, rel=1e-12)
    assert kl.mean == pytest.approx((3000 * 0.01 + 3000 * 0.02) / 6000, rel=1e-12)
    assert (kl.min_seen, kl.max_seen) == (0.01, 0.02)


def test_stats_follow_ranks_gpus_rewrites_to_text_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    with Outbox(path) as box:
        rows = [_row(s, s * 0.5, rank=r) for s in range(300) for r in (0, 1)]
        rows += [_row(s, 40.0 + s, "gpu_util", measurement="system", gpu="0") for s in range(200)]
        box.write(rows)
        box.write([_row(s, -1.0, rank=1) for s in range(100, 200)])  # rank 1 replays
        box.write([_row(7, "oops", rank=0), _row(7, "oops", rank=1)])  # a number becomes text
        box.write([_row(8, 3, rank=0)])  # an integer value
        box.write([_row(0, 1.5, "lr", measurement="run_config")])  # hyperparameters: not counted
    _assert_exact(path)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM samples WHERE field = 'policy_kl' AND step >= 250")
    db.execute("DELETE FROM samples WHERE field = 'gpu_util' AND step < 64")
    db.commit()
    db.close()
    _assert_exact(path)
    with Outbox(path) as box:
        assert {s.field for s in box.stats("r")} == {"policy_kl", "gpu_util"}
        (gpu,) = box.stats("r", "gpu_util")
        assert (gpu.count, gpu.first_step, gpu.last_step) == (136, 64, 199)


def test_non_finite_values_stay_out_of_the_statistics(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    with Outbox(path) as box:
        box.write([_row(0, 1.0), _row(1, math.inf), _row(2, math.nan), _row(3, 3.0)])
        (kl,) = box.stats("r")
    assert (kl.count, kl.total, kl.max_seen) == (2, 4.0, 3.0)


def test_an_outbox_from_before_the_statistics_is_backfilled_once_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(_SCHEMA)  # the schema of files written before the statistics existed
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO samples (run, rank, step, measurement, gpu, field, value, wall_time, seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
        [_row(s, math.sin(s), rank=s % 3) for s in range(10_000)]
        + [_row(s, "text", "note") for s in range(10)]
        + [_row(s, float(s), "reward", run="other", measurement="reward") for s in range(5000)],
    )
    db.execute("COMMIT")
    db.close()
    with Outbox(path) as box:
        (kl,) = [s for s in box.stats("r") if s.rank == 0]
        assert kl.count == len(range(0, 10_000, 3))
    _assert_exact(path)
    assert _stored_rollups(path)[("other", "reward", 4096, 0)] == (
        4096,
        float(sum(range(4096))),
        4095,
    )
    # opened again: nothing is counted twice; later writes keep it exact
    with Outbox(path) as box:
        box.write([_row(s, 2.0, rank=0) for s in range(0, 300, 3)])
    _assert_exact(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] >= 1
    db.close()


def test_rows_another_program_writes_are_summed_by_the_next_outbox_write(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    with Outbox(path) as box:
        box.write([_row(s, float(s)) for s in range(500)])
    # another program (a tool) follows the sequence but keeps no statistics; an insert into
    # the `samples` view replaces the value of a key it already holds
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    (last,) = other.execute("UPDATE sequence SET n = n + 700 RETURNING n").fetchone()
    other.executemany(
        "INSERT INTO samples (run, rank, step, measurement, gpu, field, value, wall_time, seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*_row(s, -float(s)), last - 699 + i) for i, s in enumerate(range(300, 1000))],
    )
    other.execute("DELETE FROM samples WHERE step < 10")
    other.execute("COMMIT")
    other.close()
    with Outbox(path) as box:
        box.write([_row(2000, 1.0)])
        (kl,) = box.stats("r")
    _assert_exact(path)
    assert (kl.count, kl.first_step, kl.last_step) == (991, 10, 2000)


def test_rebuilding_statistics_sums_rows_written_around_the_outbox(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    Outbox(path).close()
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO samples (run, rank, step, measurement, gpu, field, value, wall_time, seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
        [_row(s, 0.5) for s in range(100)],
    )
    db.commit()
    db.close()
    with Outbox(path) as box:
        box.rebuild_statistics()
        box.write([_row(s, 1.5) for s in range(50, 150)])
    _assert_exact(path)


def test_rollup_levels_follow_how_densely_a_series_is_logged(tmp_path: Path) -> None:
    path = tmp_path / "o.sqlite"
    with Outbox(path) as box:
        for start in range(0, 3000, 100):  # small batches, as Run.log writes them
            box.write(
                [_row(s, 1.0, "dense") for s in range(start, start + 100)]
                + [_row(s * 128, 1.0, "every_128") for s in range(start, start + 100)]
                + [_row(s * 5000, 1.0, "every_5000") for s in range(start, start + 100)]
            )
        box.write([_row(s, 1.0, "short") for s in range(200)])
    assert _kept_levels(path) == {
        ("r", "dense"): [64, 4096],
        ("r", "every_128"): [4096],
        ("r", "every_5000"): [],
    }
    _assert_exact(path)


def _rollups_seen(path: Path) -> dict[tuple[str, str, int, int], tuple[int, float, float, int]]:
    """Each rollup block's count, lowest and highest value and last step, as stored."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT run, field, level, block, n, min_seen, max_seen, last_step FROM sample_rollups"
        ).fetchall()
    finally:
        db.close()
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}  # type: ignore[misc]


def _values_by_block(path: Path) -> dict[tuple[str, str, int, int], tuple[int, float, float, int]]:
    """Brute force over the stored rows, for the levels kept: count, min, max, last step."""
    kept = _kept_levels(path)
    acc: dict[tuple[str, str, int, int], list[Any]] = {}
    for run, field, _rank, measurement, _gpu, step, value in _raw(path):
        if not _counted(value, measurement):
            continue
        for level in kept.get((run, field), []):
            a = acc.setdefault((run, field, level, step // level), [0, value, value, step])
            a[0] += 1
            a[1], a[2], a[3] = min(a[1], value), max(a[2], value), max(a[3], step)
    return {k: (a[0], a[1], a[2], a[3]) for k, a in acc.items()}


def test_rollups_of_a_series_whose_first_write_is_long_hold_its_values(tmp_path: Path) -> None:
    # A series past 256 points in its first write (an import's block, a long batch of rows) gets
    # its rollup levels chosen and filled in that write; one with a few points stored before
    # gets them from everything stored. Each way, every block holds the values stored in it.
    path = tmp_path / "o.sqlite"
    rng = np.random.default_rng(3)
    steps = list(range(1, 5001))
    columns = [("policy", "", "policy_kl"), ("unregistered", "", "timing/w0")]
    with Outbox(path) as box:
        box.write([_row(s, 0.25, "earlier") for s in range(1, 101)])  # too few to decide on
        box.write(
            [_row(s, 9.0, "timing/w0", measurement="unregistered") for s in range(1, 4)]
        )  # overwritten
        block = SampleBlock(
            "r", NO_RANK, steps, [1000.0] * len(steps), columns, rng.random((5000, 2))
        )
        box.write([_row(s, float(s % 7), "earlier") for s in range(101, 3000)], blocks=[(0, block)])
        box.write([_row(s, float(s % 5), "rows") for s in range(0, 3000)])
        box.write([_row(s, float(s % 3), "rows") for s in range(3000, 6000)])  # a later write
    assert set(_kept_levels(path)) == {
        ("r", "policy_kl"),
        ("r", "timing/w0"),
        ("r", "earlier"),
        ("r", "rows"),
    }
    assert all(levels == [64, 4096] for levels in _kept_levels(path).values())
    stored, expected = _rollups_seen(path), _values_by_block(path)
    assert stored.keys() == expected.keys()
    for key, (n, low, high, last) in expected.items():
        assert stored[key][0] == n and stored[key][3] == last, key
        assert stored[key][1] == pytest.approx(low) and stored[key][2] == pytest.approx(high), key
    _assert_exact(path)
