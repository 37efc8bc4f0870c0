"""Bad log files: each gives a message naming the file and line or byte, everything valid in it
is imported, nothing hangs and no traceback is printed."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from logmakers import write_event_file

import exporter

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")


def _import(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(RLVITALS_STORE=str(store), RLVITALS_POLICY="warn")
    cmd = [sys.executable, "-m", "rlvitals", "import", *args, "--registry", MINI]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _steps(store: Path, run: str, field: str = "clip_fraction") -> list[int]:
    with exporter.Outbox(store / "outbox.sqlite") as box:
        steps, _ = box.series(run, field)
    return [int(s) for s in steps]


def _jsonl_lines(steps: range) -> list[str]:
    return [f'{{"step": {s}, "losses/clipfrac": 0.25}}' for s in steps]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        ('{"step": 1e30, "losses/clipfrac": 0.5}', "beyond the largest storable step"),
        ('{"step": 12345678901234567890123, "losses/clipfrac": 0.5}', "beyond the largest"),
        ('{"step": 3, "losses/clipfrac": 0.5, "bad\\udc80key": 1}', None),
    ],
    ids=["deep-array", "deep-object", "step-1e30", "step-23-digits", "surrogate-key"],
)
def test_a_bad_jsonl_line_is_reported_with_file_and_line_and_the_rest_is_imported(
    tmp_path: Path, bad: str, reason: str | None
) -> None:
    log = tmp_path / "logs" / "run1" / "m.jsonl"
    log.parent.mkdir(parents=True)
    lines = _jsonl_lines(range(10))
    lines.insert(3, bad)
    log.write_text("\n".join(lines) + "\n")
    done = _import(tmp_path / "store", str(log.parent), "--framework", "cleanrl")
    assert done.returncode == 0, done.stderr
    if reason is not None:
        assert f"{log}:4: " in done.stderr and reason in done.stderr
    assert _steps(tmp_path / "store", "run1") == list(range(10))


def test_a_20_digit_sb3_step_is_reported_and_the_other_rows_are_imported(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "PPO_1" / "progress.csv"
    log.parent.mkdir(parents=True)
    rows = ["time/total_timesteps,train/clip_fraction"]
    rows += [f"{s},0.25" for s in range(1, 6)]
    rows.insert(3, "12345678901234567890,0.5")
    log.write_text("\n".join(rows) + "\n")
    done = _import(tmp_path / "store", str(log.parent), "--framework", "sb3")
    assert done.returncode == 0, done.stderr
    assert f"{log}:4: " in done.stderr and "beyond the largest storable step" in done.stderr
    assert _steps(tmp_path / "store", "PPO_1") == [1, 2, 3, 4, 5]


def test_a_fifo_in_a_log_tree_is_skipped_instead_of_hanging_the_import(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "run1"
    logs.mkdir(parents=True)
    (logs / "m.jsonl").write_text("\n".join(_jsonl_lines(range(5))) + "\n")
    os.mkfifo(logs / "stream.jsonl")
    os.mkfifo(logs / "metrics.json")
    done = _import(tmp_path / "store", str(tmp_path / "logs"), "--framework", "cleanrl")
    assert done.returncode == 0, done.stderr
    assert _steps(tmp_path / "store", "run1") == list(range(5))
    named = _import(tmp_path / "store", str(logs / "stream.jsonl"))
    assert named.returncode == 2 and "not a regular file" in named.stderr


def test_a_folder_name_that_is_not_utf8_still_names_a_run(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    folder = os.fsdecode(b"run-\xff\xfe")
    (logs / folder).mkdir(parents=True)
    (logs / folder / "m.jsonl").write_text("\n".join(_jsonl_lines(range(5))) + "\n")
    done = _import(tmp_path / "store", str(logs), "--framework", "cleanrl")
    assert done.returncode == 0, done.stderr
    assert _steps(tmp_path / "store", "run-\\xff\\xfe") == list(range(5))


def _record_offsets(data: bytes) -> list[int]:
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 12 + length + 4
    return offsets


@pytest.mark.parametrize("damage", ["payload", "length", "both"])
def test_a_corrupt_tensorboard_record_loses_only_itself(tmp_path: Path, damage: str) -> None:
    run = tmp_path / "logs" / "run1"
    path = write_event_file(run, [(s, {"losses/clipfrac": 0.25}) for s in range(50)])
    data = bytearray(path.read_bytes())
    offsets = _record_offsets(bytes(data))
    lost = []
    # record 0 is the file-version event, so record k + 1 carries step k
    if damage in ("payload", "both"):
        data[offsets[21] + 14] ^= 0xFF
        lost.append(20)
    if damage in ("length", "both"):
        data[offsets[31] + 2] ^= 0x40
        lost.append(30)
    path.write_bytes(bytes(data))
    done = _import(tmp_path / "store", str(tmp_path / "logs"), "--framework", "cleanrl")
    assert done.returncode == 0, done.stderr
    assert f"{path}:" in done.stderr and "corrupt event record at byte" in done.stderr
    assert _steps(tmp_path / "store", "run1") == [s for s in range(50) if s not in lost]
