"""A name read as a metric by itself (registry/auto_map.py) is one decision for the run, made at
its first value and recorded (issue 35): logged live or imported from the log the loop wrote, the
same field; a first value the rules refuse keeps the name as logged for the whole run; a run going
on reads the decision from its record, not from its new first value; `--map NAME=` keeps it as
logged and is recorded with the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import exporter
import registry
from grafana.datasource.history.embedded import EmbeddedHistory
from rlvitals.cli import main

NAME = "mine/clipfrac"  # a CleanRL spelling of clip_fraction's leaf, under a project's prefix
OTHER = "mine/thing"  # nothing the registry spells


def _values(step: int) -> dict[str, float]:
    return {NAME: 0.1 + step / 1000, OTHER: float(step)}


def _jsonl_log(tmp_path: Path, steps: int) -> Path:
    """The run's folder holding the JSON Lines log a loop writes of `_values` (one line a step)."""
    logdir = tmp_path / "logs" / "run"
    logdir.mkdir(parents=True)
    with (logdir / "metrics.jsonl").open("w") as f:
        for step in range(steps):
            f.write(json.dumps({"step": step, **_values(step)}) + "\n")
    return logdir


def _history(store: Path) -> EmbeddedHistory:
    return EmbeddedHistory(store / "outbox.sqlite")


def _translation_events(store: Path, run: str) -> list[str]:
    events = _history(store).events(run, 10_000)
    return [e.text for e in events if e.kind == "translation"]


def test_logged_live_or_imported_the_name_is_stored_as_its_metric_with_one_event(
    tmp_path: Path, builtin: registry.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    live = tmp_path / "live"
    with exporter.init(
        "run", registry=builtin, settings=exporter.ExporterSettings(store=live)
    ) as r:
        for step in range(50):
            r.log(step, _values(step))
    logdir = _jsonl_log(tmp_path, 50)
    imported = tmp_path / "imported"
    assert main(["import", str(logdir), "--store", str(imported)]) == 0
    said = capsys.readouterr().out
    assert f"{NAME} as clip_fraction: read by name and value" in said
    for store in (live, imported):
        fields = dict(_history(store).logged_fields("run"))
        assert fields.get("clip_fraction") == builtin.metric("clip_fraction").group, fields
        assert NAME not in fields and fields.get(OTHER) == "unregistered"
        steps = _history(store).series("run", "clip_fraction", None, None, 1000).steps.tolist()
        assert steps == list(range(50))
        (event,) = _translation_events(store, "run")
        assert NAME in event and "clip_fraction" in event and f"--map {NAME}=" in event


def test_a_first_value_outside_the_limits_keeps_the_name_as_logged_for_the_whole_run(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    over = math.nextafter(builtin.metric("clip_fraction").limits.max or 1.0, math.inf)
    with exporter.init(
        "run", registry=builtin, settings=exporter.ExporterSettings(store=tmp_path)
    ) as r:
        r.log(0, {NAME: over})
        for step in range(1, 30):
            r.log(step, {NAME: 0.1})  # values that fit, after the decision
    fields = dict(_history(tmp_path).logged_fields("run"))
    assert fields.get(NAME) == "unregistered" and "clip_fraction" not in fields
    assert _translation_events(tmp_path, "run") == []


def test_a_run_going_on_keeps_its_recorded_decision(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("run", registry=builtin, settings=settings) as r:
        for step in range(10):
            r.log(step, {NAME: 0.1})
    # its first value this time would decide nothing (non-finite): the record decides
    with exporter.init("run", registry=builtin, settings=settings, resume=True) as r:
        r.log(10, {NAME: math.nan})
        for step in range(11, 20):
            r.log(step, {NAME: 0.2})
    fields = dict(_history(tmp_path).logged_fields("run"))
    assert NAME not in fields
    steps = _history(tmp_path).series("run", "clip_fraction", None, None, 1000).steps.tolist()
    assert steps == [*range(10), *range(11, 20)]


def test_map_name_equals_nothing_keeps_it_as_logged_and_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logdir = _jsonl_log(tmp_path, 20)
    store = tmp_path / "store"
    assert main(["import", str(logdir), "--store", str(store), "--map", f"{NAME}="]) == 0
    assert "read by name and value" not in capsys.readouterr().out
    fields = dict(_history(store).logged_fields("run"))
    assert fields.get(NAME) == "unregistered" and "clip_fraction" not in fields
    config = _history(store).run_config("run")
    assert config[registry.MAP_RECORD_KEY] == {NAME: None}


def test_past_the_bound_of_names_decided_a_new_name_stays_as_logged_every_time(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop logging a new name every step must not grow the run's decisions without bound:
    past it a new name is kept as logged, and asked again it gets the same answer."""
    from exporter.translate import auto_read

    monkeypatch.setattr(auto_read, "_DECIDED", 2)
    reading = auto_read.AutoReading(builtin, {})
    for name in ("a/thing", "b/thing"):
        assert reading.decide(name, lambda: 0.1, set) == (None, False)
    for _ in range(2):
        assert reading.decide(NAME, lambda: 0.1, set) == (None, False)
    # under the bound the same name would be read as its metric
    fresh = auto_read.AutoReading(builtin, {})
    found, new = fresh.decide(NAME, lambda: 0.1, set)
    assert found is not None and found.metric == "clip_fraction" and new
