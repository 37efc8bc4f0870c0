"""SB3 TensorBoard runs written as SB3 writes them, for the `serve LOGDIR` tests (which start
`python -m rlvitals serve` through serve_process.Served)."""

from __future__ import annotations

import time
from pathlib import Path

from serve_process import WAIT_S, Served  # re-exported: the serve LOGDIR tests take both here
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

__all__ = ["ROLLOUT", "SB3_TAGS", "WAIT_S", "Sb3Writer", "Served"]

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
