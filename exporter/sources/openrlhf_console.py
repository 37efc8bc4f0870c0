"""What OpenRLHF prints of its metrics on the console.

Two forms, read from OpenRLHF's source (OpenRLHF/OpenRLHF, trainer/ppo_trainer.py and
trainer/ray/ppo_actor.py at v0.11.0, and the versions before it):

- current versions log one line per global step, `✨ Global step 12: {'policy_loss': ...}`:
  the step and the full metric names (the names its TensorBoard and W&B backends get);
- every version shows the training of a step as a `Train epoch [1/1]` progress bar whose
  postfix holds short names of the metrics of the mini-batch just trained (`pg=-0.387,
  rm=0.5, ret=0.183, glen=649`; newer: `act_loss=..., reward=..., gen_len=...`). The bar's
  last reading, when it completes, is the last mini-batch of the step; its values are read
  under the full names, and the step is the count of completed training bars (the postfix
  prints no step), which the run says (`step_source: logging order`).
"""

from __future__ import annotations

import re

from .console_text import Progress, number
from .hf_dict import DictLine, parse_dict

__all__ = ["SHORT_NAMES", "global_step_line", "postfix_values"]

_GLOBAL_STEP = re.compile(r"Global step (\d+):\s*(?=\{)")

# postfix name -> the metric name OpenRLHF logs to its backends (trainer/ray/ppo_actor.py:
# the `short_status` table of 2024 versions, and the current one)
SHORT_NAMES: dict[str, str] = {
    "pg": "policy_loss",
    "act_loss": "policy_loss",
    "cri": "critic_loss",
    "vals": "values",
    "rm": "reward",
    "reward": "reward",
    "ret": "return",
    "return": "return",
    "glen": "response_length",
    "gen_len": "response_length",
    "tlen": "total_length",
    "tot_len": "total_length",
    "kl": "kl",
    "ptx": "ptx_loss",
    "act_lr": "actor_lr",
    "cri_lr": "critic_lr",
    "grad_norm": "actor_grad_norm",
    "ent_loss": "entropy_loss",
}
_PAIR = re.compile(r"([A-Za-z_][\w/]*)=([^,]+)")


def global_step_line(segment: str) -> tuple[int, DictLine] | None:
    """`✨ Global step N: {...}`: the step and the dict, or None."""
    if "Global step" not in segment:
        return None
    match = _GLOBAL_STEP.search(segment)
    if match is None:
        return None
    parsed = parse_dict(segment[match.end() :])
    if parsed is None:
        return None
    return int(match.group(1)), parsed


def postfix_values(bar: Progress) -> tuple[dict[str, float], list[str]]:
    """The metrics of a `Train epoch` bar's postfix under their full names, and what could not
    be read; nothing for any other bar."""
    if not bar.desc.startswith("Train epoch") or not bar.postfix:
        return {}, []
    values: dict[str, float] = {}
    bad: list[str] = []
    for short, raw in _PAIR.findall(bar.postfix):
        name = SHORT_NAMES.get(short, short)
        value = number(raw)
        if value is None:
            bad.append(f"{short}: {raw.strip()[:40]!r} is not a number")
        else:
            values[name] = value
    return values, bad
