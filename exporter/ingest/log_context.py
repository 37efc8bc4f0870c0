"""What a run's logs say about its setting: run-config keys for the diagnosis's run context.

The event files' text summaries are parsed per framework (TRL's `args` / `model_config` JSON,
CleanRL's `hyperparameters` markdown table); the logged keys tell the rest (SB3 logs `train/std`
only for Gaussian policies, `train/ent_coef` only for SAC). The user's `--config` / `--set`
override all of it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..sources.console_text import strip_ansi
from ..sources.lines import BadLine
from ..sources.verl_console import parse_verl

__all__ = [
    "INFERRED",
    "console_context",
    "console_lines",
    "context_from_logs",
    "parse_assignment",
    "tracker_context",
]


INFERRED = ("framework", "algorithm", "action_space", "step_source")
"""Run-config keys an import infers (from which names a log holds, or by mapping what it says:
verl's advantage estimator to an algorithm, TRL's group size to a token action space) rather than
reads as the log words them; what the run page marks "inferred" (`CONFIG_SOURCES`)."""


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
    framework: str | None,
    keys: Iterable[str],
    texts: Mapping[str, str],
    *,
    tracker: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run-config keys (see `registry.diagnosis.context.CONTEXT_KEYS`) the logs establish;
    `tracker`: the config a tracker run was given (MLflow params, W&B config)."""
    names = set(keys)
    out: dict[str, Any] = {}
    if tracker:
        out.update(tracker_context(tracker))
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
    console = _text(texts, "console")
    if console is not None:
        for key, value in console_context(console).items():
            out.setdefault(key, value)
    model = _text(texts, "model_config")
    if model is not None:
        vocab = _json(model).get("vocab_size")
        if isinstance(vocab, int) and vocab > 0:
            out["vocab_size"] = vocab
    return out


# A launcher's prefix on a console line: Ray's `(TaskRunner pid=123, ip=10.0.0.2) `,
# torchrun's `[rank0]: ` / `[default0]:`.
_RAY = r"\((?:[\w.\-]+ )?pid=\d+(?:, ip=[\d.]+)?\)"
_PREFIX = re.compile(rf"^\s*(?:{_RAY}|\[(?:rank|default)\d+\]:)\s?")
# another process's output run into a line (Ray forwards several processes' writes)
_RUN_IN = re.compile(_RAY)
_VERL_TOTAL = re.compile(r"Total training steps:\s*([\d,]+)")
_HF_TOTAL = re.compile(r"Total optimization steps\s*=\s*([\d,]+)")
_ASSIGNED = re.compile(
    r"""['"]?\b(num_generations|beta|epsilon|max_completion_length|max_steps|num_iterations"""
    r"""|rloo_k|reward_clip_range)\b['"]?\s*[=:]\s*([-+\w.]+)"""
)
# verl's algorithm.adv_estimator -> the family's algorithm (verl/trainer/ppo/core_algos.py:
# AdvantageEstimator; gae needs a critic, the others are critic-free group or batch baselines)
_VERL_ALGORITHMS = {
    "gae": "PPO",
    "grpo": "GRPO",
    "rloo": "RLOO",
    "reinforce_plus_plus": "REINFORCE",
    "reinforce_plus_plus_baseline": "REINFORCE",
    "remax": "REINFORCE",
}


def console_lines(text: str) -> list[tuple[str, str]]:
    """A console log's lines as (launcher prefix, the rest), without colour codes."""
    out = []
    for raw in text.splitlines():
        line = strip_ansi(raw)
        match = _PREFIX.match(line)
        out.append(("", line) if match is None else (match.group().strip(), line[match.end() :]))
    return out


def console_context(text: str) -> dict[str, Any]:
    """Run-config keys from what a console log printed before its metrics: verl's resolved
    config (pprinted as a Python dict, verl/trainer/main_ppo.py) and its `Total training
    steps`; the HF Trainer's `Total optimization steps` banner; a TRL config's fields as a
    script prints them (`GRPOConfig(num_generations=8, beta=0.04, ...)` or `beta: 0.04`)."""
    pairs = console_lines(text)
    lines = [line for _, line in pairs]
    out: dict[str, Any] = {}
    config = _verl_config(pairs)
    if config is None and any("'actor_rollout_ref'" in line for line in lines):
        config = _verl_fields(lines)  # a dump other output broke: its unambiguous fields
    if config is not None:
        out.update(_verl_context(config))
    decimals = _verl_decimals(lines)
    if decimals is not None:
        out["value_decimals"] = decimals
    for line in lines:
        total = _VERL_TOTAL.search(line) or _HF_TOTAL.search(line)
        if total is not None:
            steps = int(total.group(1).replace(",", ""))
            if steps > 0:
                out.setdefault("planned_steps", steps)
        if config is None:
            for key, raw in _ASSIGNED.findall(line):
                out.update(_trl_field(key, _number(raw)))
        if "namespace(" in line.lower():
            out.update(_openrlhf_args(line))
    return out


