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

What the bars are, read from the same source and from real console output users published
(docs/console-logs.md, "Real OpenRLHF output read"):

- a step draws one `Train epoch [i/k]` bar per PPO epoch (its `max_epochs` is k); the step is the
  completion of its last one, `[k/k]`;
- a run with a critic trains it in another process (Ray's `CriticModelRayActor`), which draws
  its own `Train epoch` bar whose postfix holds the critic's metrics under their full names
  (`critic_loss=0.0367, values=0.42`; later `critic_lr`); the n-th completed critic bar
  belongs to the n-th step, as the n-th actor bar does, however the two processes' lines
  interleave. (The single-process trainer of earlier versions draws one bar with both.)
- versions that log `Global step` lines draw the bars as well: those lines give the steps,
  and the bars are not read (a completed bar is held until the next one completes, so the
  first `Global step` line, printed after its step's bars, still finds it held).
"""

from __future__ import annotations

import re

from .console_text import Progress, number, progress
from .hf_dict import DictLine, parse_dict
from .lines import BadLine

__all__ = ["SHORT_NAMES", "TrainingBars", "global_step_line", "postfix_values"]

_GLOBAL_STEP = re.compile(r"Global step (\d+):\s*(?=\{)")
# the bar of one PPO epoch of a step: `Train epoch [1/2]`, the whole description but for a
# launcher's prefix (Ray's `(PolicyModelActor pid=7)`, torchrun's `[rank0]:`); other trainers
# draw `Policy Train epoch [1/2]` (SkyRL) with postfixes of their own
_TRAIN_EPOCH = re.compile(r"(?:\([^()]*\)\s*|\[[^\[\]]*\]:\s*)*Train epoch \[(\d+)/(\d+)\]")
_POLICY = "policy_loss"
_CRITIC = "critic_loss"

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
    """`✨ Global step N: {...}`: the step and the dict, or None; BadLine when the dict after
    it cannot be read (cut, or edited: `...}`, a dict broken over lines)."""
    if "Global step" not in segment:
        return None
    match = _GLOBAL_STEP.search(segment)
    if match is None:
        return None
    parsed = parse_dict(segment[match.end() :])
    if parsed is None:
        raise BadLine(
            f"an OpenRLHF `Global step {match.group(1)}` line whose metrics could not be read "
            "(OpenRLHF prints the whole dict on one line; this one is cut or was edited)"
        )
    return int(match.group(1)), parsed


def postfix_values(bar: Progress) -> tuple[dict[str, float], list[str]]:
    """The metrics of a `Train epoch` bar's postfix under their full names, and what could not
    be read; nothing for any other bar."""
    if _TRAIN_EPOCH.fullmatch(bar.desc) is None or not bar.postfix:
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


Placed = tuple[int, dict[str, float]]


class TrainingBars:
    """The steps OpenRLHF's training bars give, in a log that prints no `Global step` lines
    (see the module doc): per role (the policy's bar, a critic's own bar), the count of its
    completed last-epoch bars."""

    def __init__(self) -> None:
        self._done: dict[str, bool] = {}  # per role: the last reading drawn was complete
        self._count: dict[str, int] = {}  # completed steps per role
        self._held: list[tuple[str, int, dict[str, float]]] = []
        self.off = False
        """A `Global step` line was read: the steps are printed, the bars are not read."""
        self.seen = False
        """A training bar with a postfix was drawn (complete or not)."""

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def printed_steps(self) -> None:
        """A `Global step` line was read: what the bars held is dropped, and no more is read."""
        self.off = True
        self._held.clear()

    def read(self, segment: str) -> tuple[list[Placed], list[str]]:
        """One drawn segment: the steps it releases, and what of its postfix is no number."""
        bar = progress(segment)
        if bar is None or self.off:
            return [], []
        epoch = _TRAIN_EPOCH.fullmatch(bar.desc)
        if epoch is None or not bar.postfix:
            return [], []  # another tool's bar, or the first reading, before any postfix
        self.seen = True
        values, bad = postfix_values(bar)
        role = "critic" if _CRITIC in values and _POLICY not in values else "policy"
        if bar.n < bar.total:
            self._done[role] = False
            return [], []
        if self._done.get(role) or epoch.group(1) != epoch.group(2):
            return [], []  # the same bar drawn again (refresh, close), or not the step's last epoch
        self._done[role] = True
        if not values:
            return [], bad
        out: list[Placed] = []
        if any(held_role == role for held_role, _, _ in self._held):
            out = self.flush()  # the next step's bar: the held ones are no first step's
        self._count[role] = self._count.get(role, 0) + 1
        self._held.append((role, self._count[role], values))
        return out, bad

    def flush(self) -> list[Placed]:
        """What is held, one step one entry (a step's policy and critic bars together: the
        trainer waits for both before the next step begins)."""
        merged: dict[int, dict[str, float]] = {}
        for _, step, values in self._held:
            merged.setdefault(step, {}).update(values)
        self._held.clear()
        return list(merged.items())
