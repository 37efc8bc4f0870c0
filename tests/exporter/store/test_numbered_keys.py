"""The outbox stores a point under numbers (its run and field, its measurement, rank and device),
reads it back by name through the `samples` view, and moves a file from before the numbers into
them once, on open, with every row and exact statistics."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np

from exporter.schema import NO_RANK, SampleBlock
from exporter.store import running_stats
from exporter.store.outbox import Outbox

# The samples table as files written before the numbered keys hold it (a fixture of that format).
_BEFORE = """
CREATE TABLE samples (
    run TEXT NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    measurement TEXT NOT NULL,
    gpu TEXT NOT NULL,
    field TEXT NOT NULL,
    value,
    wall_time REAL NOT NULL,
    seq INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run, field, step, rank, measurement, gpu)
);
CREATE INDEX samples_unsent ON samples(seq) WHERE sent = 0;
"""


def _old_rows() -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    seq = 0
    for run in ("a", "b"):
        for step in range(600):
            for field, measurement, rank, gpu in (
                ("policy_kl", "policy", NO_RANK, ""),
                ("gpu_util", "resources", 0, "0"),
                ("gpu_util", "resources", 1, "1"),
            ):
                seq += 1
                value: object = math.sin(step) if step % 97 else float("nan")
                rows.append((run, rank, step, measurement, gpu, field, value, 1e9 + step, seq, 1))
    rows.append(("a", NO_RANK, 0, "unregistered", "", "note", "text", 1e9, seq + 1, 0))
    return rows


def test_a_store_from_before_numbered_keys_opens_with_every_row_and_exact_statistics(
    tmp_path: Path,
) -> None:
    path = tmp_path / "outbox.sqlite"
    rows = _old_rows()
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(_BEFORE)
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()

    with Outbox(path) as box:
        steps, values = box.series("a", "policy_kl", 0, 10_000)
        stats = {(s.field, s.rank): s for s in box.stats("a")}
    finite = [math.sin(s) for s in range(600) if s % 97]
    assert values.tolist() == finite  # every value back, in step order
    assert steps.tolist() == [s for s in range(600) if s % 97]
    assert stats[("policy_kl", None)].count == len(finite)
    assert math.isclose(stats[("policy_kl", None)].total, sum(finite))
    assert stats[("gpu_util", 1)].count == len(finite)

    db = sqlite3.connect(path)
    kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name = 'samples'"))
    moved = db.execute(
        "SELECT run, rank, step, measurement, gpu, field, value, wall_time, seq, sent FROM samples"
    ).fetchall()
    db.close()
    assert kinds == {"samples": "view"}
    nan_free = [r for r in rows if not (isinstance(r[6], float) and math.isnan(r[6]))]
    assert sorted(moved, key=repr) == sorted(
        nan_free + [(*r[:6], None, *r[7:]) for r in rows if r not in nan_free],
        key=repr,
    )
    # what was sent stays sent; the one unsent row is the forwarder's still
    with Outbox(path) as box:
        pending, _ = box.pending_rows(100)
    assert [p[5] for p in pending] == ["note"]


def test_a_point_relogged_after_the_move_replaces_its_value(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(_BEFORE)
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _old_rows())
    db.close()
    with Outbox(path) as box:
        box.write([("a", NO_RANK, 5, "policy", "", "policy_kl", 42.0, 2e9)])
        steps, values = box.series("a", "policy_kl", 5, 5)
        assert (steps.tolist(), values.tolist()) == ([5], [42.0])
        (kl,) = [s for s in box.stats("a") if s.field == "policy_kl"]
    finite = [math.sin(s) for s in range(600) if s % 97 and s != 5] + [42.0]
    assert kl.count == len(finite) and math.isclose(kl.total, sum(finite))


def test_a_point_costs_its_numbers_not_its_names(tmp_path: Path) -> None:
    """A console log's 120 keys of long names (verl's timing keys): the run's and the fields'
    names are stored once, not in every row and index entry (150 bytes a row before)."""
    path = tmp_path / "outbox.sqlite"
    width, steps = 120, 2048
    columns = tuple(
        ("unregistered", "", f"timing_s/update_actor_stage_{i:03d}") for i in range(width)
    )
    block = SampleBlock(
        run="qwen2.5-7b-grpo-gsm8k-verl-console-import",
        rank=NO_RANK,
        steps=tuple(range(steps)),
        wall_times=tuple(1e9 + s for s in range(steps)),
        columns=columns,
        values=np.random.default_rng(0).random((steps, width)),
    )
    with Outbox(path) as box:
        box.write([], blocks=[(0, block)])
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (points,) = db.execute("SELECT count(*) FROM samples").fetchone()
    (pages,) = db.execute(
        "SELECT count(*) FROM dbstat WHERE name IN ('points', 'sqlite_autoindex_points_1', "
        "'points_unsent')"
    ).fetchone()
    (page_size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    assert points == steps * width
    assert pages * page_size / points < 80


def test_statistics_a_store_kept_before_the_move_stay_exact_and_keep_counting(
    tmp_path: Path,
) -> None:
    # A file of the version before: its running statistics summed over the old table (as that
    # version kept them), then moved on open; `rlvitals doctor` finds them agreeing with the rows
    path = tmp_path / "outbox.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(_BEFORE)
    db.executescript(
        "CREATE TABLE sequence (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);"
        "INSERT INTO sequence VALUES (0, 0);"
        "CREATE TABLE events (run TEXT NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, "
        "kind TEXT NOT NULL, text TEXT NOT NULL, fields TEXT NOT NULL DEFAULT '{}', "
        "wall_time REAL NOT NULL, seq INTEGER NOT NULL, sent INTEGER NOT NULL DEFAULT 0, "
        "PRIMARY KEY (run, rank, step, kind));"
    )
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _old_rows())
    db.execute("BEGIN IMMEDIATE")
    for statement in (*running_stats._TABLES, *running_stats._BACKFILL):
        db.execute(statement)
    running_stats._decide(db, running_stats._DECIDE_ALL)
    db.execute("PRAGMA user_version = 1")
    db.execute("COMMIT")
    db.close()

    with Outbox(path) as box:
        assert box.disagreements() == {}
        (kl,) = [s for s in box.stats("a") if s.field == "policy_kl"]
        finite = [math.sin(s) for s in range(600) if s % 97]
        assert kl.count == len(finite) and math.isclose(kl.total, sum(finite))
        box.write([("a", NO_RANK, 5, "policy", "", "policy_kl", 42.0, 2e9)])
        (kl,) = [s for s in box.stats("a") if s.field == "policy_kl"]
        assert box.disagreements() == {}
    finite = [math.sin(s) for s in range(600) if s % 97 and s != 5] + [42.0]
    assert kl.count == len(finite) and math.isclose(kl.total, sum(finite))