# OpenRLHF prints its arguments once at the start (`strategy.print(args)`): an argparse
# `Namespace(...)` of flat names before v0.10, a nested `namespace(actor=namespace(...), ...)`
# since (openrlhf/cli/train_ppo_ray.py, openrlhf/utils/config.py); the fields that set the
# reading, by either spelling.
_ORLHF_ESTIMATOR = re.compile(
    r"(?:advantage_estimator=|advantage=namespace\([^()]*?\bestimator=)'(\w+)'"
)
_ORLHF_FIELDS = re.compile(
    r"\b(n_samples_per_prompt|init_kl_coef|init_coef|eps_clip|generate_max_len|max_new_tokens)"
    r"=([-+\w.]+)"
)
# --algo.advantage.estimator -> the family's algorithm (openrlhf/trainer/ppo_utils/
# experience_maker.py: gae needs a critic; group_norm is GRPO's group normalisation)
_ORLHF_ALGORITHMS = {
    "gae": "PPO",
    "group_norm": "GRPO",
    "dr_grpo": "GRPO",
    "rloo": "RLOO",
    "reinforce": "REINFORCE",
    "reinforce_baseline": "REINFORCE",
}


def _openrlhf_args(line: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    estimator = _ORLHF_ESTIMATOR.search(line)
    if estimator is not None and estimator.group(1) in _ORLHF_ALGORITHMS:
        out["algorithm"] = _ORLHF_ALGORITHMS[estimator.group(1)]
        out["action_space"] = "token"
    for key, raw in _ORLHF_FIELDS.findall(line):
        value = _number(raw)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if key == "n_samples_per_prompt" and value >= 2:
            out["group_size"] = int(value)
        elif key in ("init_kl_coef", "init_coef") and value >= 0:
            out["kl_coef"] = float(value)
        elif key == "eps_clip" and value > 0:
            out["clip_epsilon"] = float(value)
        elif key in ("generate_max_len", "max_new_tokens") and value > 0:
            out["max_length"] = int(value)
    return out


def _verl_config(lines: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The first printed dict literal that is a verl config (it has `actor_rollout_ref` or
    `algorithm` at its top level), read with `ast.literal_eval` (never executed). Its lines
    are the ones with the prefix of its first line: other processes' output interleaves."""
    block_lines: list[str] = []
    owner = None
    depth = 0
    for prefix, line in lines:
        if owner is None:
            if not line.lstrip().startswith("{'"):
                continue
            owner, block_lines, depth = prefix, [], 0
        elif prefix != owner:
            continue
        cut = _RUN_IN.search(line)
        if cut is not None:
            line = line[: cut.start()]
        block_lines.append(line)
        depth += _depth_change(line)
        if depth <= 0:
            block = "\n".join(block_lines)
            owner = None
            if "'actor_rollout_ref'" not in block and "'algorithm'" not in block:
                continue
            try:
                doc = ast.literal_eval(block.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(doc, dict) and ("actor_rollout_ref" in doc or "algorithm" in doc):
                return doc
    return None


_VERL_FIELDS = {
    "adv_estimator": "algorithm.adv_estimator",
    "clip_ratio": "actor_rollout_ref.actor.clip_ratio",
    "use_kl_loss": "actor_rollout_ref.actor.use_kl_loss",
    "kl_loss_coef": "actor_rollout_ref.actor.kl_loss_coef",
    "use_kl_in_reward": "algorithm.use_kl_in_reward",
    "max_response_length": "data.max_response_length",
    "total_training_steps": "trainer.total_training_steps",
}
_FIELD = re.compile(r"'(" + "|".join(_VERL_FIELDS) + r")':\s*('[^']*'|[-\w.]+)")


def _verl_fields(lines: list[str]) -> dict[str, Any]:
    """The fields of a verl config dump whose names say where they sit, read one by one."""
    doc: dict[str, Any] = {}
    for line in lines:
        for name, raw in _FIELD.findall(line):
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                continue
            *parents, leaf = _VERL_FIELDS[name].split(".")
            node = doc
            for part in parents:
                node = node.setdefault(part, {})
            node.setdefault(leaf, value)
    return doc


def _depth_change(line: str) -> int:
    depth, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
    return depth


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def _verl_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"action_space": "token"}
    estimator = _get(doc, "algorithm.adv_estimator")
    if isinstance(estimator, str) and estimator in _VERL_ALGORITHMS:
        out["algorithm"] = _VERL_ALGORITHMS[estimator]
    n = _get(doc, "actor_rollout_ref.rollout.n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        out["group_size"] = n
    clip = _positive(_get(doc, "actor_rollout_ref.actor.clip_ratio"))
    if clip is not None:
        out["clip_epsilon"] = clip
    if _get(doc, "actor_rollout_ref.actor.use_kl_loss") is True:
        coef = _get(doc, "actor_rollout_ref.actor.kl_loss_coef")
    elif _get(doc, "algorithm.use_kl_in_reward") is False:
        coef = 0.0  # neither a KL loss nor a KL penalty in the reward
    else:  # in the reward (older verl always put it there)
        coef = _get(doc, "algorithm.kl_ctrl.kl_coef")
    if isinstance(coef, int | float) and not isinstance(coef, bool) and coef >= 0:
        out["kl_coef"] = float(coef)
    length = _get(doc, "data.max_response_length")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        out["max_length"] = length
    updates = _verl_updates_per_batch(doc)
    if updates is not None:
        out["updates_per_batch"] = updates
    steps = _get(doc, "trainer.total_training_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        out["planned_steps"] = steps
    return out


def _verl_decimals(lines: list[str]) -> int | None:
    """The decimals every value of the first verl metric line is printed with, when they are
    all alike: verl up to v0.4 rounds each to 3 (`actor/ppo_kl:0.000`), so a value is known
    only to half the last digit; None for Python reprs (`np.float64(...)`, v0.5 on) and
    exponents, which are exact."""
    for line in lines:
        try:
            found = parse_verl(line)
        except BadLine:  # (a line at no step: the import names it)
            continue
        if found is None:
            continue
        body = line[line.index("step:") :]
        places: set[int] = set()
        for pair in body.split(" - ")[1:]:
            raw = pair.rpartition(":")[2].strip()
            if "np." in raw or "e" in raw.lower():
                return None
            _, dot, frac = raw.partition(".")
            if dot and frac.isdigit():
                places.add(len(frac))
        return places.pop() if len(places) == 1 else None
    return None


def _verl_updates_per_batch(doc: Mapping[str, Any]) -> int | None:
    """Optimizer updates on each rollout batch: the actor splits the batch into mini-batches
    of `ppo_mini_batch_size` prompts and steps once per mini-batch, `ppo_epochs` times
    (verl/workers/actor/dp_actor.py, `update_policy`); None unless all three are printed."""
    values = [
        _get(doc, key)
        for key in (
            "data.train_batch_size",
            "actor_rollout_ref.actor.ppo_mini_batch_size",
            "actor_rollout_ref.actor.ppo_epochs",
        )
    ]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return None
    batch, mini, epochs = values
    return int(epochs) * max(1, math.ceil(int(batch) / int(mini)))


def _trl_field(key: str, value: Any) -> dict[str, Any]:
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None:
        return {}
    if key == "num_generations" and number >= 2:
        return {"group_size": int(number), "action_space": "token"}
    if key == "rloo_k" and number >= 2:
        return {"group_size": int(number), "algorithm": "RLOO", "action_space": "token"}
    if key == "beta" and number >= 0:
        return {"kl_coef": float(number)}
    if key == "epsilon" and number > 0:
        return {"clip_epsilon": float(number)}
    if key == "max_completion_length" and number > 0:
        return {"max_length": int(number)}
    if key == "max_steps" and number > 0:
        return {"planned_steps": int(number)}
    if key == "num_iterations" and number >= 1:
        return {"num_iterations": int(number)}
    return {}


def _nested(config: Mapping[str, Any]) -> dict[str, Any]:
    """A tracker's config as nested dicts: MLflow params are flat text (`beta` -> "0.04"; verl
    logs its config flattened, `algorithm/adv_estimator` or `algorithm.adv_estimator`), a W&B
    config nested JSON values."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        *parents, leaf = re.split(r"[./]", key) if isinstance(key, str) else [str(key)]
        node = out
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node.setdefault(leaf, _number(value) if isinstance(value, str) else value)
    return out


_TRL_FIELDS = (
    "num_generations",
    "beta",
    "epsilon",
    "max_completion_length",
    "max_steps",
    "num_iterations",
    "rloo_k",
)


def tracker_context(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run-config keys from the config a tracker run was given: verl's config (its
    `algorithm.adv_estimator`, `actor_rollout_ref.rollout.n`, `actor_rollout_ref.actor.clip_ratio`,
    KL settings, `data.max_response_length`: what its config dump gives) or a TRL trainer's
    arguments (`num_generations`, `beta`, `epsilon`, `max_completion_length`, `max_steps`, ...:
    what the Hugging Face Trainer's W&B and MLflow callbacks log, `args.to_dict()`)."""
    doc = _nested(config)
    if "actor_rollout_ref" in doc or "algorithm" in doc:
        return _verl_context(doc)
    out: dict[str, Any] = {}
    for key in _TRL_FIELDS:
        if key in doc:
            out.update(_trl_field(key, doc[key]))
    if "num_generations" in doc or "rloo_k" in doc:
        # RLOOConfig alone has `reward_clip_range` (TRL 1.x trl/trainer/rloo_config.py)
        rloo = "rloo_k" in doc or "reward_clip_range" in doc
        out["algorithm"] = "RLOO" if rloo else "GRPO"
        out["action_space"] = "token"
    return out
