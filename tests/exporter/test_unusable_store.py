"""An unusable or damaged store never crashes the training and never makes `flush()` claim that
what was logged is stored; the disk budget is kept, not overshot by a batch."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import exporter
import registry


def _settings(tmp_path: Path, **kw: object) -> exporter.ExporterSettings:
    return exporter.ExporterSettings(store=tmp_path, policy="warn").replace(**kw)


def test_init_on_a_file_that_is_not_a_database_does_not_raise_and_flush_says_false(
    tmp_path: Path, reg: registry.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "outbox.sqlite").write_bytes(b"this is not an sqlite file" * 100)
    run = exporter.init("r", registry=reg, settings=_settings(tmp_path))
    for step in range(300):
        run.log(step, {"losses/clipfrac": 0.1})
    assert run.flush(timeout=3) is False
    run.finish(timeout=1)
    ended = [r.getMessage() for r in caplog.records if "were not stored" in r.getMessage()]
    # the exit line says the store is what failed; a longer timeout would not have helped
    assert len(ended) == 1 and "does not open" in ended[0] and "not a database" in ended[0]
    assert "longer timeout" not in ended[0]
    stats = run.stats
    assert stats.accepted == 0
    # lost to a store that does not open, not to finish()'s timeout: counted as such
    assert stats.dropped == 300 and set(stats.dropped_by_reason) == {"store_error"}


def test_a_store_damaged_while_running_makes_flush_false_and_counts_only_what_was_stored(
    tmp_path: Path, reg: registry.Registry
) -> None:
    path = tmp_path / "outbox.sqlite"
    # finish() waits at most this for values the damaged store can no longer take
    settings = _settings(tmp_path, flush_timeout=2.0)
    with exporter.init("r", registry=reg, settings=settings) as run:
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
        for step in range(100, 300):  # the batch that meets the damage
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush(timeout=5) is False
        for step in range(300, 400):  # logged while the store no longer opens
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush(timeout=1) is False
    # Counted once the run has ended: until then what the worker could not take (the store no
    # longer opens) is still queued, neither stored nor dropped. CI once read the counts at the
    # second flush, with 80 values still queued, and found 320 of 400.
    stats = run.stats
    assert stats.accepted == 100  # nothing past the damage counts as stored
    assert stats.accepted + stats.dropped + stats.refused_disk == 400
    assert set(stats.dropped_by_reason) <= {"worker_error", "store_error"}


def test_a_1_mb_disk_budget_holds_about_1_mb_of_data_the_run_from_its_start(
    tmp_path: Path, reg: registry.Registry
) -> None:
    """The budget counts the data, not the write-ahead log (which an import grows far past the
    data): it is filled, never overshot by a batch, and what it holds is the run up to where it
    filled, not a scatter of later steps."""
    budget_mb = 1.0
    names = [f"custom/metric_{i}" for i in range(30)]  # unregistered under warn: 30 rows a step
    with exporter.init(
        "r", registry=reg, settings=_settings(tmp_path, disk_budget_mb=budget_mb)
    ) as run:
        for step in range(20_000):
            run.log(step, dict.fromkeys(names, 0.5))
        run.flush(timeout=60)
        stats = run.stats
    size = (tmp_path / "outbox.sqlite").stat().st_size  # closed: the log is checkpointed
    assert not Path(f"{tmp_path}/outbox.sqlite-wal").exists()
    # The run's bookkeeping (its record, its writer lease, how it ended) is written at the
    # budget too, so a run that filled its budget still says how it ended: a few pages at most.
    bookkeeping = 4 * 4096
    assert 0.9 * budget_mb * 2**20 <= size <= budget_mb * 2**20 + bookkeeping, (
        f"{size / 2**20:.2f} MB"
    )
    assert stats.refused_disk > 0
    assert stats.unregistered + stats.refused_disk == 20_000 * 30
    import sqlite3

    with sqlite3.connect(tmp_path / "outbox.sqlite") as db:
        steps = [s for (s,) in db.execute("SELECT DISTINCT step FROM samples ORDER BY step")]
    assert steps == list(range(len(steps)))


def test_a_batch_blocked_by_a_lock_for_longer_than_the_busy_timeout_is_stored_not_dropped(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's busy timeout (30 s) is cut to 1 s here and the lock held for 3 s: the write
    gives up waiting (sqlite's "database is locked") as it would after 30 s, and must retry."""
    import sqlite3
    import time

    from exporter.store import outbox

    monkeypatch.setattr(outbox, "_BUSY_TIMEOUT_MS", 1_000)
    with exporter.init("r", registry=reg, settings=_settings(tmp_path)) as run:
        assert run.flush()
        holder = sqlite3.connect(tmp_path / "outbox.sqlite", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1})
        time.sleep(3)  # three times the store's busy timeout
        holder.execute("ROLLBACK")
        holder.close()
        assert run.flush(timeout=60)
        stats = run.stats
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        steps, _ = box.series("r", "clip_fraction")
    assert len(steps) == 100 and stats.accepted == 100
    assert stats.refused_disk == 0 and stats.dropped == 0


