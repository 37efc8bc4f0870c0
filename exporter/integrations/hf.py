"""Hugging Face `transformers` (and so TRL) trainers: forward every `on_log` to an rlvitals run.

    trainer = GRPOTrainer(..., callbacks=[RlvitalsCallback(run)])

The step is `state.global_step`; only the main process logs (unless the run has a rank and
`all_ranks=True`). A checkpoint save becomes a `checkpoint` event. Importing this module does not
import transformers; the callback class is built on first use.
"""

from __future__ import annotations

import functools
from typing import Any

from .target import StepLogger, numeric_values

__all__ = ["RlvitalsCallback"]


@functools.cache
def _callback_class() -> type:
    from transformers import TrainerCallback

    class _RlvitalsCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
        def __init__(
            self, run: StepLogger, *, framework: str = "trl", all_ranks: bool = False
        ) -> None:
            self.run = run
            self.framework = framework
            self.all_ranks = all_ranks

        def _mine(self, state: Any) -> bool:
            return self.all_ranks or bool(state.is_world_process_zero)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
        ) -> None:
            if not logs or not self._mine(state):
                return
            values = numeric_values(logs)
            if values:
                self.run.log(int(state.global_step), values, framework=self.framework)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self._mine(state):
                step = int(state.global_step)
                self.run.event(
                    step, "checkpoint", text=f"checkpoint-{step} saved to {args.output_dir}"
                )

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # the Trainer calls this only when train() comes to its end (not when it raises)
            if self._mine(state):
                self.run.mark_finished(
                    f"the trainer's train() ended (on_train_end at step {int(state.global_step)})"
                )
            self.run.flush()

    return _RlvitalsCallback


def RlvitalsCallback(run: StepLogger, *, framework: str = "trl", all_ranks: bool = False) -> Any:
    """A `transformers.TrainerCallback` that forwards the trainer's logs to `run`."""
    return _callback_class()(run, framework=framework, all_ranks=all_ranks)
