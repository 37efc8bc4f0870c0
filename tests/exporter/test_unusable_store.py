"""An unusable or damaged store never crashes the training and never makes `flush()` claim that
what was logged is stored; the disk budget is kept, not overshot by a batch."""

from __future__ import annotations

import os
from pathlib import Path

import exporter
import registry


def _settings(tmp_path: Path, **kw: object) -> exporter.ExporterSettings:
    return exporter.ExporterSettings(store=tmp_path, policy="warn").replace(**kw)


def test_init_on_a_file_that_is_not_a_database_does_not_raise_and_flush_says_false(
    tmp_path: Path, reg: registry.Registry
) -> None:
    (tmp_path / "outbox.sqlite").write_bytes(b"this is not an sqlite file" * 100)
    run = exporter.init("r", registry=reg, settings=_settings(tmp_path))
    for step in range(300):
        run.log(step, {"losses/clipfrac": 0.1})
    assert run.flush(timeout=3) is False
    run.finish(timeout=1)
    stats = run.stats
    assert stats.accepted == 0
    assert stats.dropped == 300 and set(stats.dropped_by_reason) == {"unfinished"}


def test_a_store_damaged_while_running_makes_flush_false_and_counts_only_what_was_stored(
    tmp_path: Path, reg: registry.Registry
) -> None:
    path = tmp_path / "outbox.sqlite"
    with exporter.init("r", registry=reg, settings=_settings(tmp_path)) as run:
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush()
        # overwrite every page after the first with garbage, as a failing disk would
        size = os.path.getsize(path)
        with open(path, "r+b") as fh:
            fh.seek(4096)
            fh.write(os.urandom(max(0, size - 4096)))
        wal = Path(f"{path}-wal")
        if wal.exists():
            wal.write_bytes(os.urandom(wal.stat().st_size))
        for step in range(100, 400):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush(timeout=5) is False
        stats = run.stats
    assert stats.accepted <= 100 + 0  # nothing past the damage counts as stored
    assert stats.accepted + stats.dropped + stats.refused_disk >= 400


def test_the_disk_budget_is_not_overshot_by_a_batch(tmp_path: Path, reg: registry.Registry) -> None:
    budget_mb = 1.0
    names = [f"custom/metric_{i}" for i in range(30)]  # unregistered under warn: 30 rows a step
    with exporter.init(
        "r", registry=reg, settings=_settings(tmp_path, disk_budget_mb=budget_mb)
    ) as run:
        for step in range(20_000):
            run.log(step, dict.fromkeys(names, 0.5))
        run.flush(timeout=60)
        stats = run.stats
    size = sum(
        os.path.getsize(p)
        for p in (tmp_path / "outbox.sqlite", Path(f"{tmp_path}/outbox.sqlite-wal"))
        if p.exists()
    )
    assert stats.refused_disk > 0
    assert size <= budget_mb * 2**20 * 1.1, f"{size / 2**20:.1f} MB against {budget_mb} MB"


def test_a_batch_blocked_by_a_lock_for_longer_than_the_busy_timeout_is_stored_not_dropped(
    tmp_path: Path, reg: registry.Registry
) -> None:
    import sqlite3
    import time

    with exporter.init("r", registry=reg, settings=_settings(tmp_path)) as run:
        assert run.flush()
        holder = sqlite3.connect(tmp_path / "outbox.sqlite", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1})
        time.sleep(32)  # past sqlite's 30 s busy timeout
        holder.execute("ROLLBACK")
        holder.close()
        assert run.flush(timeout=60)
        stats = run.stats
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        steps, _ = box.series("r", "clip_fraction")
    assert len(steps) == 100 and stats.accepted == 100
    assert stats.refused_disk == 0 and stats.dropped == 0
