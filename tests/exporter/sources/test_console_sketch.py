"""A long console log on screen whole while its import still stores every value, as a long event
file is (`test_import_sketch.py`): the import first keeps a sketch of the whole log (a sample of
its printed steps, translated as the run's own rows, `exporter.store.preview`, the one preview the
store has), the page draws a series past what is stored from it, the run's last step and its
statistics stay the stored values' (the sketch is marked as such by being kept apart), and once
the import ends every value is stored, exactly as an import without a sketch stores them, and the
sketch is gone.

The values are piecewise constant (one value per 200 steps), so a bucket mean of stored values or
of sketched ones is the value the log printed there, whichever the chart was drawn from."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from consolemakers import hf_console, ray, verl_line

import registry
from exporter import Outbox
from exporter.ingest import feed
from exporter.ingest.sketch import sketch_rows
from exporter.sources.console import ConsoleParser
from exporter.sources.console_sample import sample_steps
from exporter.store.preview import PREVIEW_TABLE
from grafana.datasource.history import EmbeddedHistory
from rlvitals.cli import main

STEPS = 6000
STORED = 2000  # what the import has stored when the chart is drawn
# registry metric -> the verl key it is printed under
KEYS = {"policy_entropy": "actor/entropy", "policy_kl": "actor/ppo_kl"}
OTHERS = [f"timing_per_worker/w{i}" for i in range(6)]  # names the registry does not know


def _value(step: int, k: int) -> float:
    return ((step // 200) % 8 + k) / 16


def _line(step: int) -> str:
    values = {key: np.float64(_value(step, k)) for k, key in enumerate([*KEYS.values(), *OTHERS])}
    return ray(verl_line(step, values))


def _log(folder: Path, steps: range, *, noise: bool = False) -> Path:
    """A verl console log of `steps`, as Ray forwards it; with `noise`, what else a job prints
    between the steps (a banner, warnings, a progress bar overdrawn in place) and a last line
    cut while it was printed."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00, 1.1it/s]"]
    for step in steps:
        lines.append(_line(step))
        if noise and step % 3 == 0:
            lines.append("(WorkerDict pid=77) WARNING: a long warning line " + "x" * 300)
            lines.append("Processed prompts:  50%|#####     | 1/2 [00:01<00:01]\r" + _line(step))
    text = "\n".join(lines) + "\n"
    if noise:
        text += _line(steps[-1] + 1)[:200]  # the writer killed mid-line
    path = folder / "train.log"
    path.write_text(text)
    return path


def _as_written(steps: np.ndarray, values: np.ndarray, k: int) -> float:
    want = np.array([_value(int(s), k) for s in steps])
    return float(np.mean(np.isclose(values, want)))


def test_a_sample_holds_steps_the_log_printed_with_the_values_the_import_reads(
    tmp_path: Path,
) -> None:
    path = _log(tmp_path / "logs", range(1, STEPS + 1), noise=True)
    sample = sample_steps(path)
    parser = ConsoleParser()
    read = {}
    for line in path.read_text().split("\n")[:-1]:  # the import reports the cut line instead
        for record in parser.feed(line):
            read[record.step] = record.values
    assert 300 < len(sample) <= 1001  # spread over the file
    assert [r.step for r in sample] == sorted({r.step for r in sample})
    assert sample[-1].step == STEPS  # as far as the log's last whole line
    for record in sample:
        assert record.values == read[record.step]


def test_a_log_of_trainer_dicts_gets_no_sketch(tmp_path: Path) -> None:
    # their step is placed by what was printed before them, which a window does not hold
    logs = [(k, {"loss": 0.1 * k, "reward": 0.5, "epoch": k / 100}) for k in range(1, 300)]
    path = tmp_path / "train.log"
    path.write_text(hf_console(logs, max_steps=300))
    assert sample_steps(path) == []


def test_an_openrlhf_global_step_line_that_cannot_be_read_is_passed_by(tmp_path: Path) -> None:
    # the import names such a line (test_console_logs.py); the sketch samples the others
    lines = [
        f"✨ Global step {s}: {{'policy_loss': {s / 1000}, 'reward': 0.5}}" for s in range(1, 400)
    ]
    lines[-1] = "✨ Global step 399: {'policy_loss': 0.399, ...}"
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    sample = sample_steps(path)
    assert sample and sample[-1].step == 398
    assert all(r.values == {"policy_loss": r.step / 1000, "reward": 0.5} for r in sample)


def test_the_whole_run_is_drawn_while_only_a_third_is_stored(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    full = _log(tmp_path / "full", range(1, STEPS + 1))
    head = _log(tmp_path / "head", range(1, STORED + 1))  # the import's progress so far
    store = tmp_path / "store"
    argv = ["import", str(head), "--run", "r", "--framework", "verl", "--store", str(store)]
    assert main(argv) == 0
    rows = sketch_rows(
        builtin,
        full,
        0,
        full.stat().st_size,
        run="r",
        framework="verl",
        config={},
        policy="warn",
        format="console",
    )
    with Outbox(store / "outbox.sqlite") as box:
        assert box.write_preview("r", rows) > 0
    history = EmbeddedHistory(store / "outbox.sqlite")
    for k, field in enumerate(KEYS):
        p = history.series("r", field, None, None, 1000)
        assert p.steps[-1] == STEPS  # the whole run, to its last step
        assert len(p) <= 1000
        stored, sketched = p.steps <= STORED, p.steps > STORED
        assert stored.sum() > 100 and sketched.sum() > 300  # each part about its share
        assert _as_written(p.steps, p.values, k) > 0.95
    # the sketch is no stored value: the run's last step and statistics are what is stored
    assert history.latest("r").step == STORED
    assert history.stats("r", ["policy_entropy"])["policy_entropy"].count == STORED


def _stored(store: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / "outbox.sqlite") as db:
        return db.execute(
            "SELECT run, rank, step, measurement, gpu, field, value FROM samples "
            "ORDER BY run, field, step, rank"
        ).fetchall()


def test_an_import_ends_with_every_value_stored_as_without_a_sketch_and_no_sketch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _log(tmp_path / "logs", range(1, STEPS + 1), noise=True)
    plain = tmp_path / "plain"
    assert main(["import", str(path), "--run", "r", "--store", str(plain)]) == 0
    # a log this size is stored in a second or two: lower the size that gets a sketch
    monkeypatch.setattr(feed, "SKETCH_BYTES", 64 << 10)
    sketched = tmp_path / "sketched"
    assert main(["import", str(path), "--run", "r", "--store", str(sketched)]) == 0
    with sqlite3.connect(sketched / "outbox.sqlite") as db:
        # the sketch was made (its table exists) and dropped once the import stored the run
        assert db.execute(f"SELECT count(*) FROM {PREVIEW_TABLE}").fetchone() == (0,)
    assert _stored(sketched) == _stored(plain)
    printed = [r for r in _stored(plain) if r[5] in {*KEYS, *OTHERS}]
    assert len(printed) == STEPS * (len(KEYS) + len(OTHERS))  # every value the log printed
