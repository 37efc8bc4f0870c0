"""Bad input inside other trackers' runs (an MLflow file store, a W&B offline run log): each
problem is said naming the file (and line, row or byte) and what is wrong with it, the rest of
the run is imported, no FIFO hangs the import and no traceback reaches the user. The runs are
built by hand, byte for byte as MLflow's file store and W&B's transaction log lay them out."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable
from pathlib import Path

import pytest

import exporter
from exporter.sources.leveldb_log import RecordLog

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")
T = 1_700_000_000_000  # ms since the epoch, as MLflow writes a point's time
RUN_META = (
    "artifact_uri: x\nend_time: 2\nentry_point_name: ''\nexperiment_id: '1'\n"
    "lifecycle_stage: active\nrun_id: {rid}\nrun_name: r\nsource_name: ''\nsource_type: 4\n"
    "source_version: ''\nstart_time: 1700000000000\nstatus: 3\ntags: []\nuser_id: u\n"
)
BLOCK = 32 * 1024


def _import(store: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    """`rlvitals import` in a child with a deadline: a read that blocks fails the test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(RLVITALS_STORE=str(store), RLVITALS_POLICY="warn")
    cmd = [sys.executable, "-m", "rlvitals", "import", *map(str, paths), "--registry", MINI]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:  # the child is killed by subprocess.run
        pytest.fail("the import hung (killed after 60 s)")
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _series(store: Path, run: str, field: str) -> dict[int, float]:
    with exporter.Outbox(store / "outbox.sqlite") as box:
        steps, values = box.series(run, field)
    return {int(s): float(v) for s, v in zip(steps, values, strict=True)}


# --- MLflow file store -------------------------------------------------------------------------


def _mlflow_run(root: Path, metrics: dict[str, str], *, meta: str | None = None) -> Path:
    """mlruns/1/<run>/ with metric files `metrics`, as MLflow's FileStore writes them."""
    rid = "abcdef0123456789"
    experiment = root / "mlruns" / "1"
    run = experiment / rid
    (run / "metrics").mkdir(parents=True)
    (run / "tags").mkdir()
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nlifecycle_stage: active\nname: e\n")
    (run / "meta.yaml").write_text(RUN_META.format(rid=rid) if meta is None else meta)
    (run / "tags" / "mlflow.runName").write_text("r")
    for key, text in metrics.items():
        (run / "metrics" / key).write_text(text)
    return run


def _lines(steps: Iterable[int], value: float = 0.25) -> str:
    return "".join(f"{T + s} {value} {s}\n" for s in steps)


def test_a_fifo_metric_file_is_refused_by_name_and_the_other_metrics_are_imported(
    tmp_path: Path,
) -> None:
    run = _mlflow_run(tmp_path / "logs", {"kl": _lines(range(5))})
    os.mkfifo(run / "metrics" / "loss")
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert f"{run / 'metrics' / 'loss'}: not a regular file" in done.stderr
    assert sorted(_series(tmp_path / "store", "r", "kl")) == [0, 1, 2, 3, 4]


def test_a_fifo_param_file_is_refused_by_name_and_the_metrics_are_imported(
    tmp_path: Path,
) -> None:
    run = _mlflow_run(tmp_path / "logs", {"kl": _lines(range(5))})
    (run / "params").mkdir()
    os.mkfifo(run / "params" / "beta")
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert f"{run / 'params' / 'beta'}: not a regular file" in done.stderr
    assert sorted(_series(tmp_path / "store", "r", "kl")) == [0, 1, 2, 3, 4]


def test_each_bad_field_of_an_mlflow_metric_line_is_named_with_its_line(tmp_path: Path) -> None:
    loss = (
        f"{T} 0.5 1\n"  # 1: good
        f"{T} 0.7 1.5\n"  # 2: a step that is no whole number
        f"{T} 0.7 1e30\n"  # 3
        f"{T} abc 2\n"  # 4: a value that is no number
        f"{T} 0.7 -3\n"  # 5
        f"x 0.9 4\n"  # 6: a time that is no number
        f"{T} 0.25\n"  # 7: MLflow 1.x: `timestamp value`, which MLflow reads as step 0
    )
    run = _mlflow_run(tmp_path / "logs", {"kl": _lines(range(3)), "loss": loss})
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    file = run / "metrics" / "loss"
    for line, said in [
        (2, "step '1.5' is not a whole number"),
        (3, "step '1e30' is not a whole number"),
        (4, "value 'abc' is not a number"),
        (5, "step '-3' is not a whole number"),
        (6, "timestamp 'x' is not a whole number of milliseconds"),
    ]:
        (said_line,) = [x for x in done.stderr.splitlines() if f"{file}:{line}: " in x]
        assert "not an MLflow metric line" in said_line and said in said_line, said_line
    assert _series(tmp_path / "store", "r", "loss") == {0: 0.25, 1: 0.5}


