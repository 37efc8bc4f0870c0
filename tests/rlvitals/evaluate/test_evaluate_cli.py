"""`rlvitals evaluate`: the table, JSON, the exit status against expected verdicts, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvitals.cli import main

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
EXPECTED = str(RUNS / "expected.yaml")


def test_evaluate_prints_the_table_and_exits_0_when_every_run_is_as_expected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [str(RUNS / "grpo_mu1_lr_dead"), str(RUNS / "sb3_ppo_cartpole_healthy")]
    assert main(["evaluate", *runs, "--expected", EXPECTED]) == 0
    out, err = capsys.readouterr()
    assert "| grpo_mu1_lr_dead | destabilised, dead at end | 3 entropy_collapse |" in out
    assert "2/2 runs as expected" in out
    assert "read as: TRL GRPO (μ=1)" in err


def test_evaluate_json_and_a_failing_expectation_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "expected.yaml"
    wrong.write_text("runs:\n  grpo_mu1_lr_dead: {verdict: healthy}\n")
    assert (
        main(["evaluate", str(RUNS / "grpo_mu1_lr_dead"), "--expected", str(wrong), "--json"]) == 1
    )
    (row,) = json.loads(capsys.readouterr().out)
    assert row["as_expected"] is False and row["flag_step"] == 4 and row["end"] == "critical"
    assert row["problems"] == ["healthy run flagged warning at step 4"]


def test_evaluate_rejects_a_folder_without_event_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no TensorBoard event files" in err and "Traceback" not in err
