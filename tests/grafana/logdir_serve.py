"""SB3 TensorBoard runs written as SB3 writes them, and `python -m rlvitals serve` as a real
process, for the `serve LOGDIR` tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

__all__ = ["ROLLOUT", "SB3_TAGS", "WAIT_S", "Sb3Writer", "Served"]

ROOT = Path(__file__).resolve().parents[2]
# generous: the machine the suite runs on may be loaded (a serve process starts in seconds)
WAIT_S = 90.0
# What SB3's TensorBoard output writes for PPO (stable_baselines3/common/logger.py, the keys
# of on_policy_algorithm.py and ppo.py), one value each per 2048-step rollout.
SB3_TAGS = (
    "rollout/ep_rew_mean",
    "rollout/ep_len_mean",
    "time/fps",
    "train/approx_kl",
    "train/clip_fraction",
    "train/entropy_loss",
    "train/learning_rate",
    "train/value_loss",
)
ROLLOUT = 2048


class Sb3Writer:
    """One SB3 run's event file, kept open and appended to as SB3's TensorBoard output does."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(folder))
        self.rollouts = 0

    def write(self, rollouts: int) -> int:
        """`rollouts` more rollouts' values, flushed; returns the last step written."""
        for _ in range(rollouts):
            self.rollouts += 1
            step = self.rollouts * ROLLOUT
            for i, tag in enumerate(SB3_TAGS):
                value = 3e-4 if tag == "train/learning_rate" else 0.01 * (i + 1) + step * 1e-6
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
                self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()
        return self.rollouts * ROLLOUT

    def close(self) -> None:
        self._writer.close()


class Served:
    """`python -m rlvitals serve ARGV` started in `cwd`, its stderr collected as it comes."""

    def __init__(self, cwd: Path, *argv: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        env["PYTHONPATH"] = str(ROOT)  # this checkout's code, not an installed copy's
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvitals", "serve", "--port", "0", *argv],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_url()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def _wait_url(self) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = re.search(r"on (http://127\.0\.0\.1:\d+)/ reading", self.stderr)
            if found:
                return found.group(1)
            assert self.proc.poll() is None, self.stderr
            time.sleep(0.1)
        raise AssertionError(f"serve printed no address in {WAIT_S:.0f} s:\n{self.stderr}")

    def wait_said(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.stderr:
            assert time.monotonic() < deadline, f"{text!r} never said:\n{self.stderr}"
            time.sleep(0.1)

    def stop(self) -> str:
        """SIGTERM, as a stopped container gets; what it printed on stdout (the run lines)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=WAIT_S)
        self._reader.join(5)
        assert self.proc.returncode == 0, self.stderr
        return out
