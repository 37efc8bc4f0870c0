"""`rlvitals import` of an event file into the store hands the run its steps as columns
(`Run.log_block`): what it stores (samples, events, running statistics, rollups, the read position
and the step the run is at) is what logging the same records one `Run.log` call at a time
stores."""

from __future__ import annotations

import io
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from columnar import stored_rows
from logmakers import write_event_file

import exporter
import registry
from exporter import run as run_module
from exporter.ingest.commands import import_into


def _log() -> list[tuple[int, dict[str, float]]]:
    """SB3's tags every step, a tag that joins later, a non-finite value, and a resume that
    logs steps 2,500.. again with other values."""
    steps = []
    for step in range(3000):
        values = {
            "rollout/ep_rew_mean": 0.5 + (step % 97) / 128,
            "train/approx_kl": (step % 13) / 256,
            "train/value_loss": 1.0 + (step % 7) / 64,
        }
        if step >= 1200:
            values["train/entropy_loss"] = -1.0 + (step % 5) / 32
        if step == 1700:
            values["train/approx_kl"] = math.nan
        steps.append((step, values))
    steps += [
        (step, {"rollout/ep_rew_mean": 2.0, "train/approx_kl": 0.25}) for step in range(2500, 2600)
    ]
    return steps


def _stored(store: Path, log: Path, reg: registry.Registry) -> tuple[Any, ...]:
    settings = exporter.ExporterSettings(store=store)
    code, _ = import_into([log], settings=settings, reg=reg, run="r", config={}, err=io.StringIO())
    assert code == 0
    db = sqlite3.connect(store / "outbox.sqlite")
    try:
        read = (
            db.execute("SELECT offset, lines, run FROM source_positions").fetchall(),
            db.execute("SELECT * FROM run_progress").fetchall(),
        )
    finally:
        db.close()
    return (*stored_rows(store / "outbox.sqlite"), *read)


def _one_by_one(self: run_module.Run, block: Any) -> None:
    for record in block.records():
        self.log(record.step, record.values, wall_time=record.wall_time)


def test_an_imported_event_file_is_stored_as_its_records_one_by_one_are(
    builtin: registry.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write_event_file(tmp_path / "logs", _log())
    columns = _stored(tmp_path / "columns", log, builtin)
    monkeypatch.setattr(run_module.Run, "log_block", _one_by_one)
    monkeypatch.setattr(run_module, "_BLOCK_AT_LEAST", 10**9)
    single = _stored(tmp_path / "single", log, builtin)
    samples, events, stats, rollups, positions, progress = columns
    assert len(samples) > 3 * 3000
    assert (samples, events, positions, progress) == (single[0], single[1], single[4], single[5])
    assert any("went back" in e[4] for e in events)  # the resume is one
    for ours, theirs in ((stats, single[2]), (rollups, single[3])):
        assert len(ours) == len(theirs)
        for row, other in zip(ours, theirs, strict=True):
            assert row == pytest.approx(other, rel=1e-12)
