"""The outbox upserts by key, marks rows sent safely, keeps to its disk budget and reads back."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from exporter import Outbox
from exporter.schema import NO_RANK


def _row(step: int, value: float, field: str = "policy_kl", run: str = "r") -> tuple:  # type: ignore[type-arg]
    return (run, NO_RANK, step, "policy", "", field, value, 1000.0 + step)


def test_relogging_a_key_overwrites_and_marks_it_unsent(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    box.upsert_run("r", "p", {"clip_range": 0.2}, None, 1.0)
    box.write([_row(1, 0.1), _row(2, 0.2)])
    pending = box.pending_samples(10)
    box.mark(pending, [])
    assert box.backlog() == 0
    box.write([_row(2, 0.5)])
    (again,) = box.pending_samples(10)
    assert (again.step, again.value, again.project) == (2, 0.5, "p")
    steps, values = box.series("r", "policy_kl")
    assert steps.tolist() == [1, 2] and values.tolist() == [0.1, 0.5]


def test_row_relogged_while_in_flight_is_not_marked_sent(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    box.write([_row(1, 0.1)])
    in_flight = box.pending_samples(10)
    box.write([_row(1, 0.9)])
    box.mark(in_flight, [])
    (still,) = box.pending_samples(10)
    assert still.value == 0.9


def test_read_helpers_return_runs_series_events_and_latest(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    box.upsert_run("r", None, {"lr": 3e-4}, "sb3", 5.0)
    box.write(
        [_row(s, s / 10) for s in range(10)] + [_row(4, 7.0, field="value_loss")],
        [("r", NO_RANK, 3, "checkpoint", "saved", '{"path": "x"}', 1.0)],
    )
    (run,) = box.runs()
    assert (run.run, run.config, run.framework) == ("r", {"lr": 3e-4}, "sb3")
    steps, values = box.series("r", "policy_kl", start=2, end=4)
    assert steps.dtype == np.int64 and steps.tolist() == [2, 3, 4]
    assert values.tolist() == pytest.approx([0.2, 0.3, 0.4])
    (event,) = box.events("r")
    assert (event.step, event.kind, event.text, event.fields) == (
        3,
        "checkpoint",
        "saved",
        {"path": "x"},
    )
    assert box.latest("r") == {"policy_kl": (9, pytest.approx(0.9)), "value_loss": (4, 7.0)}
    assert box.fields("r") == ["policy_kl", "value_loss"]
    assert box.last_step("r") == 9


def test_full_disk_budget_refuses_new_rows_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = Outbox(tmp_path / "o.sqlite", budget_bytes=64 * 1024)
    refused = 0
    with caplog.at_level(logging.ERROR):
        for chunk in range(200):
            rows = [_row(chunk * 100 + i, float(i)) for i in range(100)]
            if not box.write(rows):
                refused += 1
    assert refused > 0
    assert box.size_bytes() < 64 * 1024 + 200 * 1024  # one transaction past the budget at most
    assert sum("REFUSED" in r.getMessage() for r in caplog.records) == 1
