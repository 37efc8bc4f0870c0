"""Framework integrations: Stable-Baselines3, Hugging Face / TRL trainers and a TensorBoard
`SummaryWriter` drop-in. Import the submodule you need; none imports its framework until used."""

from .target import StepLogger, numeric_values

__all__ = ["StepLogger", "numeric_values"]
