"""A long event file on screen whole while its import still stores every value (issue 38): the
import first keeps a sketch of the whole file (a sample of its steps, translated as the run's own
rows, `exporter.store.preview`), the embedded store draws a series past what is stored from it, and
once the import ends every value is stored and the sketch is gone.

The values are piecewise constant (one value per 1,000 steps), so a bucket mean of stored values
or of sketched ones is the value the file holds there, whichever the chart was drawn from."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from logmakers import write_event_file

import registry
from exporter import Outbox
from exporter.ingest import feed
from exporter.ingest.sketch import sketch_rows
from exporter.store.preview import PREVIEW_TABLE
from grafana.datasource.history import EmbeddedHistory
from rlvitals.cli import main

STEPS = 30_000
STORED = 10_000  # what the import has stored when the chart is drawn
# registry metric -> the SB3 tag it is logged under
TAGS = {"policy_kl": "train/approx_kl", "clip_fraction": "train/clip_fraction"}


def _value(step: int, k: int) -> float:
    return ((step // 1000) % 8 + k) / 16  # within a clip fraction's [0, 1]


def _log(logdir: Path, steps: range) -> Path:
    return write_event_file(
        logdir, ((s, {t: _value(s, k) for k, t in enumerate(TAGS.values())}) for s in steps)
    )


def _as_written(steps: np.ndarray, values: np.ndarray, k: int) -> float:
    """The share of points whose value is the file's at their step."""
    want = np.array([_value(int(s), k) for s in steps])
    return float(np.mean(np.isclose(values, want)))


def test_the_whole_run_is_drawn_while_only_a_third_is_stored(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    full = _log(tmp_path / "full", range(STEPS))
    head = tmp_path / "head"  # the import's progress: the steps stored so far
    _log(head, range(STORED))
    store = tmp_path / "store"
    assert (
        main(["import", str(head), "--run", "r", "--framework", "sb3", "--store", str(store)]) == 0
    )
    rows = sketch_rows(
        builtin, full, 0, full.stat().st_size, run="r", framework="sb3", config={}, policy="warn"
    )
    with Outbox(store / "outbox.sqlite") as box:
        assert box.write_preview("r", rows) > 0
    history = EmbeddedHistory(store / "outbox.sqlite")
    assert "policy_kl" in history.logged_fields("r")
    for k, field in enumerate(TAGS):
        p = history.series("r", field, None, None, 1000)
        assert p.steps[-1] == STEPS - 1  # the whole run, to its last step
        assert p.steps[0] < p.bucket  # from its first bucket
        assert len(p) <= 1000
        stored, sketched = p.steps <= STORED - 1, p.steps > STORED - 1
        assert stored.sum() > 100 and sketched.sum() > 300  # each part about its share
        # a point's bucket may straddle one of the file's 30 changes of value: all but those
        assert _as_written(p.steps, p.values, k) > 0.95
        # within what is stored, the stored values answer (a range there reads no sketch)
        part = history.series("r", field, None, STORED - 1, 1000)
        assert part.steps[-1] == STORED - 1 and part.total == STORED


def test_an_import_ends_with_every_value_stored_and_no_sketch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a file this size is stored in well under a second: lower the size that gets a sketch
    monkeypatch.setattr(feed, "SKETCH_BYTES", 64 << 10)
    _log(tmp_path / "logs", range(STEPS))
    store = tmp_path / "store"
    assert main(["import", str(tmp_path / "logs"), "--run", "r", "--store", str(store)]) == 0
    history = EmbeddedHistory(store / "outbox.sqlite")
    for field in TAGS:
        p = history.series("r", field, None, None, 1000)
        assert p.total == STEPS and p.steps[-1] == STEPS - 1
    with sqlite3.connect(store / "outbox.sqlite") as db:
        # the sketch was made (its table exists) and dropped once the import stored the run
        assert db.execute(f"SELECT count(*) FROM {PREVIEW_TABLE}").fetchone() == (0,)
