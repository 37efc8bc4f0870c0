"""Stable-Baselines3: send everything SB3's logger dumps to an rlvitals run.

Two ways in, both without touching the training code beyond one line:

    model.learn(total_timesteps, callback=RlvitalsCallback(run))   # keeps SB3's own outputs
    model.set_logger(configure_logger(run, folder, ["stdout", "csv"]))

The step is SB3's `num_timesteps`, which the logger passes to each output format. Importing this
module does not import stable_baselines3; the classes are built on first use.
"""

from __future__ import annotations

import functools
from typing import Any

from .target import StepLogger, numeric_values

__all__ = ["OUTPUT_FORMAT_NAME", "RlvitalsCallback", "configure_logger", "output_format"]

OUTPUT_FORMAT_NAME = "rlvitals"
_STEP_KEY = "time/total_timesteps"


@functools.cache
def _writer_class() -> type:
    from stable_baselines3.common.logger import KVWriter

    class RlvitalsOutputFormat(KVWriter):  # type: ignore[misc,unused-ignore]
        """An SB3 logger output format that forwards each dump to a run (keys excluded for
        `rlvitals` are skipped)."""

        def __init__(self, run: StepLogger) -> None:
            self.run = run

        def write(
            self,
            key_values: dict[str, Any],
            key_excluded: dict[str, tuple[str, ...]],
            step: int = 0,
        ) -> None:
            skip = {
                k
                for k, formats in key_excluded.items()
                if formats and OUTPUT_FORMAT_NAME in formats
            }
            skip.add(_STEP_KEY)
            values = numeric_values(key_values, frozenset(skip))
            if values:
                self.run.log(int(step), values, framework="sb3")

        def close(self) -> None:
            self.run.flush()

    return RlvitalsOutputFormat


def output_format(run: StepLogger) -> Any:
    """An SB3 `KVWriter` that forwards to `run`; append it to `logger.output_formats`."""
    return _writer_class()(run)


def configure_logger(
    run: StepLogger, folder: str | None = None, format_strings: list[str] | None = None
) -> Any:
    """An SB3 `Logger` writing SB3's usual outputs (default: stdout only) plus the run."""
    from stable_baselines3.common.logger import configure

    logger = configure(folder, format_strings if format_strings is not None else ["stdout"])
    logger.output_formats.append(output_format(run))
    return logger


@functools.cache
def _callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    class _RlvitalsCallback(BaseCallback):  # type: ignore[misc,unused-ignore]
        """Adds the rlvitals output format to the model's logger when training starts and
        flushes the run when it ends; checkpoints saved by SB3 callbacks are not visible here."""

        def __init__(self, run: StepLogger, verbose: int = 0) -> None:
            super().__init__(verbose)
            self.run = run
            self._writer: Any = None

        def _on_training_start(self) -> None:
            formats = self.model.logger.output_formats
            if self._writer is None or self._writer not in formats:
                self._writer = output_format(self.run)
                formats.append(self._writer)

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self) -> None:
            # SB3 calls this only when learn() comes to its end (not when it raises): the run
            # is recorded finished; another learn() logging again makes it live again
            self.run.mark_finished("SB3 learn() returned")
            self.run.flush()

    return _RlvitalsCallback


def RlvitalsCallback(run: StepLogger, verbose: int = 0) -> Any:
    """An SB3 `BaseCallback` that forwards the model's logger dumps to `run`."""
    return _callback_class()(run, verbose)
