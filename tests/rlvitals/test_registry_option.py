"""`--registry PATH` on every command that reads the registry (docs/registry.md "Extending it"): a user
file extends the built-in registry, a folder replaces it, and a bad file is named (exit 2 or 1,
never a traceback). A user metric imported with it is stored under its id and served with its
title and unit; made core, the report draws it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import registry
from grafana.datasource import DatasourceConfig, create_app
from rlvitals.cli import main

ROOT = Path(__file__).resolve().parents[2]
MINI = str(ROOT / "tests" / "fixtures" / "mini_registry")
RUNS = ROOT / "tests" / "fixtures" / "runs"

USER = """\
metrics:
  - id: goal_distance
    title: Distance to goal
    unit: none
    core: {core}
    aliases: {{sb3: custom/goal_distance}}
"""


def _user_file(tmp_path: Path, core: bool = False) -> Path:
    path = tmp_path / "my_metrics.yaml"
    path.write_text(USER.format(core=str(core).lower()))
    return path


def _broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text("metrics:\n  - {id: a_metric, title: A}\n")  # no unit
    return path


def _logs(tmp_path: Path) -> Path:
    run = tmp_path / "logs" / "goal"
    run.mkdir(parents=True)
    lines = [
        {"step": s, "custom/goal_distance": 1.0 / s, "time/iterations": s, "time/fps": 900.0}
        for s in range(1, 21)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run.parent


def _fields(store: Path, reg: registry.Registry, run: str) -> dict[str, dict[str, object]]:
    client = create_app(DatasourceConfig(store=store), reg).test_client()
    body = client.get(f"/api/fields?run={run}&lang=en").get_json()
    return {row["field"]: row for row in body["fields"]}


@pytest.mark.parametrize("command", ["import", "tail"])
def test_a_user_metric_logged_under_its_alias_is_stored_under_its_id_with_its_title(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _user_file(tmp_path)
    store = tmp_path / "store"
    more = ["--no-follow"] if command == "tail" else []
    args = [command, str(_logs(tmp_path)), "--registry", str(mine), "--store", str(store)]
    assert main([*args, *more]) == 0
    err = capsys.readouterr().err
    assert "custom/goal_distance" not in err  # a known alias: no warning
    assert "time/iterations" not in err  # SB3 bookkeeping: kept without a warning
    fields = _fields(store, registry.load(extensions=[mine]), "goal")
    row = fields["goal_distance"]
    assert (row["title"], row["unit"], row["measurement"]) == ("Distance to goal", "none", "user")
    assert "custom/goal_distance" not in fields
    assert fields["time/iterations"]["measurement"] == "unregistered"  # stored as logged


def test_validate_and_doctor_count_the_user_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = str(_user_file(tmp_path))
    assert main(["validate", "--registry", MINI]) == 0
    base = capsys.readouterr().out
    assert main(["validate", "--registry", MINI, "--registry", mine]) == 0
    assert main(["validate", "--registry-dir", MINI, mine]) == 0  # the older spelling
    out = capsys.readouterr().out.splitlines()
    count = int(base.split(": ")[1].split()[0])
    assert out == [out[0], out[0]] and out[0].startswith(f"registry OK: {count + 1} metrics")
    main(["doctor", "--registry", MINI, "--registry", mine])
    assert f"[ok ] registry: {count + 1} metrics" in capsys.readouterr().out


def test_two_folders_are_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--registry", MINI, "--registry", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert MINI in out and str(tmp_path) in out and "one folder" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["import", "LOGS", "--store", "STORE"],
        ["tail", "LOGS", "--no-follow", "--store", "STORE"],
        ["evaluate", str(RUNS / "grpo_mu1_lr_dead")],
        ["report", "--run", "goal", "--store", "STORE"],
        ["demo", "--scenario", "nan_loss", "--steps", "100", "--no-report", "--store", "STORE"],
    ],
    ids=lambda a: a[0],
)
def test_each_command_reads_the_file_it_is_given_and_names_its_problem(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _broken(tmp_path)
    where = {"LOGS": str(tmp_path), "STORE": str(tmp_path / "store")}
    code = main([*(where.get(a, a) for a in argv), "--registry", str(broken)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(broken) in err and "'unit' is a required property" in err
    assert "Traceback" not in err


def test_report_draws_a_core_user_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = str(_user_file(tmp_path, core=True))
    store = str(tmp_path / "store")
    assert main(["import", str(_logs(tmp_path)), "--registry", mine, "--store", store]) == 0
    out = tmp_path / "report.html"
    args = ["report", "--run", "goal", "--store", store, "--out", str(out), "--lang", "en"]
    assert main([*args, "--registry", mine]) == 0
    assert "Distance to goal" in out.read_text(encoding="utf-8")
    assert main([*args]) == 0  # the built-in registry alone does not know it
    assert "Distance to goal" not in out.read_text(encoding="utf-8")
