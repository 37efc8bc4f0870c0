"""`rlvitals runs delete` with InfluxDB configured drops the run's points from every measurement
of a real InfluxDB (metrics, run config, events, rollups and their marker) and keeps the other
runs' points; an InfluxDB that does not answer leaves the store as it was (exit 1); `rename` is
refused with the reason (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from influx_server import refused_port

import exporter
import registry
from exporter.schema import ROLLUP_LEVELS, ROLLUP_MARKER, rollup_measurement
from exporter.store.outbox import Outbox
from rlvitals.cli import main


def _measurements_of(influx: Any, run: str) -> set[str]:
    """The measurements holding series of `run`, read from the server's series index."""
    body = influx.raw_query(f"SHOW SERIES WHERE \"run\" = '{run}'")
    keys = [v[0] for r in body["results"] for s in r.get("series", []) for v in s["values"]]
    return {str(k).split(",", 1)[0] for k in keys}


def _points(influx: Any, measurement: str, run: str) -> int:
    rows = influx.query(f'SELECT * FROM "{measurement}" WHERE "run" = \'{run}\'')
    return len(rows)


@pytest.fixture
def two_runs(tmp_path: Path, reg: registry.Registry, influx: Any) -> Path:
    store = tmp_path / "store"
    for name in ("gone", "kept"):
        settings = influx.settings(store)
        with exporter.init(name, registry=reg, settings=settings, config={"lr": 3e-4}) as run:
            for step in range(1200):
                run.log(step, {"policy_kl": 0.01 * (step % 7), "clip_fraction": step / 1200})
            run.event(100, "checkpoint", "saved")
    return store


def test_delete_drops_the_runs_points_in_every_measurement_and_keeps_the_others(
    two_runs: Path, influx: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    before = _measurements_of(influx, "gone")
    # the run has points in each kind of measurement rlvitals writes
    assert {ROLLUP_MARKER, rollup_measurement(ROLLUP_LEVELS[0]), "run_config", "events"} <= before
    kept = {m: _points(influx, m, "kept") for m in _measurements_of(influx, "kept")}
    assert before == set(kept)
    monkeypatch.setenv("RLVITALS_INFLUX_URL", influx.url)
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", influx.name)
    assert main(["runs", "delete", "gone", "--yes", "--store", str(two_runs)]) == 0
    assert "deleted run 'gone' and from InfluxDB" in capsys.readouterr().out
    assert _measurements_of(influx, "gone") == set()
    assert all(_points(influx, m, "gone") == 0 for m in before)
    assert {m: _points(influx, m, "kept") for m in kept} == kept
    with Outbox(two_runs / "outbox.sqlite") as box:
        assert [r.run for r in box.runs()] == ["kept"]


@pytest.fixture
def two_stored(tmp_path: Path) -> Path:
    """Two runs in the store only (what InfluxDB holds does not matter to the refusals)."""
    store = tmp_path / "store"
    with Outbox(store / "outbox.sqlite") as box:
        box.claim_run("gone")
        box.claim_run("kept")
    return store


def test_an_influxdb_that_does_not_answer_leaves_the_store_as_it_was(
    two_stored: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    two_runs = two_stored
    monkeypatch.setenv("RLVITALS_FLUSH_TIMEOUT", "2")
    with refused_port() as port:
        monkeypatch.setenv("RLVITALS_INFLUX_URL", f"http://127.0.0.1:{port}")
        assert main(["runs", "delete", "gone", "--yes", "--store", str(two_runs)]) == 1
    err = capsys.readouterr().err
    assert "unreachable" in err and "left in the store as it was" in err
    with Outbox(two_runs / "outbox.sqlite") as box:
        assert {r.run for r in box.runs()} == {"gone", "kept"}


def test_rename_with_influxdb_is_refused_saying_why(
    two_stored: Path, influx: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    two_runs = two_stored
    monkeypatch.setenv("RLVITALS_INFLUX_URL", influx.url)
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", influx.name)
    assert main(["runs", "rename", "gone", "new", "--store", str(two_runs)]) == 2
    assert "InfluxDB cannot change a tag value" in capsys.readouterr().err
    with Outbox(two_runs / "outbox.sqlite") as box:
        assert {r.run for r in box.runs()} == {"gone", "kept"}
