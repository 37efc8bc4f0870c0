"""Makers of real log files: TensorBoard event files written with the tensorboard package's own
writer, SB3 progress.csv exactly as SB3's CSV output format writes it, CleanRL-style stdout."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

Steps = Iterable[tuple[int, Mapping[str, float]]]


def write_event_file(
    logdir: Path, steps: Steps, *, tensor_style: bool = False, wall_time: float = 1.7e9
) -> Path:
    """One event file with one event per scalar (what torch's SummaryWriter.add_scalar does)."""
    before = set(logdir.glob("events.out.tfevents.*")) if logdir.exists() else set()
    writer = EventFileWriter(str(logdir))
    for step, values in steps:
        for tag, value in values.items():
            if tensor_style:
                summary = scalar_pb(tag, value)
            else:
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=wall_time + step, step=step, summary=summary))
    writer.flush()
    writer.close()
    (path,) = set(logdir.glob("events.out.tfevents.*")) - before
    return path


class Sb3Csv:
    """Writes progress.csv the way SB3's CSVOutputFormat does, header rewrite included."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: list[str] = []
        self.file = open(path, "w+")  # noqa: SIM115

    def write(self, key_values: Mapping[str, object]) -> None:
        extra = [k for k in key_values if k not in self.keys]
        if extra:
            self.keys.extend(extra)
            self.file.seek(0)
            lines = self.file.readlines()
            self.file.seek(0)
            self.file.write(",".join(self.keys) + "\n")
            for line in lines[1:]:
                self.file.write(line[:-1] + "," * len(extra) + "\n")
        cells = []
        for key in self.keys:
            value = key_values.get(key)
            if isinstance(value, str):
                cells.append('"' + value.replace('"', '""') + '"')
            elif value is None:
                cells.append("")
            else:
                cells.append(str(value))
        self.file.write(",".join(cells) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def sb3_rows(n: int, *, start: int = 0) -> list[dict[str, object]]:
    """Dumps as PPO makes them: the first has no train/ keys (training has not run yet)."""
    rows: list[dict[str, object]] = []
    for i in range(start, start + n):
        step = 2048 * (i + 1)
        row: dict[str, object] = {
            "rollout/ep_len_mean": 20.0 + i,
            "rollout/ep_rew_mean": 20.0 + i,
            "time/fps": 1500,
            "time/iterations": i + 1,
            "time/time_elapsed": i + 1,
            "time/total_timesteps": step,
        }
        if i > 0:
            row |= {
                "train/approx_kl": 0.01 + i / 1000,
                "train/clip_fraction": 0.1,
                "train/entropy_loss": -0.69 + i / 100,
                "train/learning_rate": 0.0003,
            }
        rows.append(row)
    return rows


def cleanrl_stdout(n: int) -> str:
    """What CleanRL's ppo.py prints: episode returns and SPS lines, mixed with other output."""
    out = io.StringIO()
    out.write("Using cpu device\n")
    for i in range(n):
        step = 128 * (i + 1)
        out.write(f"global_step={step}, episodic_return=[{10.0 + i}]\n")
        out.write(f"SPS: {400 + i}\n")
    return out.getvalue()


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
