"""Each log format parsed line by line (or event by event) into step-keyed Records."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from logmakers import Sb3Csv, cleanrl_stdout, sb3_rows, write_event_file

from exporter.sources import (
    BadLine,
    BadPattern,
    JsonlParser,
    LineFileSource,
    Malformed,
    Record,
    RegexParser,
    Sb3CsvParser,
    TensorBoardSource,
)


def _read_all(source: LineFileSource | TensorBoardSource) -> list[Record]:
    return list(source.poll(final=True))


def test_jsonl_takes_the_first_known_step_key_and_skips_non_numbers() -> None:
    parser = JsonlParser()
    record = parser.parse('{"global_step": 7, "loss": 0.5, "tag": "x", "done": true, "ok": [1]}')
    assert record == Record(step=7, values={"loss": 0.5})


@pytest.mark.parametrize("key", ["step", "global_step", "_step", "training_step"])
def test_jsonl_knows_every_common_step_key(key: str) -> None:
    assert JsonlParser().parse(f'{{"{key}": 3, "kl": 1}}') == Record(3, {"kl": 1.0})


def test_jsonl_flattens_nested_objects_with_slashes_and_reads_wall_time() -> None:
    line = '{"training_iteration": 2, "_timestamp": 1700000000.5, "info": {"learner": {"kl": 0.1}}}'
    record = JsonlParser(step_key="training_iteration").parse(line)
    assert record == Record(2, {"info/learner/kl": 0.1}, wall_time=1700000000.5)


def test_jsonl_keeps_nan_for_the_run_to_count() -> None:
    record = JsonlParser().parse('{"step": 1, "loss": NaN}')
    assert record is not None and math.isnan(record.values["loss"])


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"loss": 1}', "no step key"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"step": -5, "x": 1}', "cannot be negative"),
        ('{"step": 1.5, "x": 1}', "not an integer"),
    ],
)
def test_jsonl_malformed_lines_say_why(line: str, reason: str) -> None:
    with pytest.raises(BadLine, match=reason):
        JsonlParser().parse(line)


def test_jsonl_file_reports_malformed_lines_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "a": 1}\n\nnot json\n{"step": 2, "a": 2}\n{"a": 3}\n')
    problems: list[Malformed] = []
    records = _read_all(LineFileSource(path, JsonlParser(), problems.append))
    assert [r.step for r in records] == [1, 2]
    assert [(p.line, str(p).split(": ")[0]) for p in problems] == [
        (3, f"{path}:3"),
        (5, f"{path}:5"),
    ]


def test_sb3_csv_reads_steps_from_total_timesteps_and_skips_empty_cells(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    writer = Sb3Csv(path)
    for row in sb3_rows(3):
        writer.write(row)
    writer.close()
    records = _read_all(LineFileSource(path, Sb3CsvParser(), _fail))
    assert [r.step for r in records] == [2048, 4096, 6144]
    assert "train/approx_kl" not in records[0].values
    assert records[1].values["train/approx_kl"] == pytest.approx(0.011)
    assert records[2].values["train/entropy_loss"] == pytest.approx(-0.67)
    assert "time/total_timesteps" not in records[0].values


def test_sb3_csv_without_step_column_is_reported_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    path.write_text("a,b\n1,2\n")
    problems: list[Malformed] = []
    records = _read_all(LineFileSource(path, Sb3CsvParser(), problems.append))
    assert records == []
    assert "time/total_timesteps" in problems[0].reason
    assert problems[0].line == 1


def test_regex_with_metric_named_groups_reads_cleanrl_stdout(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(cleanrl_stdout(3))
    parser = RegexParser(
        r"global_step=(?P<step>\d+), episodic_return=\[(?P<charts__episodic_return>[-\d.eE+]+)\]"
    )
    records = _read_all(LineFileSource(path, parser, _fail))
    assert records == [
        Record(128, {"charts/episodic_return": 10.0}),
        Record(256, {"charts/episodic_return": 11.0}),
        Record(384, {"charts/episodic_return": 12.0}),
    ]


def test_regex_with_name_and_value_groups() -> None:
    parser = RegexParser(r"step (?P<step>\d+) (?P<name>\S+)=(?P<value>\S+)")
    assert parser.parse("INFO step 5 train/approx_kl=0.02") == Record(5, {"train/approx_kl": 0.02})
    assert parser.parse("unrelated output") is None
    with pytest.raises(BadLine, match="not a number"):
        parser.parse("step 6 kl=oops")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(?P<step", "not a valid regular expression"),
        (r"(?P<reward>\d+)", "no named group 'step'"),
        (r"(?P<step>\d+) (?P<name>\w+)", "no 'value'"),
        (r"(?P<step>\d+)", "captures no metric"),
    ],
)
def test_bad_patterns_are_refused_with_a_reason(pattern: str, message: str) -> None:
    with pytest.raises(BadPattern, match=message):
        RegexParser(pattern)


def test_tensorboard_merges_the_events_of_one_step(tmp_path: Path) -> None:
    path = write_event_file(
        tmp_path, [(0, {"losses/approx_kl": 0.5, "losses/clipfrac": 0.25}), (128, {"x": 2.0})]
    )
    records = _read_all(TensorBoardSource(path, _fail))
    assert records == [
        Record(0, {"losses/approx_kl": 0.5, "losses/clipfrac": 0.25}, wall_time=1.7e9),
        Record(128, {"x": 2.0}, wall_time=1.7e9 + 128),
    ]


def test_tensorboard_reads_tf2_style_tensor_scalars(tmp_path: Path) -> None:
    path = write_event_file(tmp_path, [(3, {"reward": 1.5})], tensor_style=True)
    assert [(r.step, r.values) for r in _read_all(TensorBoardSource(path, _fail))] == [
        (3, {"reward": 1.5})
    ]


def test_tensorboard_cut_off_tail_is_reported_on_import(tmp_path: Path) -> None:
    path = write_event_file(tmp_path, [(1, {"a": 1.0}), (2, {"a": 2.0})])
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    problems: list[Malformed] = []
    records = _read_all(TensorBoardSource(path, problems.append))
    assert [r.step for r in records] == [1]
    assert len(problems) == 1 and "cut off" in problems[0].reason


def _fail(problem: Malformed) -> None:
    raise AssertionError(f"unexpected problem: {problem}")


def test_tensorboard_tag_written_again_at_one_step_keeps_every_value(tmp_path: Path) -> None:
    # what CleanRL writes when three envs finish an episode at the same global step
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step, tag, value in [
        (512, "charts/episodic_return", 9.0),
        (512, "charts/episodic_return", 11.0),
        (512, "charts/episodic_length", 30.0),
        (512, "charts/episodic_return", 16.0),
        (1024, "charts/episodic_return", 5.0),
    ]:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=1.7e9, step=step, summary=summary))
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    records = _read_all(TensorBoardSource(path, lambda m: None))
    assert [(r.step, dict(r.values)) for r in records] == [
        (512, {"charts/episodic_return": [9.0, 11.0, 16.0], "charts/episodic_length": 30.0}),
        (1024, {"charts/episodic_return": 5.0}),
    ]
