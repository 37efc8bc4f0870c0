"""`rlvitals evaluate`: the table, JSON, the exit status against expected verdicts, bad input."""

from __future__ import annotations

import contextlib
import io
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


def test_evaluate_reads_a_trl_rloo_run_as_rloo(capsys: pytest.CaptureFixture[str]) -> None:
    """TRL 1.x logs RLOO and GRPO under the same names; only the trainer's args tell them
    apart (RLOOConfig's reward_clip_range)."""
    assert main(["evaluate", str(RUNS / "rloo_mu1_lr_dead"), "--expected", EXPECTED]) == 0
    err = capsys.readouterr().err
    assert "read as: TRL RLOO (μ=1)" in err and "GRPO" not in err


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


def test_evaluate_rejects_a_folder_without_training_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("nothing logged here\n")
    assert main(["evaluate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no training logs" in err and "Traceback" not in err


def test_evaluate_reads_every_format_import_reads(tmp_path: Path) -> None:
    """A JSON Lines run, a console log named alone, and a folder of them (issue 35: evaluate
    refused a folder of JSON Lines that import reads)."""
    jsonl = tmp_path / "runs" / "own-loop"
    jsonl.mkdir(parents=True)
    (jsonl / "metrics.jsonl").write_text(
        "".join(f'{{"step": {s}, "losses/approx_kl": 0.01}}\n' for s in range(1, 30))
    )
    console = tmp_path / "runs" / "verl-run"
    console.mkdir()
    (console / "train.log").write_text(
        "".join(f"step:{s} - actor/ppo_kl:0.001 - actor/entropy:0.5\n" for s in range(1, 30))
    )
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["evaluate", str(tmp_path / "runs"), "--json"]) == 0
    rows = {row["run"]: row for row in json.loads(buffer.getvalue())}
    assert set(rows) == {"own-loop", "verl-run"}
    assert all(row["end"] != "not read" for row in rows.values())
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["evaluate", str(console / "train.log"), "--json"]) == 0
    assert [row["run"] for row in json.loads(buffer.getvalue())] == ["train"]


def test_leave_one_family_out_needs_a_family_for_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = tmp_path / "expected.yaml"
    expected.write_text("runs:\n  grpo_mu1_lr_dead: {verdict: destabilised}\n")
    run = str(RUNS / "grpo_mu1_lr_dead")
    assert main(["evaluate", run, "--expected", str(expected), "--leave-one-family-out"]) == 2
    err = capsys.readouterr().err
    assert "needs --expected with a family: for every run" in err and "Traceback" not in err


def test_leave_one_family_out_prints_a_row_per_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = tmp_path / "expected.yaml"
    expected.write_text(
        "runs:\n"
        "  grpo_mu1_lr_dead: {verdict: destabilised, failure_step: 3, failure: entropy_collapse,"
        " dead_at_end: true, family: grpo}\n"
        "  sb3_ppo_cartpole_healthy: {verdict: healthy, family: ppo}\n"
    )
    runs = [str(RUNS / "grpo_mu1_lr_dead"), str(RUNS / "sb3_ppo_cartpole_healthy")]
    assert main(["evaluate", *runs, "--expected", str(expected), "--leave-one-family-out"]) == 0
    out = capsys.readouterr().out
    assert "| grpo | 1 | 1 | 1 | the defaults |" in out
    assert "| ppo | 1 | 1 | 1 | the defaults |" in out
    assert "leave one family out: 2/2 runs as expected" in out


def test_given_in_the_expected_file_maps_a_runs_own_tag_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """custom_ac runs log their own tag names; the corpus's expected file says what their user
    passes (`given: map:`), and evaluate reads them with it."""
    run = str(RUNS / "custom_ac_cartpole_lr_high")
    assert main(["evaluate", run, "--expected", EXPECTED]) == 0
    out = capsys.readouterr().out
    assert "7 of 7 logged names recognised" in out and "dead at end" in out
