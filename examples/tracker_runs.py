"""Write one small GRPO-shaped run with each tracker, as a training script would: a W&B offline
run under ./wandb/ and an MLflow file store under ./mlruns/ (docs/trackers.md reads them).

    pip install -e '.[trackers]'
    python examples/tracker_runs.py [--out DIR] [--steps N]

The W&B run logs the way the Hugging Face Trainer's W&B callback does (`train/<key>` without a
step, against `train/global_step`); the MLflow run the way its MLflow callback does (raw keys at
`step=global_step`, the trainer's arguments as params). The reward of one reward function falls
to zero while the format reward rises, from step 30 on.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


def _row(step: int) -> dict[str, float]:
    late = max(0, step - 30)
    accuracy = max(0.0, 0.6 - 0.03 * late)
    fmt = min(1.0, 0.4 + 0.02 * step)
    return {
        "loss": 0.01 + 0.0005 * late,
        "reward": accuracy + fmt,
        "reward_std": 0.3 * math.exp(-0.05 * late),
        "rewards/accuracy_reward/mean": accuracy,
        "rewards/format_reward/mean": fmt,
        "kl": 0.001 * step,
        "entropy": 1.2 - 0.01 * step,
        "completions/mean_length": 180.0 + step,
        "completions/clipped_ratio": 0.01,
        "frac_reward_zero_std": min(1.0, 0.1 + 0.02 * late),
    }


ARGS = {"num_generations": 8, "beta": 0.04, "max_completion_length": 512, "epsilon": 0.2}


def write_wandb(out: Path, steps: int) -> None:
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    run = wandb.init(dir=str(out), project="trackers-demo", name="grpo-wandb", config=ARGS)
    run.define_metric("train/global_step")
    run.define_metric("*", step_metric="train/global_step", step_sync=True)
    for step in range(1, steps + 1):
        logged = {f"train/{k}": v for k, v in _row(step).items()}
        run.log({**logged, "train/global_step": step})
    run.finish()


def write_mlflow(out: Path, steps: int) -> None:
    # MLflow >= 3.13 opens a file store only with this set (its default is now a SQLite file)
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import mlflow

    mlflow.set_tracking_uri("file:" + str((out / "mlruns").resolve()))
    mlflow.set_experiment("trackers-demo")
    with mlflow.start_run(run_name="grpo-mlflow"):
        mlflow.log_params(ARGS)
        for step in range(1, steps + 1):
            mlflow.log_metrics(_row(step), step=step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder to write into")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_wandb(args.out, args.steps)
    write_mlflow(args.out, args.steps)
    print(f"wrote {args.out / 'wandb'} and {args.out / 'mlruns'}")


if __name__ == "__main__":
    main()
