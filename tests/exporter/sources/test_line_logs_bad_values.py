"""JSON Lines, SB3's progress.csv and trainer_state.json with values an adversarial read found
crashing the import or vanishing without a word: each is now stored, or named with its file and
line, and the import never ends in a traceback (the promise: nothing lost, nothing uncounted)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals.cli import main


def _import(
    path: Path, store: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    rc = main(["import", str(path), "--store", str(store), *args])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    return rc, text


def _counts(text: str) -> dict[str, int]:
    """The summary's counts: stored, non-finite... (what the user reads after an import)."""
    return {k: int(v.replace(",", "")) for v, k in re.findall(r"([\d,]+) (stored|steps)", text)} | {
        k: int(v) for k, v in re.findall(r"(stored|non-finite) (\d+)", text)
    }


def _jsonl(tmp_path: Path, lines: list[str], name: str = "run") -> Path:
    folder = tmp_path / "logs" / name
    folder.mkdir(parents=True)
    (folder / "log.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return tmp_path / "logs"


def test_jsonl_numbers_past_a_floats_range_or_the_parse_limit_are_named_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _jsonl(
        tmp_path,
        [
            '{"step": 1, "loss": 0.5}',
            '{"step": 2, "loss": 1' + "0" * 400 + "}",  # past a float: as far out as infinity
            '{"step": 3, "loss": 1' + "0" * 5000 + "}",  # past Python's 4,300-digit limit
            '{"step": 4, "loss": 0.25}',
        ],
    )
    rc, text = _import(logs, tmp_path / "store", capsys)
    assert rc == 0
    assert re.search(r"log\.jsonl:3: not readable JSON \(Exceeds the limit \(4300 digits\)", text)
    counts = _counts(text)
    assert counts["stored"] == 2 and counts["non-finite"] == 1  # the infinite one counted


def test_jsonl_values_that_are_not_numbers_are_named_once_per_key_and_the_rest_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _jsonl(
        tmp_path,
        [
            '\ufeff{"step": 1, "loss": 0.5, "phase": "train", "done": true, "hist": [1, 2]}',
            '{"step": 2, "loss": 0.4, "phase": "train", "done": false, "kl": null}',
            '{"step": 3, "loss": 0.3, "phase": "eval"}',
        ],
    )
    rc, text = _import(logs, tmp_path / "store", capsys)
    assert rc == 0
    assert text.count("'phase' holds text ('train'), not a number: not stored") == 1
    assert "'phase' holds text ('eval')" not in text  # once per key, not per line
    assert "log.jsonl:1: 'done' holds a boolean (true), not a number" in text
    assert "log.jsonl:1: 'hist' holds a list, not a number" in text
    assert "log.jsonl:2: 'kl' holds null, not a number" in text
    # the byte order mark before the first line does not cost that line
    assert _counts(text)["stored"] == 3
    # every line was read (its loss stored): none is a line skipped, each value is named
    assert "malformed line" not in text and "rlvitals: skipped" not in text
    assert "rlvitals: not stored: " in text
    assert "4 problem(s) with values in lines otherwise read" in text


def test_jsonl_a_wall_time_that_is_not_a_time_is_named_and_its_step_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _jsonl(
        tmp_path,
        [
            '{"step": 1, "loss": 0.5, "wall_time": 1700000000.0}',
            '{"step": 2, "loss": 0.4, "wall_time": NaN}',
            '{"step": 3, "loss": 0.3, "wall_time": Infinity}',
        ],
    )
    store = tmp_path / "store"
    rc, text = _import(logs, store, capsys)
    assert rc == 0
    # a warning: the step was stored, so it is not a line skipped nor counted as malformed
    assert (
        "warning: " + str(logs / "run" / "log.jsonl") + ":2: 'wall_time' is nan, not a time" in text
    )
    assert "skipped" not in text and "malformed" not in text
    assert _counts(text)["stored"] == 3
    # and nothing waits for a re-run: the same command again stores nothing new, loses nothing
    rc, again = _import(logs, store, capsys)
    assert rc == 0 and "Error" not in again


def test_jsonl_a_name_both_nested_and_flat_in_one_line_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _jsonl(tmp_path, ['{"step": 1, "a/b": 1.0, "a": {"b": 2.0}}'])
    rc, text = _import(logs, tmp_path / "store", capsys)
    assert rc == 0
    assert "log.jsonl:1: 'a/b' is in the line twice (nested and as a flat key)" in text


def test_a_run_name_that_cannot_be_stored_is_refused_with_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _jsonl(tmp_path, ['{"step": 1, "loss": 0.5}'], name="run\ntwo")
    rc, text = _import(logs, tmp_path / "store", capsys)
    assert rc == 2
    assert "run name 'run\\ntwo' holds a newline or NUL" in text


def _csv(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "logs" / "run"
    folder.mkdir(parents=True)
    (folder / "progress.csv").write_text(text, encoding="utf-8")
    return folder / "progress.csv"


def test_sb3_csv_cells_that_are_not_numbers_are_named_once_per_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(
        tmp_path,
        "time/total_timesteps,train/loss,train/approx_kl\n"
        "100,abc,0.01\n"
        "200,0.5,0.02\n"
        "300,def,True\n",
    )
    rc, text = _import(path, tmp_path / "store", capsys)
    assert rc == 0
    assert "progress.csv:2: column 'train/loss' holds 'abc', not a number: not stored" in text
    assert "'def'" not in text  # the column was named already
    assert "progress.csv:4: column 'train/approx_kl' holds 'True'" in text
    assert _counts(text)["stored"] == 3  # 0.01, 0.5 and 0.02
    assert "malformed line" not in text  # every row was read; two values were not stored


def test_sb3_csv_a_column_named_twice_and_a_byte_order_mark_are_handled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path, "\ufefftime/total_timesteps,train/loss,train/loss\n100,0.5,0.7\n")
    # found in its folder by its header, as without the mark (no --format needed)
    rc, text = _import(path.parent.parent, tmp_path / "store", capsys)
    assert rc == 0
    assert "column(s) 'train/loss' named twice in the header: a row's later cell is kept" in text
    assert _counts(text)["stored"] == 1


def _state(tmp_path: Path, history: list[dict[str, object]], raw: str | None = None) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    text = raw if raw is not None else json.dumps({"global_step": 3, "log_history": history})
    (folder / "trainer_state.json").write_text(text, encoding="utf-8")
    return folder / "trainer_state.json"


def test_trainer_state_entries_that_go_back_are_named_not_dropped_unsaid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a second `train()` appending to the same history: steps 1, 2 come again with other values
    history = [
        {"step": s, "loss": v} for s, v in [(1, 0.9), (2, 0.8), (3, 0.7), (1, 0.15), (2, 0.1)]
    ]
    path = _state(tmp_path, history)
    rc, text = _import(path, tmp_path / "store", capsys)
    assert rc == 0
    assert "trainer_state.json:4: log_history entry 4 goes back to step 1 after step 3" in text
    assert "trainer_state.json:5: log_history entry 5 goes back to step 2 after step 3" in text
    assert _counts(text)["stored"] == 3  # the first training's values are kept, not overwritten


def test_trainer_state_steps_and_values_past_what_can_be_stored_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = [
        {"step": 1, "loss": 0.5},
        {"step": 10**30, "loss": 0.4},
        {"step": 2, "loss": 10**400},
    ]
    path = _state(
        tmp_path, [], raw="\ufeff" + json.dumps({"global_step": 2, "log_history": history})
    )
    rc, text = _import(path, tmp_path / "store", capsys)
    assert rc == 0
    assert f"log_history entry 2 has step {10**30}, beyond the largest storable step" in text
    counts = _counts(text)
    assert counts["stored"] == 1 and counts["non-finite"] == 1


def test_values_near_a_floats_limit_are_stored_without_a_numpy_warning(tmp_path: Path) -> None:
    # enough steps for the columnar path, whose running sums of squares overflow to infinity
    lines = [f'{{"step": {s}, "loss": {"1e308" if s % 2 else "-1e308"}}}' for s in range(1, 60)]
    logs = _jsonl(tmp_path, lines)
    done = subprocess.run(
        [sys.executable, "-m", "rlvitals", "import", str(logs), "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "stored 59" in done.stdout + done.stderr
    # the statistics then say infinity, which is what they are; numpy's "overflow encountered"
    # on the user's terminal said nothing they could act on
    assert "RuntimeWarning" not in done.stderr


def test_a_csv_whose_step_column_is_named_by_step_key_is_found_in_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/logs.md: "a JSONL or CSV log whose step is not under a usual key is read with
    # --step-key KEY"; a folder search said "no logs found" for such a CSV
    path = _csv(tmp_path, "step,train/loss\n100,0.5\n200,0.4\n")
    rc, text = _import(path.parent.parent, tmp_path / "store", capsys, "--step-key", "step")
    assert rc == 0
    assert _counts(text)["stored"] == 2
