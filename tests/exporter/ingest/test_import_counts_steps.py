"""`rlvitals import` says how many steps a run has: a step is counted once however many lines,
reads or files its values come in."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from rlvitals.cli import main


def _said_steps(logs: Path, store: Path) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["import", str(logs), "--store", str(store)]) == 0
    match = re.search(r"run 'r': ([\d,]+) steps, ([\d,]+) values", out.getvalue())
    assert match, out.getvalue()
    return int(match.group(1))


@pytest.mark.parametrize("lines_per_step", [1, 2, 3])
def test_a_step_whose_values_are_split_over_lines_is_one_step(
    tmp_path: Path, lines_per_step: int
) -> None:
    # trainers that log each scalar on its own line at the step (a JSONL writer called once per
    # name) give several records for one step
    names = ["train/approx_kl", "train/entropy_loss", "train/clip_fraction"]
    (tmp_path / "logs" / "r").mkdir(parents=True)
    with (tmp_path / "logs" / "r" / "progress.jsonl").open("w") as f:
        for step in range(0, 50, 5):
            for part in range(lines_per_step):
                chunk = names[part::lines_per_step]
                f.write(json.dumps({"step": step, **{n: 0.1 for n in chunk}}) + "\n")
    assert _said_steps(tmp_path / "logs", tmp_path / "store") == 10


def test_a_step_logged_again_after_others_is_counted_again(tmp_path: Path) -> None:
    # a resumed run re-printing steps logged them twice: the count is of steps read, as before
    (tmp_path / "logs" / "r").mkdir(parents=True)
    steps = [0, 1, 2, 3, 2, 3, 4]
    with (tmp_path / "logs" / "r" / "progress.jsonl").open("w") as f:
        for step in steps:
            f.write(json.dumps({"step": step, "train/approx_kl": 0.01}) + "\n")
    assert _said_steps(tmp_path / "logs", tmp_path / "store") == len(steps)
