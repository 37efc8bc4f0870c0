"""A logged name is translated one way for the whole run (issue 39, item 3): without
`framework=`, SB3's `train/entropy_loss` (negative entropy; OpenRLHF logs positive entropy under
the same name, registry/metrics.yaml) is stored as one field with one sign at every step, whatever
the pace of the loop and wherever the worker's batches fall. A framework told only later does not
split the field: the name stays as first decided and an event says so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import exporter
import registry
from grafana.datasource.history.embedded import EmbeddedHistory

ENTROPY = "train/entropy_loss"
TELLS = "train/value_loss"  # an SB3-only name: with it the names logged say "sb3"
STEPS = 120


def _entropy_logged(step: int) -> float:
    return -0.69 + step / 1000  # SB3 logs -H


def _store_fields(store: Path, run: str) -> dict[str, str]:
    return dict(EmbeddedHistory(store / "outbox.sqlite").logged_fields(run))


def _series(store: Path, run: str, field: str) -> tuple[list[int], list[float]]:
    points = EmbeddedHistory(store / "outbox.sqlite").series(run, field, None, None, 10_000)
    return points.steps.tolist(), points.values.tolist()


def _log(run: exporter.Run, step: int, values: dict[str, float], pace: str, seed: int) -> None:
    """One call, at one of the paces a loop logs at: as fast as it can, a few ms per call, or
    a flush after some calls (the worker's batch ends exactly there)."""
    run.log(step, values)
    if pace == "slow":
        time.sleep(0.002)
    elif pace == "flushed" and step % (seed + 2) == seed:
        assert run.flush()


PACES = [("fast", 0), ("slow", 0), ("flushed", 0), ("flushed", 1), ("flushed", 3), ("flushed", 7)]


@pytest.mark.parametrize(("pace", "seed"), PACES)
def test_sb3s_entropy_loss_is_one_field_with_one_sign_at_every_step_at_any_pace(
    tmp_path: Path, builtin: registry.Registry, pace: str, seed: int
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("ent", registry=builtin, settings=settings) as run:
        for step in range(STEPS):
            _log(run, step, {ENTROPY: _entropy_logged(step), TELLS: 1.0}, pace, seed)
        assert run.flush()
    sb3 = builtin.resolve(ENTROPY, "sb3")
    fields = _store_fields(tmp_path, "ent")
    assert ENTROPY not in fields
    steps, values = _series(tmp_path, "ent", sb3.field)
    assert steps == list(range(STEPS))
    assert values == pytest.approx([sb3.transform.apply(_entropy_logged(s)) for s in steps])


@pytest.mark.parametrize(("pace", "seed"), PACES)
def test_a_framework_told_later_leaves_the_name_as_first_decided_and_says_so(
    tmp_path: Path, builtin: registry.Registry, pace: str, seed: int
) -> None:
    # the first 30 steps log only the ambiguous name: nothing tells the framework yet
    told_at = 30
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("late", registry=builtin, settings=settings) as run:
        for step in range(STEPS):
            values = {ENTROPY: _entropy_logged(step)}
            if step >= told_at:
                values[TELLS] = 1.0
            _log(run, step, values, pace, seed)
        assert run.flush()
        assert run.stats.events == 1  # the translation event, counted once
    sb3 = builtin.resolve(ENTROPY, "sb3")
    fields = _store_fields(tmp_path, "late")
    assert sb3.field not in fields  # never its metric at some steps and not at others
    steps, values = _series(tmp_path, "late", ENTROPY)
    assert steps == list(range(STEPS))
    assert values == pytest.approx([_entropy_logged(s) for s in steps])
    events = [
        e
        for e in EmbeddedHistory(tmp_path / "outbox.sqlite").events("late", 100)
        if e.kind == "translation"
    ]
    assert [e.step for e in events] == [told_at]
    assert ENTROPY in events[0].text and "framework='sb3'" in events[0].text


def test_a_run_going_on_keeps_the_decision_its_record_holds(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    # The first process logs a telling name (sb3 detected: negated); the one going on with the
    # run logs only the ambiguous name, which alone tells nothing: its record decides.
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("resumed", registry=builtin, settings=settings) as run:
        for step in range(10):
            run.log(step, {ENTROPY: _entropy_logged(step), TELLS: 1.0})
    with exporter.init("resumed", registry=builtin, settings=settings, resume=True) as run:
        assert run.name == "resumed"
        for step in range(10, 20):
            run.log(step, {ENTROPY: _entropy_logged(step)})
    sb3 = builtin.resolve(ENTROPY, "sb3")
    assert ENTROPY not in _store_fields(tmp_path, "resumed")
    steps, values = _series(tmp_path, "resumed", sb3.field)
    assert steps == list(range(20))
    assert values == pytest.approx([sb3.transform.apply(_entropy_logged(s)) for s in steps])
