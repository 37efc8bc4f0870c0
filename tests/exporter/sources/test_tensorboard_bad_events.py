"""Event files with events no trainer should write (a fuzz found them): a scalars-plugin tensor
that holds no number, or holds it in a shape [1]; a wall time that is NaN or infinite. Each
value ends stored or named (file, step, tag, what is wrong), the import ends without a traceback.

The files are written with tensorboard's own protobufs and event file writer, as the fuzz's
generators wrote them (TFRecord framing with its checksums)."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.types_pb2 import DT_FLOAT, DT_INT64, DT_STRING, DT_VARIANT
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

import exporter

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")
TAG = "losses/clipfrac"  # clip_fraction in the mini registry, under --framework cleanrl
WALL = 1.7e9


def _import(logs: Path, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(RLVITALS_STORE=str(store), RLVITALS_POLICY="warn")
    cmd = [sys.executable, "-m", "rlvitals", "import", str(logs), "--framework", "cleanrl"]
    done = subprocess.run(
        [*cmd, "--registry", MINI], env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _write(run: Path, events: list[Event]) -> Path:
    writer = EventFileWriter(str(run))
    for event in events:
        writer.add_event(event)
    writer.close()
    (path,) = run.glob("events.out.tfevents.*")
    return path


def _simple(step: int, value: float, wall: float = WALL) -> Event:
    return Event(
        wall_time=wall,
        step=step,
        summary=Summary(value=[Summary.Value(tag=TAG, simple_value=value)]),
    )


def _tensor(step: int, tensor: TensorProto, wall: float = WALL) -> Event:
    """A scalars-plugin summary holding `tensor`, as `tf.summary.scalar` writes one."""
    summary = scalar_pb(TAG, 0.0)
    summary.value[0].tensor.CopyFrom(tensor)
    return Event(wall_time=wall, step=step, summary=summary)


def _shaped(dtype: int, dims: list[int], **content: object) -> TensorProto:
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in dims])
    return TensorProto(dtype=dtype, tensor_shape=shape, **content)


def _stored(store: Path, run: str = "run1") -> dict[int, tuple[float, float]]:
    """step -> (value, wall time) of the run's clip_fraction in the store."""
    with exporter.Outbox(store / "outbox.sqlite") as box:
        steps, values = box.series(run, "clip_fraction")
    with sqlite3.connect(store / "outbox.sqlite") as db:
        walls = dict(
            db.execute(
                "SELECT step, wall_time FROM samples WHERE run = ? AND field = 'clip_fraction'"
                " AND measurement != 'run_config'",
                (run,),
            ).fetchall()
        )
    return {
        int(s): (float(v), float(walls[int(s)]))
        for s, v in zip(steps.tolist(), values.tolist(), strict=True)
    }


def test_a_scalars_tensor_of_a_type_without_numbers_is_named_and_the_rest_imported(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "logs" / "run1",
        [_simple(1, 0.25), _tensor(2, _shaped(DT_VARIANT, [])), _simple(3, 0.5)],
    )
    done = _import(tmp_path / "logs", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    named = [line for line in done.stderr.splitlines() if "DT_VARIANT" in line]
    assert len(named) == 1, done.stderr
    assert str(path) in named[0] and "step 2" in named[0] and TAG in named[0], named[0]
    assert "skipped" in named[0] and "tf.summary.scalar" in named[0], named[0]
    assert {s: v for s, (v, _) in _stored(tmp_path / "store").items()} == {1: 0.25, 3: 0.5}


def test_values_whose_wall_time_is_not_finite_are_stored_and_the_file_named_once(
    tmp_path: Path,
) -> None:
    bad = {3: math.nan, 4: math.inf, 5: -math.inf, 6: math.nan, 10: math.inf}
    # a run of one-scalar steps (read as arrays, in blocks) and a tensor scalar (via protobuf)
    events = [_simple(s, s / 16, bad.get(s, WALL + s)) for s in range(10)]
    events.append(_tensor(10, _shaped(DT_FLOAT, [], float_val=[0.75]), bad[10]))
    path = _write(tmp_path / "logs" / "run1", events)
    before = time.time()
    done = _import(tmp_path / "logs", tmp_path / "store")
    after = time.time()
    assert done.returncode == 0, done.stderr
    stored = _stored(tmp_path / "store")
    assert {s: v for s, (v, _) in stored.items()} == {**{s: s / 16 for s in range(10)}, 10: 0.75}
    for step, (_, wall) in stored.items():
        if step in bad:  # no time of its own: the time it was read
            assert before <= wall <= after, (step, wall)
        else:
            assert wall == WALL + step, (step, wall)
    said = [line for line in done.stderr.splitlines() if "wall time" in line]
    assert len(said) == 1, done.stderr
    assert str(path) in said[0] and f"{len(bad)} event(s)" in said[0], said[0]
    assert "not a finite number" in said[0] and "stored" in said[0], said[0]


def test_a_one_element_scalars_tensor_is_read_and_a_string_or_several_values_named(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "logs" / "run1",
        [
            _tensor(1, _shaped(DT_FLOAT, [1], float_val=[0.5])),
            _tensor(2, _shaped(DT_INT64, [1, 1], int64_val=[1])),
            _tensor(3, _shaped(DT_STRING, [], string_val=[b"abc"])),
            _tensor(4, _shaped(DT_FLOAT, [2], float_val=[0.1, 0.2])),
            _tensor(5, _shaped(DT_FLOAT, [], float_val=[0.125])),
        ],
    )
    done = _import(tmp_path / "logs", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    assert {s: v for s, (v, _) in _stored(tmp_path / "store").items()} == {
        1: 0.5,
        2: 1.0,
        5: 0.125,
    }
    named = [line for line in done.stderr.splitlines() if str(path) in line]
    string = [line for line in named if "step 3" in line]
    assert len(string) == 1 and "not a number" in string[0] and TAG in string[0], done.stderr
    assert "string" in string[0] and "abc" in string[0], string[0]
    several = [line for line in named if "step 4" in line]
    assert len(several) == 1 and "2 values" in several[0] and TAG in several[0], done.stderr
