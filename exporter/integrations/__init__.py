"""Framework integrations: Stable-Baselines3 (`sb3`), Hugging Face / TRL trainers (`hf`), a
TensorBoard `SummaryWriter` drop-in (`tensorboard`) and the NVML GPU sampler (`gpu`). Import the
submodule you need; none imports its framework until used.

Each calls a run through `target.StepLogger` (the part of `exporter.Run` it uses). May import:
the shared modules and `exporter` itself (`init`, for the drop-in); never a stage below the run.
"""

from .target import StepLogger, numeric_values

__all__ = ["StepLogger", "numeric_values"]
