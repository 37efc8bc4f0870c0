"""What a run's logs say about its setting: run-config keys for the diagnosis's run context.

The event files' text summaries are parsed per framework (TRL's `args` / `model_config` JSON,
CleanRL's `hyperparameters` markdown table); the logged keys tell the rest (SB3 logs `train/std`
only for Gaussian policies, `train/ent_coef` only for SAC). The user's `--config` / `--set`
override all of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["context_from_logs", "parse_assignment"]


def _number(text: str) -> Any:
    low = text.strip()
    if low in ("True", "true"):
        return True
    if low in ("False", "false"):
        return False
    for cast in (int, float):
        try:
            return cast(low)
        except ValueError:
            pass
    return low


def parse_assignment(item: str) -> tuple[str, Any]:
    """`KEY=VALUE` of `--set`: the value as JSON when it parses (numbers, true/false, lists),
    else as text. Raises ValueError naming the problem."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. --set clip_epsilon=0.2")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _markdown_table(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("param", "-", "") and not set(cells[0]) <= {"-"}:
            out[cells[0]] = _number(cells[1])
    return out


def _json(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _text(texts: Mapping[str, str], name: str) -> str | None:
    for tag, text in texts.items():
        if tag == name or tag.startswith(name + "/"):
            return text
    return None


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v > 0 else None


def context_from_logs(
    framework: str | None, keys: Iterable[str], texts: Mapping[str, str]
) -> dict[str, Any]:
    """Run-config keys (see `registry.diagnosis.context.CONTEXT_KEYS`) the logs establish."""
    names = set(keys)
    out: dict[str, Any] = {}
    if framework:
        out["framework"] = framework
    if framework == "sb3":
        if "train/ent_coef" in names and "train/clip_fraction" not in names:
            out["algorithm"], out["action_space"] = "SAC", "continuous"
        elif "rollout/exploration_rate" in names:
            # only DQN (and sb3-contrib's QR-DQN) logs epsilon; its actions are discrete
            out["algorithm"], out["action_space"] = "DQN", "discrete"
        elif "train/actor_loss" in names and "train/critic_loss" in names:
            # an actor-critic logging no entropy and no temperature: TD3 or DDPG (SB3's DDPG
            # is TD3 without target smoothing and delay; their logs are the same)
            out["algorithm"], out["action_space"] = "TD3/DDPG", "continuous"
        elif "train/std" in names:
            out["action_space"] = "continuous"
        elif "train/entropy_loss" in names:
            out["action_space"] = "discrete"
        if "train/clip_fraction" in names:
            out["algorithm"] = "PPO"
        elif "train/entropy_loss" in names and "train/policy_loss" in names:
            out["algorithm"] = "A2C"
    hyper = _text(texts, "hyperparameters")
    if hyper is not None:
        table = _markdown_table(hyper)
        if "clip_coef" in table:
            out["algorithm"] = "PPO"
            clip = _positive(table["clip_coef"])
            if clip is not None:
                out["clip_epsilon"] = clip
        total = table.get("total_timesteps")
        if isinstance(total, int) and total > 0:
            out["planned_steps"] = total
        starts = table.get("learning_starts")
        if isinstance(starts, int) and not isinstance(starts, bool) and starts >= 0:
            out["learning_starts"] = starts
        if "anneal_lr" in table:
            out["lr_schedule"] = "linear" if table["anneal_lr"] is True else "constant"
        if isinstance(table.get("env_id"), str):
            out["env"] = table["env_id"]
    args = _text(texts, "args")
    if args is not None:
        doc = _json(args)
        if "num_generations" in doc or "beta" in doc:
            # RLOOConfig alone has `reward_clip_range` (TRL 1.x, trl/trainer/rloo_config.py;
            # GRPOConfig has no such field), the older RLOOConfig `rloo_k`
            rloo = "rloo_k" in doc or "reward_clip_range" in doc
            out["algorithm"] = "RLOO" if rloo else "GRPO"
            out["action_space"] = "token"
        if isinstance(doc.get("num_iterations"), int):
            out["num_iterations"] = doc["num_iterations"]
        clip = _positive(doc.get("epsilon"))
        if clip is not None:
            out["clip_epsilon"] = clip
        beta = doc.get("beta")
        if isinstance(beta, int | float) and not isinstance(beta, bool):
            out["kl_coef"] = float(beta)
        steps = doc.get("max_steps")
        if isinstance(steps, int) and steps > 0:
            out["planned_steps"] = steps
        if isinstance(doc.get("lr_scheduler_type"), str):
            out["lr_schedule"] = doc["lr_scheduler_type"]
    model = _text(texts, "model_config")
    if model is not None:
        vocab = _json(model).get("vocab_size")
        if isinstance(vocab, int) and vocab > 0:
            out["vocab_size"] = vocab
    return out
