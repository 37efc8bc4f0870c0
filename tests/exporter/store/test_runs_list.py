"""`rlvitals runs` lists the store's runs with the lifecycle's status; bad input is one line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import exporter
import registry
from exporter.lifecycle import Lifecycle
from exporter.store.runs_list import list_runs
from rlvitals.cli import main


def _store(tmp_path: Path, reg: registry.Registry) -> tuple[Path, exporter.Run]:
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    with exporter.init(
        "done", project="cartpole", registry=reg, settings=settings, framework="sb3"
    ) as run:
        run.log(2048, {"train/approx_kl": 0.01}, wall_time=time.time())
    live = exporter.init("live", registry=reg, settings=settings, framework="cleanrl", rank=0)
    live.log(512, {"losses/approx_kl": 0.02}, wall_time=time.time())
    assert live.flush()  # left running: a live run
    return tmp_path / "store", live


def test_runs_lists_name_project_framework_status_last_step_and_start(
    tmp_path: Path, reg: registry.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    store, live = _store(tmp_path, reg)
    assert main(["runs", "--store", str(store), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["done"]["status"] == "finished" and rows["done"]["project"] == "cartpole"
    assert rows["done"]["framework"] == "sb3" and rows["done"]["last_step"] == 2048
    assert rows["live"]["status"] == "live" and rows["live"]["last_step"] == 512
    assert rows["live"]["started"] == pytest.approx(time.time(), abs=60)
    assert main(["runs", "--store", str(store)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "RUN",
        "PROJECT",
        "FRAMEWORK",
        "STATUS",
        "LAST",
        "STEP",
        "STARTED",
        "(UTC)",
        "WHY",
    ]
    assert table[1].split()[:5] == ["done", "cartpole", "sb3", "finished", "2,048"]
    assert table[1].endswith("finish() called")  # what set the status
    assert table[2].split()[:5] == ["live", "-", "cleanrl", "live", "512"]
    live.finish()


def test_status_comes_from_the_one_lifecycle_definition(
    tmp_path: Path, reg: registry.Registry
) -> None:
    store, live = _store(tmp_path, reg)
    with exporter.Outbox(store / "outbox.sqlite") as box:
        later = time.time() + Lifecycle().stall_after_s + 1
        assert {r.name: r.status for r in list_runs(box, now=later)}["live"] == "stalled"
    live.finish()


def test_runs_on_an_empty_or_wrong_store_says_so_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--store", str(tmp_path / "nothing")]) == 0
    assert "no runs in" in capsys.readouterr().err
    assert main(["runs", "--store", str(tmp_path / "nothing"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["runs", "--store", str(afile)]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "Traceback" not in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "outbox.sqlite").write_text("not a database")
    assert main(["runs", "--store", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlvitals: error:") and "Traceback" not in err
