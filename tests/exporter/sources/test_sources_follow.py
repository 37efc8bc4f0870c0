"""Following logs as they grow: rotation, truncation, SB3's header rewrite, new event files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from logmakers import Sb3Csv, sb3_rows, write_event_file

from exporter.sources import (
    LogFile,
    LogSet,
    Malformed,
    Record,
    UnreadableLog,
    detect_format,
    discover,
)


def _steps(logs: LogSet, *, final: bool = False) -> list[int]:
    return [r.step for _, records in logs.poll(final=final) for r in records]


def _records(logs: LogSet) -> list[Record]:
    return [r for _, records in logs.poll() for r in records]


def _append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def test_following_reads_only_complete_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "a": 1}\n{"step": 2, "a"')
    logs = LogSet([tmp_path], _fail)
    assert _steps(logs) == [1]
    _append(path, ': 2}\n{"step": 3, "a": 3}\n')
    assert _steps(logs) == [2, 3]
    assert _steps(logs) == []
    logs.close()


def test_following_survives_rotation_by_rename(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "a": 1}\n')
    logs = LogSet([tmp_path], _fail)
    assert _steps(logs) == [1]
    _append(path, '{"step": 2, "a": 2}\n')  # written just before rotation, not yet read
    os.rename(path, tmp_path / "m.jsonl.1")
    path.write_text('{"step": 3, "a": 3}\n')
    assert _steps(logs) == [2, 3]
    _append(path, '{"step": 4, "a": 4}\n')
    assert _steps(logs) == [4]
    assert [log.path.name for log in logs.files] == ["m.jsonl"]
    logs.close()


def test_following_survives_truncation(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "a": 1}\n{"step": 2, "a": 2}\n')
    logs = LogSet([tmp_path], _fail)
    assert _steps(logs) == [1, 2]
    path.write_text('{"step": 3, "a": 3}\n')  # truncated and rewritten shorter
    assert _steps(logs) == [3]
    logs.close()


def test_following_sb3_csv_across_header_rewrite_reads_each_row_once(tmp_path: Path) -> None:
    writer = Sb3Csv(tmp_path / "progress.csv")
    rows = sb3_rows(4)
    writer.write(rows[0])
    logs = LogSet([tmp_path], _fail)
    first = _records(logs)
    for row in rows[1:]:  # the second row adds train/ keys: SB3 rewrites the header in place
        writer.write(row)
    rest = _records(logs)
    writer.close()
    assert [r.step for r in first + rest] == [2048, 4096, 6144, 8192]
    assert rest[0].values["train/approx_kl"] == pytest.approx(0.011)
    logs.close()


def test_following_picks_up_a_new_event_file_in_the_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "PPO_1"
    write_event_file(run, [(s, {"train/approx_kl": 0.1}) for s in (100, 200)])
    logs = LogSet([tmp_path], _fail)
    assert _steps(logs) == [100, 200]
    # SB3 resumed from a checkpoint opens a second event file in the same folder
    write_event_file(run, [(s, {"train/approx_kl": 0.2}) for s in (200, 300)], wall_time=1.8e9)
    assert _steps(logs) == [200, 300]
    assert len(logs.files) == 2
    logs.close()


def test_following_reads_events_appended_to_an_open_event_file(tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    logs = LogSet([tmp_path], _fail)
    seen: list[int] = []
    for step in range(1, 6):  # bounded: five writes, five polls
        summary = Summary(value=[Summary.Value(tag="kl", simple_value=float(step))])
        writer.add_event(Event(wall_time=1.0, step=step, summary=summary))
        writer.flush()
        seen += _steps(logs)
    writer.close()
    seen += _steps(logs)
    assert seen == [1, 2, 3, 4, 5]
    logs.close()


def test_discover_searches_directories_and_detects_formats(tmp_path: Path) -> None:
    write_event_file(tmp_path / "runs" / "cleanrl_run", [(1, {"a": 1.0})])
    (tmp_path / "sb3").mkdir()
    (tmp_path / "sb3" / "progress.csv").write_text("time/fps,time/total_timesteps\n1,2\n")
    (tmp_path / "other.csv").write_text("a,b\n")
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "log.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "trl" / "log.jsonl.1").write_text('{"step": 1}\n')
    (tmp_path / "train.log").write_text("x\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.jsonl").write_text("{}\n")
    found = {(f.path.relative_to(tmp_path).parts[0], f.format, f.run) for f in discover([tmp_path])}
    assert found == {
        ("runs", "tensorboard", "cleanrl_run"),
        ("sb3", "sb3-csv", "sb3"),
        ("trl", "jsonl", "trl"),
    }
    with_pattern = discover([tmp_path], pattern=r"(?P<step>\d+) (?P<a>\d+)")
    assert LogFile(tmp_path / "train.log", "regex") in with_pattern


def test_detect_format_reads_the_first_line_of_ambiguous_names(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"step": 1}\n')
    (tmp_path / "b.json").write_text('[{"step": 1}]\n')
    assert detect_format(tmp_path / "a.json") == "jsonl"
    assert detect_format(tmp_path / "b.json") is None


def test_discover_refuses_missing_paths_and_unknown_files(tmp_path: Path) -> None:
    with pytest.raises(UnreadableLog, match="no such file"):
        discover([tmp_path / "nope"])
    (tmp_path / "data.bin").write_bytes(b"\x00\x01")
    with pytest.raises(UnreadableLog, match="--format"):
        discover([tmp_path / "data.bin"])


def _fail(problem: Malformed) -> None:
    raise AssertionError(f"unexpected problem: {problem}")
