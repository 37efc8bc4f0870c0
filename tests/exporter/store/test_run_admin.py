"""Deleting, renaming, noting and tagging a run in the store (`exporter.store.run_admin`): a
deleted run leaves no row in any table that keys rows by run while other runs keep every row; a
renamed run keeps every row and its read positions under the new name; a run a live process
writes is refused; an older store file gets the notes and tags columns when opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import exporter
import registry
from exporter import Outbox
from exporter.schema import NO_RANK, SourcePosition
from exporter.store import run_admin


def _tables_with_run(path: Path) -> list[str]:
    """Every table of the file that has a `run` column: found from the file, not from the code."""
    with sqlite3.connect(path) as db:
        names = [
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        ]
        return [
            n for n in names if any(c[1] == "run" for c in db.execute(f"PRAGMA table_info({n})"))
        ]


def _rows_of(path: Path, run: str) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return {
            t: db.execute(f"SELECT count(*) FROM {t} WHERE run = ?", (run,)).fetchone()[0]
            for t in _tables_with_run(path)
        }


def _logged(store: Path, reg: registry.Registry, name: str, steps: int = 5000) -> None:
    """A run with every kind of row: samples (enough for rollups), config, an event, progress,
    a refused-line record and a read position of a followed file."""
    settings = exporter.ExporterSettings(store=store, policy="warn")
    with exporter.init(name, registry=reg, settings=settings, config={"lr": 3e-4}) as run:
        for step in range(steps):
            run.log(step, {"policy_kl": 0.01 * (step % 7), "clip_fraction": step / steps})
        run.event(10, "checkpoint", "saved")
    with Outbox(store / "outbox.sqlite") as box:
        box.reject([(("sample", name, NO_RANK, 3, "policy", ""), "line", "refused")])
        box.write(
            [(name, NO_RANK, steps, "policy", "", "policy_kl", 0.5, 1.0)],
            positions=[SourcePosition(f"/logs/{name}/metrics.jsonl", 1, 2, 300, 4, b"h", b"m")],
            progress=[(name, NO_RANK, steps)],
        )


@pytest.fixture
def store(tmp_path: Path, reg: registry.Registry) -> Path:
    store = tmp_path / "store"
    _logged(store, reg, "gone")
    _logged(store, reg, "kept", steps=3000)
    return store


def test_delete_leaves_no_row_of_the_run_in_any_table_and_other_runs_untouched(
    store: Path,
) -> None:
    path = store / "outbox.sqlite"
    before = _rows_of(path, "gone")
    # every kind of row the run had is there to be deleted: samples, statistics, rollups,
    # events, progress, refused lines, positions, the run itself
    for table in ("samples", "sample_stats", "sample_rollups", "events", "run_progress"):
        assert before[table] > 0, table
    assert before["rejected"] == before["source_positions"] == before["runs"] == 1
    kept_before = _rows_of(path, "kept")
    with Outbox(path) as box:
        kept_stats = box.stats("kept")
        kept_series = box.series("kept", "policy_kl")
        run_admin.delete_run(box, "gone")
        assert box.run("gone") is None and [r.run for r in box.runs()] == ["kept"]
        assert box.stats("kept") == kept_stats
        steps, values = box.series("kept", "policy_kl")
        assert steps.tolist() == kept_series[0].tolist()
        assert values.tolist() == kept_series[1].tolist()
    assert set(_rows_of(path, "gone").values()) == {0}
    assert _rows_of(path, "kept") == kept_before


def test_rename_keeps_every_row_and_the_read_position_under_the_new_name(store: Path) -> None:
    path = store / "outbox.sqlite"
    before = _rows_of(path, "gone")
    with Outbox(path) as box:
        stats = box.stats("gone")
        series = box.series("gone", "clip_fraction")
        events = box.events("gone")
        run_admin.rename_run(box, "gone", "renamed")
        assert box.run("gone") is None and box.run("renamed") is not None
        assert [(s.field, s.count, s.total) for s in box.stats("renamed")] == [
            (s.field, s.count, s.total) for s in stats
        ]
        assert box.series("renamed", "clip_fraction")[1].tolist() == series[1].tolist()
        assert [(e.step, e.kind, e.text) for e in box.events("renamed")] == [
            (e.step, e.kind, e.text) for e in events
        ]
        assert box.position_runs() == {
            "/logs/gone/metrics.jsonl": "renamed",
            "/logs/kept/metrics.jsonl": "kept",
        }
        assert box.last_step("renamed") == 5000
    assert _rows_of(path, "renamed") == before
    assert set(_rows_of(path, "gone").values()) == {0}


def test_rename_onto_a_taken_name_an_unknown_run_or_a_bad_name_is_refused(store: Path) -> None:
    with Outbox(store / "outbox.sqlite") as box:
        with pytest.raises(run_admin.NameTaken, match="'kept' is already in the store"):
            run_admin.rename_run(box, "gone", "kept")
        with pytest.raises(run_admin.UnknownRun, match="did you mean 'gone'"):
            run_admin.rename_run(box, "gon", "x")
        for bad in ("", " padded", "line\nbreak", "ends\\"):
            with pytest.raises(run_admin.BadValue):
                run_admin.rename_run(box, "gone", bad)
        assert {r.run for r in box.runs()} == {"gone", "kept"}


def test_a_run_a_live_process_writes_is_neither_deleted_nor_renamed(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path / "s", policy="warn")
    live = exporter.init("busy", registry=reg, settings=settings)
    live.log(1, {"policy_kl": 0.1})
    assert live.flush()
    try:
        with Outbox(settings.outbox_path) as box:
            for change in (
                lambda: run_admin.delete_run(box, "busy"),
                lambda: run_admin.rename_run(box, "busy", "other"),
            ):
                with pytest.raises(run_admin.RunInUse, match=r"pid \d+ on "):
                    change()
            assert box.run("busy") is not None and box.series("busy", "policy_kl")[0].size == 1
    finally:
        live.finish()


def test_notes_and_tags_are_kept_with_the_run_and_follow_a_rename(store: Path) -> None:
    with Outbox(store / "outbox.sqlite") as box:
        run_admin.set_notes(box, "gone", "lr too high\nsecond line")
        assert run_admin.set_tags(box, "gone", add=["ppo", "baseline", "ppo"]) == (
            "baseline",
            "ppo",
        )
        assert run_admin.set_tags(box, "gone", remove=["baseline", "absent"]) == ("ppo",)
        run_admin.rename_run(box, "gone", "renamed")
        record = box.run("renamed")
        assert record is not None
        assert (record.notes, record.tags) == ("lr too high\nsecond line", ("ppo",))
        run_admin.set_notes(box, "renamed", "")
        assert box.run("renamed").notes == ""  # type: ignore[union-attr]
        for bad in ("", "two words", "a,b", "x" * 65):
            with pytest.raises(run_admin.BadValue):
                run_admin.set_tags(box, "renamed", add=[bad])
        with pytest.raises(run_admin.BadValue):
            run_admin.set_notes(box, "renamed", "x" * (run_admin.MAX_NOTES + 1))


def test_a_store_from_before_notes_and_tags_gets_them_when_opened(store: Path) -> None:
    path = store / "outbox.sqlite"
    with sqlite3.connect(path) as db:  # the file as an older rlvitals left it
        for table, column in (("runs", "notes"), ("runs", "tags"), ("source_positions", "run")):
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    with Outbox(path) as box:
        assert box.run("kept").tags == ()  # type: ignore[union-attr]
        assert run_admin.set_tags(box, "kept", add=["old"]) == ("old",)
        # positions stored before carry no run: no run claims them
        assert box.position_runs() == {}
