"""A real TRL GRPO run's console output, as a job redirected to a file writes it (`> log 2>&1`:
tqdm's bars on stderr as they happen, the Trainer's dicts on stdout, flushed in bursts), reads
as the TensorBoard event file the same run wrote: the same steps, the same values to the four
significant digits transformers prints (docs/console-logs.md). The run is calibration/
grpo_tiny.py on a tiny model built on the spot (real TRL, real transformers, real tqdm)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exporter import Outbox
from rlvitals.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grpo")
    with open(out / "console.log", "wb") as log:
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "calibration" / "grpo_tiny.py"),
                "--out",
                str(out / "tb"),
                "--max-steps",
                "24",
                "--logging-steps",
                "3",
                "--learning-rate",
                "5e-4",
                "--progress-bar",  # the Trainer's default: tqdm's bar, logs by tqdm.write
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=600,
        )
    return out


def test_a_trl_console_log_reads_as_the_event_file_of_the_same_run(
    grpo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    assert main(["import", str(grpo_run / "tb"), "--run", "events"]) == 0
    # stdout and stderr in one file: the bar's clearings and redraws place the dicts
    assert main(["import", str(grpo_run / "console.log"), "--run", "console"]) == 0
    # stdout alone (the dicts, no bar): the Trainer prints no step, its user says the cadence
    stdout = tmp_path / "stdout.log"
    text = (grpo_run / "console.log").read_text()
    stdout.write_text("".join(line + "\n" for line in text.split("\n") if line.startswith("{'")))
    args = ["import", str(stdout), "--run", "stdout", "--set", "logging_steps=3"]
    assert main(args) == 0
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        for run in ("console", "stdout"):
            for field in ("raw_reward", "response_length_mean", "policy_entropy", "total_loss"):
                want_steps, want = box.series("events", field)
                got_steps, got = box.series(run, field)
                assert got_steps.tolist() == want_steps.tolist(), (run, field)
                assert len(want) == 8, field  # 24 steps logged every 3
                np.testing.assert_allclose(got, want, rtol=5e-4, atol=1e-12, err_msg=field)
            record = box.run(run)
            assert record is not None and record.framework == "trl" and record.state == "finished"
        assert box.run("console").config["step_source"] == "progress bar"  # type: ignore[union-attr]
        assert box.run("stdout").config["step_source"] == "logging order"  # type: ignore[union-attr]
