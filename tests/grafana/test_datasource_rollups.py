"""Long series on the embedded store come from the outbox's rollup blocks and equal a brute-force
bucketing of the raw rows; whole-run statistics come from its running sums; files without them
(written before they existed, never reopened by the exporter) give the same answers."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from exporter.schema import NO_RANK, ROLLUP_LEVELS
from exporter.store.outbox import Outbox
from grafana.datasource.history import (
    BUCKET_LEVELS,
    EmbeddedHistory,
    MemoryHistory,
    Points,
    bucket_plan,
)

STEPS = 100_000


def _values(steps: np.ndarray) -> np.ndarray:
    return np.sin(steps / 900.0) + 0.001 * (steps % 17)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbeddedHistory, EmbeddedHistory]:
    """The same run twice: as the exporter keeps it, and as a file from before the rollups."""
    folder = tmp_path_factory.mktemp("rollups")
    path = folder / "outbox.sqlite"
    steps = np.arange(STEPS)
    with Outbox(path) as box:
        box.upsert_run("r", None, {}, None, 0.0)
        rows = [
            ("r", NO_RANK, s, "policy", "", "policy_kl", v, 0.0)
            for s, v in zip(steps.tolist(), _values(steps).tolist(), strict=True)
        ]
        # and one logged every 100 steps: no 64-step blocks are kept for it
        rows += [
            ("r", NO_RANK, s * 100, "value", "", "value_loss", v, 0.0)
            for s, v in zip(steps[:30_000].tolist(), _values(steps[:30_000]).tolist(), strict=True)
        ]
        for i in range(0, len(rows), 20_000):
            box.write(rows[i : i + 20_000])
        # a second rank for a while, a resume replaying steps with new values, rows left out
        box.write([("r", 1, s, "policy", "", "policy_kl", 5.0, 0.0) for s in range(30_000, 31_000)])
        box.write(
            [("r", NO_RANK, s, "policy", "", "policy_kl", -2.0, 0.0) for s in range(60_100, 61_000)]
        )
        box.write(
            [
                ("r", NO_RANK, 0, "run_config", "", "policy_kl", 99.0, 0.0),
                ("r", NO_RANK, 500, "policy", "", "policy_kl", "n/a", 0.0),
                ("r", NO_RANK, 501, "policy", "", "policy_kl", math.inf, 0.0),
            ]
        )
    legacy = folder / "legacy.sqlite"
    shutil.copy(path, legacy)
    db = sqlite3.connect(legacy)
    db.execute("DROP TABLE sample_stats")
    db.execute("DROP TABLE sample_rollups")
    db.execute("PRAGMA user_version = 0")
    db.commit()
    db.close()
    return EmbeddedHistory(path), EmbeddedHistory(legacy)


def _raw_rows(
    path: Path, lo: int, hi: int, field: str = "policy_kl"
) -> tuple[np.ndarray, np.ndarray]:
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT step, value FROM samples WHERE run = 'r' AND field = ? "
        "AND measurement != 'run_config' AND step BETWEEN ? AND ?",
        (field, lo, hi),
    ).fetchall()
    db.close()
    kept = [(s, v) for s, v in rows if isinstance(v, float) and math.isfinite(v)]
    return np.array([s for s, _ in kept]), np.array([v for _, v in kept])


def _brute_force(
    path: Path, start: int | None, end: int | None, points: int, field: str = "policy_kl"
) -> Points:
    """Every raw row in range; buckets by the plan: mean of the values, last step."""
    steps, values = _raw_rows(path, start or 0, 2**62 if end is None else end, field)
    plan = bucket_plan(
        int(steps.min()) if start is None else start,
        int(steps.max()) if end is None else end,
        points,
    )
    keys = (steps - plan.origin) // plan.size
    out_steps, out_values = [], []
    for k in np.unique(keys):
        mask = keys == k
        out_steps.append(int(steps[mask].max()))
        out_values.append(float(values[mask].mean()))
    return Points(np.array(out_steps), np.array(out_values), plan.size, int(steps.size))


CASES = [
    (None, None, 1000),  # 64-step blocks
    (None, None, 10),  # 4096-step blocks
    (None, None, 7),
    (12_345, 87_654, 500),  # partial blocks at both edges
    (5_000, 95_000, 3),
    (64, 200, 2),
    (70_000, 70_100, 1),  # one whole block, raw edges
    (100, 163, 1),  # inside two partial blocks only: all raw
    (29_000, 200_000, 50),  # past the end of the data
    (0, 4095, 1),  # exactly one 4096 block
]


@pytest.mark.parametrize(("start", "end", "points"), CASES)
def test_series_from_rollups_equals_brute_force_bucketing_of_raw_rows(
    stores: tuple[EmbeddedHistory, EmbeddedHistory], start: int | None, end: int | None, points: int
) -> None:
    current, legacy = stores
    expected = _brute_force(current.path, start, end, points)
    for store in (current, legacy):
        got = store.series("r", "policy_kl", start, end, points)
        assert 0 < len(got) <= points
        assert got.bucket == expected.bucket
        assert got.total == expected.total
        assert got.steps.tolist() == expected.steps.tolist()
        np.testing.assert_allclose(got.values, expected.values, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("start", "end", "points"), [(None, None, 1000), (None, None, 10), (123_456, 2_345_678, 77)]
)
def test_sparse_series_read_from_the_levels_kept_equal_brute_force(
    stores: tuple[EmbeddedHistory, EmbeddedHistory], start: int | None, end: int | None, points: int
) -> None:
    current, legacy = stores
    expected = _brute_force(current.path, start, end, points, "value_loss")
    for store in (current, legacy):
        got = store.series("r", "value_loss", start, end, points)
        assert got.bucket == expected.bucket and got.total == expected.total
        assert got.steps.tolist() == expected.steps.tolist()
        np.testing.assert_allclose(got.values, expected.values, rtol=1e-9, atol=1e-12)


def test_bucket_plan_stays_within_points_on_whole_blocks() -> None:
    for first, last, points in [(0, 10**6, 1000), (3, 999_999, 977), (123_457, 10**7, 64)]:
        plan = bucket_plan(first, last, points)
        assert plan.origin <= first and plan.count(last) <= points
        if plan.level > 1:
            assert plan.origin % plan.level == 0 and plan.size % plan.level == 0
            assert plan.level <= plan.size < plan.level * 64 or plan.level == max(BUCKET_LEVELS)


def test_series_buckets_are_the_blocks_the_outbox_keeps() -> None:
    assert BUCKET_LEVELS == ROLLUP_LEVELS


def test_memory_store_buckets_like_the_embedded_store(
    stores: tuple[EmbeddedHistory, EmbeddedHistory],
) -> None:
    steps = np.arange(STEPS)
    memory = MemoryHistory({"r": {"policy_kl": (steps.tolist(), _values(steps).tolist())}})
    for points in (1000, 10):
        m = memory.series("r", "policy_kl", 1_000, 29_999, points)
        e = stores[0].series("r", "policy_kl", 1_000, 29_999, points)
        assert m.bucket == e.bucket and m.steps.tolist() == e.steps.tolist()
        np.testing.assert_allclose(m.values, e.values, rtol=1e-9)


def test_whole_run_stats_come_from_the_running_sums_and_match_the_raw_rows(
    stores: tuple[EmbeddedHistory, EmbeddedHistory],
) -> None:
    current, legacy = stores
    _, values = _raw_rows(current.path, 0, 2**62)
    for store in (current, legacy):
        stats = store.stats("r", ["policy_kl", "raw_reward"])
        assert stats["policy_kl"].count == values.size
        assert stats["policy_kl"].mean == pytest.approx(values.mean(), rel=1e-9)
        assert (stats["raw_reward"].count, stats["raw_reward"].mean) == (0, None)
