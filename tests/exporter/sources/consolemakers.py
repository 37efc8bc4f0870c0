"""Makers of trainers' console logs, written the way the trainers print them.

- verl: its console logger prints `step:{step}` and then `{key}:{value}` for every number of the
  step's metrics dict, joined with " - " (verl/utils/logger/aggregate_logger.py,
  `concat_dict_to_str`); up to v0.4.x each value as `{v:.3f}`, from v0.5.0 as
  `pprint.pformat(v)`, which spells a numpy 2 scalar `np.float64(…)`. Ray forwards the line
  behind `(<actor> pid=<pid>) `, coloured cyan (ray/_private/worker.py, `print_to_stdstream`).
- Hugging Face Trainer / TRL: printed by transformers' own `ProgressCallback` (the installed
  package), its tqdm bar on stderr and the dicts on stdout, both into one file as a job's
  `> log 2>&1` does.
- OpenRLHF: a step's training bar is tqdm over the step's mini-batches, its postfix set after
  each (openrlhf/trainer/ray/ppo_actor.py `ppo_train`, ppo_critic.py for a critic's own bar;
  `desc=f"Train epoch [{epoch + 1}/{max_epochs}]"`), drawn with carriage returns into one line
  that Ray forwards behind its prefix when the bar closes; a GitHub paste of it shows every
  carriage return as a new line (OpenRLHF issues #305, #350). The metrics of each step are
  logged as `✨ Global step N: {...}` (ppo_trainer.py) through OpenRLHF's logger
  (utils/logging_utils.py: `INFO 12-06 10:00:00 ppo_trainer.py:547] ...`) since v0.8.1.
"""

from __future__ import annotations

import contextlib
import io
import pprint
from collections.abc import Iterable, Mapping

import numpy as np

CYAN, RESET = "\x1b[36m", "\x1b[0m"


def verl_line(step: int, metrics: Mapping[str, object], *, style: str = "pformat") -> str:
    pieces = [f"step:{step}"]
    for key, value in metrics.items():
        if isinstance(value, bool | str) or not isinstance(value, int | float | np.number):
            continue  # verl prints numbers only
        pieces.append(f"{key}:{value:.3f}" if style == "3f" else f"{key}:{pprint.pformat(value)}")
    return " - ".join(pieces)


def ray(line: str, *, actor: str = "TaskRunner", pid: int = 2231, color: bool = True) -> str:
    prefix = f"({actor} pid={pid})"
    return f"{CYAN}{prefix}{RESET} {line}" if color else f"{prefix} {line}"


def verl_metrics(step: int) -> dict[str, object]:
    """One step of a verl GRPO run: numpy scalars for the reduced actor metrics, Python floats
    for the data metrics and ints for the counters, as verl mixes them."""
    return {
        "actor/pg_loss": np.float64(-0.01 + step * 1e-4),
        "actor/pg_clipfrac": np.float64(0.002),
        "actor/ppo_kl": np.float64(1e-4),
        "actor/entropy": np.float64(0.9 - step * 0.001),
        "actor/grad_norm": np.float64(0.4),
        "actor/lr": 1e-6,
        "critic/score/mean": 0.2 + step * 0.002,
        "critic/rewards/mean": 0.2 + step * 0.002,
        "critic/advantages/mean": 0.0,
        "response_length/mean": 250.0 + step,
        "response_length/clip_ratio": 0.01,
        "training/global_step": step,
        "training/epoch": 0,
    }


def verl_log(steps: Iterable[int], *, style: str = "pformat", header: str = "") -> str:
    out = [header] if header else []
    for step in steps:
        out.append(ray(verl_line(step, verl_metrics(step), style=style)))
    return "\n".join(out) + "\n"


def hf_console(
    logs: Iterable[tuple[int, Mapping[str, float]]],
    *,
    max_steps: int,
    bar: bool = True,
    closing: Mapping[str, float] | None = None,
) -> str:
    """What a Trainer prints: `logs` are (global_step, logs) in the order Trainer.log is called,
    each dict with its `epoch` as Trainer.log adds it. With `bar`, the training bar goes to
    the same file (stdout and stderr together); without it only the dicts (stdout alone)."""
    from transformers.trainer_callback import ProgressCallback, TrainerControl, TrainerState

    out = io.StringIO()
    sink = out if bar else io.StringIO()
    state = TrainerState()
    state.max_steps = max_steps
    state.is_world_process_zero = True
    control = TrainerControl()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(sink):
        callback = ProgressCallback()
        callback.on_train_begin(None, state, control)
        for step, entry in logs:
            while state.global_step < step:
                state.global_step += 1
                callback.on_step_end(None, state, control)
            callback.on_log(None, state, control, logs=dict(entry))
        if closing is not None:
            callback.on_log(None, state, control, logs=dict(closing))
        callback.on_train_end(None, state, control)
    return out.getvalue()


def grpo_logs(
    n: int, *, every: int = 1, per_epoch: int = 100
) -> list[tuple[int, dict[str, float]]]:
    """TRL GRPO's logs every `every` steps: accuracy reward climbing, format reward flat."""
    out = []
    for k in range(1, n + 1):
        step = k * every
        out.append(
            (
                step,
                {
                    "loss": 0.001 * k,
                    "grad_norm": 0.5,
                    "learning_rate": 1e-6,
                    "num_tokens": 1000.0 * step,
                    "completions/mean_length": 200.0 + k,
                    "completions/clipped_ratio": 0.0,
                    "rewards/accuracy_reward/mean": 0.1 + 0.01 * k,
                    "rewards/format_reward/mean": 0.5,
                    "reward": 0.6 + 0.01 * k,
                    "reward_std": 0.3,
                    "frac_reward_zero_std": 0.1,
                    "kl": 0.001 * k,
                    "entropy": 0.8,
                    "epoch": step / per_epoch,
                },
            )
        )
    return out


def openrlhf_bar(desc: str, postfixes: Iterable[Mapping[str, float]]) -> str:
    """tqdm's output of one OpenRLHF training bar (its carriage returns kept, its closing
    newline dropped): one mini-batch a postfix, refreshed every time as a slow step does."""
    from tqdm import tqdm

    out = io.StringIO()
    batches = list(postfixes)
    bar = tqdm(range(len(batches)), desc=desc, file=out, mininterval=0)
    for i, _ in enumerate(bar):
        bar.set_postfix(batches[i])
    return out.getvalue().rstrip("\n")


def ray_block(text: str, *, actor: str, pid: int, pasted: bool = False) -> str:
    """Output a Ray actor printed (one line a bar), as Ray forwards it behind its prefix; with
    `pasted`, as a GitHub issue shows it: each carriage return a new line."""
    lines = [ray(line, actor=actor, pid=pid, color=not pasted) for line in text.split("\n")]
    out = "\n".join(lines)
    return out.replace("\r", "\n") if pasted else out
