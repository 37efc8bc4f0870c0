"""Write two trainers' console logs, as a job redirected to a file leaves them (docs/console-logs.md).

    python examples/console_logs.py logs/

- `logs/verl-grpo/train.log`: verl's console, behind Ray's coloured `(TaskRunner pid=...)` prefix:
  its resolved config (pprinted, as verl does), then one `step:N - key:value - ...` line per
  step, values as verl >= 0.5 prints them (`np.float64(...)` beside plain floats), and its
  `Final validation metrics` line at the end. From step 40 the run breaks: the reward halves
  while the token entropy multiplies and the answers run into the length limit.
- `logs/trl-grpo/out.txt`: the Hugging Face Trainer's console (TRL GRPO), stdout and stderr in
  one file: the tqdm bar redrawn with carriage returns, each log dict written through
  `tqdm.write` with floats formatted to four significant digits (transformers >= 5.0), and the
  closing `train_runtime` dict. It logs every 10 steps and stays healthy.
- `logs/trl-grpo-stdout/stdout.txt`: the same run's dicts alone (stdout without the bar): the
  Trainer prints no step, so its reader is told the cadence (`--set logging_steps=10`).

Written by hand in the trainers' formats (no verl or TRL needed); the tests also read real
output of transformers' own callback (tests/exporter/sources/consolemakers.py).
"""

from __future__ import annotations

import argparse
import math
import pprint
import random
from pathlib import Path

CYAN, RESET = "\x1b[36m", "\x1b[0m"


def _ray(line: str) -> str:
    return f"{CYAN}(TaskRunner pid=4242){RESET} {line}"


def verl_log(steps: int = 60) -> str:
    rng = random.Random(0)
    config = {
        "actor_rollout_ref": {
            "actor": {"clip_ratio": 0.2, "use_kl_loss": True, "kl_loss_coef": 0.001},
            "rollout": {"n": 8, "temperature": 1.0},
        },
        "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
        "data": {"max_response_length": 1024, "train_batch_size": 256},
        "trainer": {"total_training_steps": steps, "logger": ["console"]},
    }
    lines = ["2025-06-01 10:00:00,000\tINFO worker.py:1832 -- Started a local Ray instance."]
    lines += [_ray(line) for line in pprint.pformat(config).splitlines()]
    for step in range(1, steps + 1):
        broken = step >= 40
        score = (0.15 if broken else 0.45 + 0.004 * step) + rng.uniform(-0.03, 0.03)
        entropy = (0.9 + 0.1 * (step - 40)) if broken else 0.45 - 0.002 * step
        clipped = 0.8 if broken else 0.02
        length = 1000.0 if broken else 420.0 + step
        metrics = {
            "actor/entropy": f"np.float64({entropy:.6g})",
            "actor/pg_loss": f"np.float64({rng.uniform(-0.02, 0.02):.6g})",
            "actor/pg_clipfrac": f"np.float64({0.004:.6g})",
            "actor/ppo_kl": f"np.float64({0.0005:.6g})",
            "actor/kl_loss": f"np.float64({0.002 + (0.05 if broken else 0.0):.6g})",
            "actor/grad_norm": f"np.float64({0.3:.6g})",
            "actor/lr": "1e-06",
            "critic/score/mean": f"{score:.6g}",
            "critic/rewards/mean": f"{score:.6g}",
            "critic/advantages/mean": "0.0",
            "response_length/mean": f"{length:.6g}",
            "response_length/clip_ratio": f"{clipped:.6g}",
            "timing_s/step": f"{20 + rng.uniform(0, 2):.6g}",
            "training/global_step": str(step),
            "training/epoch": "0",
        }
        lines.append(_ray(f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in metrics.items())))
    lines.append(_ray("('Final validation metrics: "))
    lines.append(_ray(" \"{'val-core/openai/gsm8k/reward/mean@1': np.float64(0.16)}\")"))
    return "\n".join(lines) + "\n"


def _bar(n: int, total: int) -> str:
    filled = n * 10 // total
    return f"{100 * n // total:3d}%|{'#' * filled}{' ' * (10 - filled)}| {n}/{total} [00:{n % 60:02d}<00:00,  1.00s/it]"


def _g4(value: float) -> str:
    return f"{value:.4g}"


def trl_logs(steps: int = 120, every: int = 10) -> tuple[str, str]:
    """(stdout and stderr together, stdout alone) of a healthy TRL GRPO run."""
    rng = random.Random(1)
    both: list[str] = ["***** Running training *****", f"  Total optimization steps = {steps}"]
    alone: list[str] = []
    line = ""
    for step in range(1, steps + 1):
        line += "\r" + _bar(step, steps)
        if step % every:
            continue
        reward = 0.5 + 0.3 * (1 - math.exp(-step / 60)) + rng.uniform(-0.03, 0.03)
        logs = {
            "loss": _g4(rng.uniform(-0.01, 0.01)),
            "grad_norm": _g4(0.4 + rng.uniform(0, 0.1)),
            "learning_rate": _g4(1e-6),
            "num_tokens": _g4(2048.0 * step),
            "completions/mean_length": _g4(300.0 - step / 2),
            "completions/clipped_ratio": _g4(0.01),
            "rewards/accuracy_reward/mean": _g4(reward),
            "rewards/format_reward/mean": _g4(0.9),
            "reward": _g4(reward + 0.9),
            "reward_std": _g4(0.4),
            "frac_reward_zero_std": _g4(0.2),
            "entropy": _g4(0.35 - step / 1000),
            "epoch": _g4(step / 400),
        }
        printed = str(logs)
        # tqdm.write: clear the bar, write the dict, redraw the bar at its count
        both.append(line + "\r" + " " * 40 + "\r" + printed)
        alone.append(printed)
        line = "\r" + _bar(step, steps)
    closing = str(
        {
            "train_runtime": _g4(812.5),
            "train_samples_per_second": _g4(1.18),
            "train_steps_per_second": _g4(0.148),
            "train_loss": _g4(0.0004),
            "epoch": _g4(steps / 400),
        }
    )
    both.append(line + "\r" + " " * 40 + "\r" + closing)
    alone.append(closing)
    return "\n".join(both) + "\n" + line + "\n", "\n".join(alone) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, nargs="?", default=Path("logs"))
    args = parser.parse_args(argv)
    out: Path = args.folder
    for name, text in (
        ("verl-grpo/train.log", verl_log()),
        ("trl-grpo/out.txt", trl_logs()[0]),
        ("trl-grpo-stdout/stdout.txt", trl_logs()[1]),
    ):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