def _stored_steps(path: Path, run: str) -> list[int]:
    import sqlite3

    with sqlite3.connect(path) as db:
        return [
            s
            for (s,) in db.execute(
                "SELECT DISTINCT step FROM samples WHERE run = ? AND field = 'clip_fraction' "
                "ORDER BY step",
                (run,),
            )
        ]


def _replace_with_another_store(tmp_path: Path, path: Path) -> None:
    other = tmp_path / "elsewhere"
    with exporter.init("other", settings=_settings(other)) as run:
        run.log(0, {"train/loss": 1.0})
    os.replace(other / "outbox.sqlite", path)


@pytest.mark.parametrize("how", ["folder deleted", "file replaced"])
def test_flush_says_false_when_the_store_vanished_and_every_sample_is_stored_or_counted(
    tmp_path: Path, reg: registry.Registry, how: str
) -> None:
    """The issue's case: the store deleted under a running run made 200 of 300 steps vanish
    with `flush()` True and nothing counted. Now the promise holds: accepted = in the store +
    counted lost, and the run goes on into a new file at the same path."""
    store = tmp_path / "store"
    path = store / "outbox.sqlite"
    with exporter.init("r", registry=reg, settings=_settings(store)) as run:
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush()
        if how == "folder deleted":
            shutil.rmtree(store)
        else:
            _replace_with_another_store(tmp_path, path)
        for step in range(100, 300):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush() is False
        for step in range(300, 350):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush() is True  # the new file holds what came after
        stats = run.stats
    kept = _stored_steps(path, run.name)
    assert kept and kept[-1] == 349 and kept == list(range(kept[0], 350))
    assert stats.accepted == 350
    assert stats.dropped_by_reason == {"store_lost": 350 - len(kept)}
    import sqlite3

    with sqlite3.connect(path) as db:  # the old file's log was not read as the new file's
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        if how == "file replaced":  # the file put there is kept, not overwritten
            assert db.execute("SELECT count(*) FROM runs WHERE run = 'other'").fetchone() == (1,)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 8 MB filesystem (tmpfs) that a test can fill: what a full disk does to sqlite is
    sqlite's own behaviour, not a model of it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Write a ballast file until the filesystem refuses (ENOSPC)."""
    ballast = folder / "ballast"
    chunk = b"\0" * 65536
    with open(ballast, "wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(chunk)
            fh.flush()
    return ballast


def test_a_full_disk_refuses_fast_counts_refused_disk_and_storing_resumes_when_space_returns(
    small_disk: Path, reg: registry.Registry
) -> None:
    names = [f"custom/metric_{i}" for i in range(10)]  # 10 values a step
    store = small_disk / "store"
    with exporter.init("r", registry=reg, settings=_settings(store)) as run:
        for step in range(200):
            run.log(step, dict.fromkeys(names, 0.5))
        assert run.flush()
        ballast = _fill(small_disk)
        for step in range(200, 2200):
            run.log(step, dict.fromkeys(names, 0.5))
        assert run.flush(timeout=60) is False
        full = run.stats
        ballast.unlink()
        for step in range(2200, 2400):
            run.log(step, dict.fromkeys(names, 0.5))
        assert run.flush(timeout=60) is True
        stats = run.stats
    assert full.refused_disk > 0
    assert "store_error" not in stats.dropped_by_reason  # a full disk is not a broken store
    assert stats.dropped == 0
    assert stats.unregistered + stats.refused_disk == 2400 * 10  # every value stored or counted
    import sqlite3

    with sqlite3.connect(store / "outbox.sqlite") as db:
        (stored,) = db.execute("SELECT count(*) FROM samples WHERE run = 'r'").fetchone()
        steps = {s for (s,) in db.execute("SELECT DISTINCT step FROM samples WHERE run = 'r'")}
    assert stored == stats.unregistered
    assert set(range(200)) <= steps and set(range(2200, 2400)) <= steps  # after space returned
