"""A line InfluxDB refuses (HTTP 400) never takes its neighbours with it: the batch is split until
the refused line is alone, that line is kept with the server's message, the rest is written."""

from __future__ import annotations

import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry
from rlvitals.cli import main

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")


def _write(influx: Any, line: str) -> None:
    url = f"{influx.url}/write?db={influx.name}&precision=s"
    with urllib.request.urlopen(urllib.request.Request(url, data=line.encode())) as r:
        assert r.status == 204


def test_an_event_field_changing_type_is_isolated_and_everything_else_is_written(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    # an earlier run wrote `note` as a string: a float `note` is now a field type conflict
    _write(influx, 'events,kind=checkpoint,run=earlier note="first",text="",step=1i 1')
    settings = influx.settings(tmp_path, policy="warn")
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(100):
            run.log(step, {"losses/clipfrac": 0.25})
        run.event(3, "checkpoint", text="saved", note=2.0)
        run.event(4, "lr_drop", text="lr halved")
        assert run.flush()
        stats = run.stats
    points = influx.query('SELECT "clip_fraction" FROM "policy" WHERE "run" = \'r\'')
    assert [p["time"] for p in points] == list(range(100))
    kinds = influx.query('SELECT "text", "kind" FROM "events" WHERE "run" = \'r\'')
    assert [(e["time"], e["kind"]) for e in kinds] == [(4, "lr_drop")]
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        (refused,) = box.rejected("r")
        assert box.backlog() == 0
    assert "note=2" in refused[1] and "field type conflict" in refused[2]
    assert stats.server_rejected == 1
    db = sqlite3.connect(tmp_path / "outbox.sqlite")
    (rows,) = db.execute(
        "SELECT (SELECT count(*) FROM samples) + (SELECT count(*) FROM events)"
    ).fetchone()
    assert stats.sent == rows - 1
    assert db.execute("SELECT count(*) FROM samples WHERE sent = 2").fetchone() == (0,)
    assert db.execute("SELECT kind FROM events WHERE sent = 2").fetchall() == [("checkpoint",)]


def test_a_user_event_field_named_from_step_is_refused_at_the_call_site(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with (
        exporter.init("r", registry=reg, settings=settings, policy="strict") as run,
        pytest.raises(exporter.InvalidSample, match="from_step"),
    ):
        run.event(2, "note", from_step=1)


def test_a_direct_import_writes_every_line_but_the_one_influxdb_refuses(
    tmp_path: Path, influx: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RLVITALS_INFLUX_URL", influx.url)
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", influx.name)
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("RLVITALS_POLICY", "warn")
    _write(influx, 'unregistered,run=earlier my_thing="text" 50')
    log = tmp_path / "logs" / "run1" / "m.jsonl"
    log.parent.mkdir(parents=True)
    lines = [f'{{"step": {s}, "losses/clipfrac": 0.25}}' for s in range(100)]
    lines[50] = '{"step": 50, "losses/clipfrac": 0.25, "my_thing": 1.0}'
    log.write_text("\n".join(lines) + "\n")
    code = main(["import", str(log.parent), "--registry", MINI, "--framework", "cleanrl"])
    out, err = capsys.readouterr()
    points = influx.query('SELECT "clip_fraction" FROM "policy" WHERE "run" = \'run1\'')
    assert [p["time"] for p in points] == list(range(100))
    with exporter.Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        (refused,) = box.rejected("run1")
    assert "my_thing=1" in refused[1] and "field type conflict" in refused[2]
    assert "refused by InfluxDB 1" in out
    assert code == 1 and "not stored" in err