def test_every_mlflow_step_beyond_the_storable_range_is_named_with_its_line(
    tmp_path: Path,
) -> None:
    loss = f"{T} 0.1 {2**63 - 1}\n{T} 0.2 {2**63}\n{T} 0.3 {2**64 + 5}\n{T} 0.4 {10**40}\n"
    loss += f"{T} 0.5 7\n"
    run = _mlflow_run(tmp_path / "logs", {"kl": _lines(range(3)), "loss": loss})
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    for line in (2, 3, 4):
        assert f"{run / 'metrics' / 'loss'}:{line}: step " in done.stderr, done.stderr
    assert done.stderr.count("beyond the largest storable step") == 3
    assert sorted(_series(tmp_path / "store", "r", "loss")) == [7, 2**63 - 1]


def test_a_malformed_meta_yaml_is_named(tmp_path: Path) -> None:
    run = _mlflow_run(tmp_path / "logs", {"kl": _lines(range(5))}, meta=":\n  - [unclosed\n")
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert f"{run / 'meta.yaml'}: is not valid YAML" in done.stderr
    assert sorted(_series(tmp_path / "store", "r", "kl")) == [0, 1, 2, 3, 4]


# --- W&B offline run log -----------------------------------------------------------------------


def _framed(payloads: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """A W&B run log (LevelDB log framing) of `payloads`, and where each record's first
    chunk header starts."""
    out = bytearray(struct.pack("<4sHB", b":W&B", 0xBEE1, 0))
    starts = []
    for payload in payloads:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += b"\0" * left
                continue
            if first:
                starts.append(len(out))
            chunk, payload = payload[: left - 7], payload[left - 7 :]
            kind = (1 if not payload else 2) if first else (4 if not payload else 3)
            crc = zlib.crc32(bytes([kind]) + chunk)
            out += struct.pack("<IHB", crc, len(chunk), kind) + chunk
            first = False
            if not payload:
                break
    return bytes(out), starts


def _pb() -> object:
    return pytest.importorskip("wandb.proto.wandb_internal_pb2")


def _run_record(name: str = "r") -> bytes:
    record = _pb().Record()  # type: ignore[attr-defined]
    record.run.run_id = "abc123"
    record.run.display_name = name
    return bytes(record.SerializeToString())


def _history(items: dict[str, str]) -> bytes:
    """One `wandb.log` row: each key with its value as W&B's JSON text."""
    record = _pb().Record()  # type: ignore[attr-defined]
    for key, value in items.items():
        item = record.history.item.add()
        item.nested_key.append(key)
        item.value_json = value
    return bytes(record.SerializeToString())


def _wandb_log(root: Path, rows: Iterable[dict[str, str]], rid: str = "abc123") -> Path:
    log = root / "wandb" / f"offline-run-20260101_000000-{rid}" / f"run-{rid}.wandb"
    log.parent.mkdir(parents=True)
    log.write_bytes(_framed([_run_record(), *map(_history, rows)])[0])
    return log


def test_a_fifo_named_as_a_wandb_log_is_refused_by_name_and_other_runs_imported(
    tmp_path: Path,
) -> None:
    _wandb_log(tmp_path / "logs", [{"loss": "0.5", "_step": "1"}])
    fifo = tmp_path / "logs" / "wandb" / "offline-run-20260102_000000-def456" / "run-def456.wandb"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert f"{fifo}: not a regular file" in done.stderr
    assert _series(tmp_path / "store", "r", "loss") == {1: 0.5}


def test_a_nan_wall_time_is_taken_as_absent_said_once_and_the_values_stored(
    tmp_path: Path,
) -> None:
    rows = [{"loss": f"0.{s}", "_step": str(s), "_timestamp": "NaN"} for s in (1, 2)]
    log = _wandb_log(tmp_path / "logs", [*rows, {"loss": "0.3", "_step": "3"}])
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("_timestamp") == 1
    assert f"{log}: _timestamp is nan, not a time, in 2 history row(s)" in done.stderr
    assert _series(tmp_path / "store", "r", "loss") == {1: 0.1, 2: 0.2, 3: 0.3}


def test_an_integer_too_large_for_a_float_is_counted_non_finite_as_in_every_log(
    tmp_path: Path,
) -> None:
    # lines.as_value, what JSONL, CSV and trainer_state.json read numbers with: as far out as
    # infinity, so counted non-finite, never a traceback (nor a second rule for W&B)
    rows = [
        {"loss": "1" + "0" * 400, "_step": "1"},
        {"loss": "0.3", "_step": "2", "_timestamp": "1" + "0" * 400},
    ]
    log = _wandb_log(tmp_path / "logs", rows)
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert "too large" not in done.stderr and "not a storable number" not in done.stderr
    assert re.search(r"non-finite 1\b", done.stdout + done.stderr), done.stdout
    assert re.search(
        re.escape(f"{log}: _timestamp is 1000") + r"0*\.\.\., not a time, in 1 history row",
        done.stderr,
    )
    assert _series(tmp_path / "store", "r", "loss") == {2: 0.3}


def test_text_list_and_boolean_values_are_named_once_per_key_with_their_rows(
    tmp_path: Path,
) -> None:
    rows = [
        {"loss": str(0.1 * s), "note": '"text"', "flag": "true", "lst": "[1, 2]", "_step": str(s)}
        for s in (1, 2, 3)
    ]
    rows.append({"note": '"only text"', "_step": "4"})  # a row of nothing storable
    log = _wandb_log(tmp_path / "logs", rows)
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    for key, kind, count in [("note", "text", 4), ("flag", "true/false", 3), ("lst", "a list", 3)]:
        said = f"{log}: key {key!r} holds {kind}, not a storable number, in {count} history row"
        assert said in done.stderr, done.stderr
        assert done.stderr.count(f"key {key!r}") == 1
    assert sorted(_series(tmp_path / "store", "r", "loss")) == [1, 2, 3]
    assert _series(tmp_path / "store", "r", "flag") == {}  # true/false is no metric here


def test_a_bad_step_is_named_with_its_row_and_value(tmp_path: Path) -> None:
    rows = [{"loss": "0.5", "_step": step} for step in ('"abc"', "1.5", "-1", "3")]
    log = _wandb_log(tmp_path / "logs", rows)
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    for row, step in [(1, "'abc'"), (2, "1.5"), (3, "-1")]:
        said = f"{log}: history row {row}: _step {step} is not a whole number >= 0"
        assert said in done.stderr, done.stderr
    assert _series(tmp_path / "store", "r", "loss") == {3: 0.5}


def test_a_damaged_record_says_which_bytes_of_its_block_were_skipped(tmp_path: Path) -> None:
    rows = [{"loss": f"{s}.0", "pad": '"' + "x" * 400 + '"', "_step": str(s)} for s in range(150)]
    data, starts = _framed([_run_record(), *map(_history, rows)])
    assert len(data) > 2 * BLOCK
    damaged = starts[3]  # the chunk header of the third history row
    broken = bytearray(data)
    broken[damaged + 20] ^= 0xFF  # one byte of its payload
    log = tmp_path / "logs" / "wandb" / "offline-run-20260101_000000-abc123" / "run-abc123.wandb"
    log.parent.mkdir(parents=True)
    log.write_bytes(bytes(broken))
    done = _import(tmp_path / "store", tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    assert f"{log}: a damaged record at byte {damaged}" in done.stderr
    assert f"bytes {damaged}-{BLOCK - 1}" in done.stderr
    assert "out of order" not in done.stderr  # the record running on past the block: same loss
    # rows 2 on to the last one begun in the first block are lost; the next block's are read
    first_read = next(i for i, start in enumerate(starts) if start >= BLOCK) - 1  # its row
    steps = sorted(_series(tmp_path / "store", "r", "loss"))
    assert steps == [0, 1, *range(first_read, 150)]


def test_a_damaged_record_in_the_block_being_written_is_said_once_however_often_it_is_polled(
    tmp_path: Path,
) -> None:
    # `tail` polls the log as W&B writes it: a damaged record in its last, partly written block
    # is read again at every poll (no whole record after it moves the read position on)
    rows = [{"loss": f"{s}.0", "_step": str(s)} for s in range(5)]
    data, starts = _framed([_run_record(), *map(_history, rows)])
    assert len(data) < BLOCK  # all in the first block, still being written
    broken = bytearray(data)
    broken[starts[3] + 9] ^= 0xFF  # a byte of the third history row's payload
    path = tmp_path / "run-abc123.wandb"
    path.write_bytes(bytes(broken))
    said: list[str] = []
    log = RecordLog(path, said.append)
    assert len(list(log.poll())) == 3  # the run record and the two rows before the damage
    for _ in range(3):
        assert list(log.poll()) == []
    with path.open("ab") as grown:  # the writer goes on in the same block
        payload = _history({"loss": "9.0", "_step": "9"})
        crc = zlib.crc32(bytes([1]) + payload)  # one whole record (kind 1)
        grown.write(struct.pack("<IHB", crc, len(payload), 1) + payload)
    assert list(log.poll()) == []  # the rest of a damaged block is not read (as documented)
    assert len(said) == 1 and f"a damaged record at byte {starts[3]}" in said[0], said
    assert list(log.poll(final=True)) == [] and len(said) == 1
