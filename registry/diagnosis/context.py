"""The run context: what kind of run the engine is reading, as one typed object.

A number means something only in its setting (DESIGN.md, "Diagnosis principles"): entropy's
scale is set by the action space, a step is an env timestep in SB3/CleanRL and an optimizer
update in TRL, GRPO with one iteration has a clip ratio of 0 by construction. `run_context()`
reads the setting from the run config (which the user and the importers fill: `--config`,
`--set`, the event files' text summaries) and, for what the config does not say, infers it from
the framework, which metrics were logged and their values, saying where each field came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..families import FRAMEWORK_NAMES
from .stats import Series

__all__ = [
    "ACTION_SPACES",
    "ALGORITHMS",
    "CONTEXT_KEYS",
    "DEFAULT_UPDATE_METRICS",
    "RunContext",
    "printed_resolution",
    "run_context",
    "zero_by_construction",
]

ActionSpace = Literal["discrete", "continuous", "token"]
StepUnit = Literal["env_steps", "updates"]
ACTION_SPACES: tuple[str, ...] = ("discrete", "continuous", "token")
ALGORITHMS: tuple[str, ...] = (
    "PPO",
    "A2C",
    "REINFORCE",
    "DQN",
    "QR-DQN",
    "SAC",
    "TD3",
    "DDPG",
    "TD3/DDPG",
    "GRPO",
    "RLOO",
)
Family = Literal["on_policy", "off_policy", "llm"]
# Which vital signs a family has (DESIGN.md: "every family has its own vital signs"): on-policy
# learners KL, clip fraction and entropy; off-policy learners a TD/critic loss, Q values and an
# exploration phase; LLM trainers group statistics and lengths.
_FAMILY: dict[str, Family] = {
    "PPO": "on_policy",
    "A2C": "on_policy",
    "REINFORCE": "on_policy",
    "DQN": "off_policy",
    "QR-DQN": "off_policy",
    "SAC": "off_policy",
    "TD3": "off_policy",
    "DDPG": "off_policy",
    "TD3/DDPG": "off_policy",
    "GRPO": "llm",
    "RLOO": "llm",
}
# run-config keys the context reads (beside clip_epsilon / n_actions, read since before it)
CONTEXT_KEYS: tuple[str, ...] = (
    "framework",
    "algorithm",
    "num_iterations",
    "updates_per_batch",
    "value_decimals",
    "step_unit",
    "planned_steps",
    "action_space",
    "n_actions",
    "action_dims",
    "vocab_size",
    "group_size",
    "max_length",
    "clip_epsilon",
    "kl_coef",
    "lr_schedule",
    "learning_starts",
    "env",
    "random_return",
    "task_reward",
)
_UPDATE_FRAMEWORKS = ("trl", "openrlhf", "verl")
_ENV_FRAMEWORKS = ("sb3", "cleanrl", "rllib")
# a uniform policy over n actions logs ln n before learning: within 2 % of it names n
_LN_N_TOLERANCE = 0.02
_LR_ANNEALED = 0.01  # a learning rate under 1 % of its peak has annealed to ~0


@dataclass(frozen=True)
class RunContext:
    """Everything about the run that changes how a value is read; None where not known.

    `cadence` is measured: the median step difference between consecutive logged points of the
    update metrics. `sources` names, per field, where it came from ("config", "inferred: ...").
    """

    framework: str | None = None
    algorithm: str | None = None
    num_iterations: int | None = None
    updates_per_batch: int | None = None
    """Optimizer updates made on each rollout batch (verl: PPO epochs x mini-batches)."""
    step_unit: StepUnit | None = None
    cadence: float | None = None
    points: int = 0
    planned_steps: int | None = None
    action_space: ActionSpace | None = None
    n_actions: int | None = None
    action_dims: int | None = None
    vocab_size: int | None = None
    group_size: int | None = None
    """Completions sampled per prompt (GRPO/RLOO's group; verl's rollout.n)."""
    max_length: int | None = None
    """The generation limit in tokens (TRL's max_completion_length, verl's
    data.max_response_length): a response this long was cut, not finished."""
    clip_epsilon: float | None = None
    kl_coef: float | None = None
    lr_schedule: str | None = None
    lr_annealed: bool = False
    learning_starts: int | None = None
    first_update: int | None = None
    exploration_end: int | None = None
    env: str | None = None
    random_return: float | None = None
    task_reward: str | None = None
    """The reward part (`reward_component/<name>`) that is the task's own score; the others are
    shaping or bonuses."""
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def family(self) -> Family | None:
        """on_policy, off_policy or llm (an LLM trainer: a token action space)."""
        if self.action_space == "token":
            return "llm"
        return _FAMILY.get(self.algorithm or "")

    @property
    def max_entropy(self) -> float | None:
        """ln n for a discrete action space of known size."""
        if self.action_space == "discrete" and self.n_actions and self.n_actions >= 2:
            return math.log(self.n_actions)
        return None

    @property
    def by_construction(self) -> Mapping[str, tuple[str, str]]:
        """Metrics this run's setup makes 0 whatever its health (see `zero_by_construction`)."""
        return zero_by_construction(
            {
                "algorithm": self.algorithm,
                "num_iterations": self.num_iterations,
                "updates_per_batch": self.updates_per_batch,
            }
        )

    def describe(self, lang: str = "en") -> str:
        """One line: "read as: SB3 PPO, 2 discrete actions, one point per 512 env steps, clip 0.2"
        (`lang="zh"`: the same in Chinese)."""
        zh = lang == "zh"
        head = " ".join(
            p
            for p in (_FRAMEWORK_NAMES.get(self.framework or "", self.framework), self.algorithm)
            if p
        )
        parts = [head or ("框架与算法未知" if zh else "unknown framework and algorithm")]
        if self.num_iterations is not None and self.algorithm in ("GRPO", "RLOO", "PPO"):
            parts[0] += f" (μ={self.num_iterations})"
        if self.action_space == "discrete":
            if zh:
                parts.append(f"{self.n_actions} 个离散动作" if self.n_actions else "离散动作")
            else:
                parts.append(
                    f"{self.n_actions} discrete actions" if self.n_actions else "discrete actions"
                )
        elif self.action_space == "continuous":
            if zh:
                parts.append(f"{self.action_dims} 维连续动作" if self.action_dims else "连续动作")
            else:
                dims = f"{self.action_dims}-d " if self.action_dims else ""
                parts.append(f"{dims}continuous actions")
        elif self.action_space == "token":
            if zh:
                parts.append(f"词元（词表 {self.vocab_size}）" if self.vocab_size else "词元")
            else:
                parts.append(
                    f"tokens (vocabulary {self.vocab_size})" if self.vocab_size else "tokens"
                )
        units = (
            {"env_steps": "环境步", "updates": "次更新"}
            if zh
            else {"env_steps": "env steps", "updates": "updates"}
        )
        unit = units.get(self.step_unit or "", "步" if zh else "steps")
        if self.cadence is not None:
            if zh:
                every = f"{self.cadence:,.0f} " if self.cadence >= 1.5 else ""
                parts.append(f"每 {every}{unit}一个点")
            elif self.cadence >= 1.5:
                parts.append(f"one point per {self.cadence:,.0f} {unit}")
            else:
                parts.append(f"one point per {unit.removesuffix('s')}")
        if self.planned_steps:
            parts.append(
                f"计划 {self.planned_steps:,} {unit}"
                if zh
                else f"planned {self.planned_steps:,} {unit}"
            )
        if self.learning_starts is not None and self.family == "off_policy":
            parts.append(
                f"第 {self.learning_starts:,} 步开始学习"
                if zh
                else f"learning from step {self.learning_starts:,}"
            )
        if self.group_size:
            parts.append(f"每组 {self.group_size} 个回复" if zh else f"groups of {self.group_size}")
        if self.max_length:
            parts.append(
                f"最大长度 {self.max_length:,} 词元" if zh else f"max length {self.max_length:,}"
            )
        if self.env:
            parts.append(f"{'环境' if zh else 'env'} {self.env}")
        if self.clip_epsilon is not None:
            parts.append(f"{'裁剪' if zh else 'clip'} {self.clip_epsilon:g}")
        if self.kl_coef is not None:
            parts.append(f"{'KL 系数' if zh else 'KL coef'} {self.kl_coef:g}")
        if self.lr_schedule:
            annealed = "（已退火至约 0）" if zh else " (annealed to ~0)"
            parts.append(
                f"{'学习率' if zh else 'lr'} {self.lr_schedule}"
                + (annealed if self.lr_annealed else "")
            )
        return ("解读依据：" + "，".join(parts)) if zh else "read as: " + ", ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "framework": self.framework,
            "algorithm": self.algorithm,
            "num_iterations": self.num_iterations,
            "updates_per_batch": self.updates_per_batch,
            "step_unit": self.step_unit,
            "cadence": self.cadence,
            "points": self.points,
            "planned_steps": self.planned_steps,
            "action_space": self.action_space,
            "n_actions": self.n_actions,
            "action_dims": self.action_dims,
            "vocab_size": self.vocab_size,
            "group_size": self.group_size,
            "max_length": self.max_length,
            "clip_epsilon": self.clip_epsilon,
            "kl_coef": self.kl_coef,
            "lr_schedule": self.lr_schedule,
            "lr_annealed": self.lr_annealed,
            "family": self.family,
            "learning_starts": self.learning_starts,
            "first_update": self.first_update,
            "exploration_end": self.exploration_end,
            "env": self.env,
            "random_return": self.random_return,
            "task_reward": self.task_reward,
            "sources": dict(self.sources),
            "text": self.describe(),
            "text_zh": self.describe("zh"),
        }


_FRAMEWORK_NAMES = FRAMEWORK_NAMES
# The built-in registry's `Registry.update_metrics()`, for a caller without a registry (a test
# holds the two equal): the metrics whose points are the run's updates.
DEFAULT_UPDATE_METRICS: tuple[str, ...] = (
    "advantage_mean",
    "advantage_std",
    "returns_mean",
    "policy_entropy",
    "action_std",
    "policy_kl",
    "ref_kl",
    "clip_fraction",
    "policy_loss",
    "value_loss",
    "explained_variance",
    "value_mean",
    "td_error",
    "q_value",
    "q_consistency",
    "total_loss",
    "grad_norm",
    "grad_norm_clipped",
    "critic_grad_norm",
)


def printed_resolution(config: Mapping[str, Any]) -> float | None:
    """How finely the run's values are known when its log printed them rounded
    (`value_decimals`: verl up to v0.4 prints 3): half the last printed digit. A rule level
    finer than that cannot be told from what was printed (`0.000` is anything under 0.0005)."""
    decimals = _int(config.get("value_decimals"))
    if decimals is None or not 0 <= decimals <= 12:
        return None
    return 0.5 * 10.0**-decimals


def log_starts_mid_run(planned_steps: Any, steps: np.ndarray) -> bool:
    """Whether a run's log begins after the run did: its first logged step is past a tenth of
    the planned length and past two of the log's own intervals (a run resumed from a checkpoint
    into a new log, a log kept from mid-run). What the run learned before its log began is not
    in it, so whether it ever improved, and the share of its gain it has lost since its best,
    are unknown: the one decision the card's readings and the rules read."""
    planned = _int(planned_steps)
    if planned is None or planned <= 0 or steps.size < 2:
        return False
    first = int(steps[0])
    interval = max(1, int(steps[1]) - first)
    return first > planned / 10 and first > 2 * interval


def zero_by_construction(config: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Metrics a run's setup makes 0 whatever its health, each with why (English, Chinese):
    the one decision the cards and every rule read (a rule over such a metric is unknown, never
    an alarm). The ratio of the new policy to the one that sampled the batch is 1 until the
    first update on that batch: with one update per batch (verl: one PPO epoch over one
    mini-batch) the policy KL and the clip fraction are measured before it, so both are 0; with
    GRPO/RLOO's single iteration the clip fraction is (TRL)."""
    out: dict[str, tuple[str, str]] = {}
    updates = _int(config.get("updates_per_batch"))
    if updates == 1:
        why = (
            "one optimizer update per rollout batch: the policy KL and the clip fraction are "
            "measured before it, against the policy that sampled the batch, so both are 0 by "
            "construction; not judged",
            "每个 rollout 批次只做一次优化器更新：策略 KL 与 clip 比例都在这次更新之前、对着采样该批次的"
            "策略测得，按构造为 0；不作判断",
        )
        out["policy_kl"] = why
        out["clip_fraction"] = why
    algorithm = config.get("algorithm")
    if algorithm in ("GRPO", "RLOO") and _int(config.get("num_iterations")) == 1:
        out.setdefault(
            "clip_fraction",
            (
                f"{algorithm} with num_iterations 1: each batch is used for one update, the ratio "
                "is 1 at every token and the clip fraction is 0 by construction; not judged",
                f"{algorithm} 且 num_iterations 为 1：每批数据只更新一次，比率恒为 1，clip 比例按构造为 0；"
                "不作判断",
            ),
        )
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _last(series: Mapping[str, Series], metric: str) -> float | None:
    s = series.get(metric)
    if s is None:
        return None
    f = s.finite()
    return float(f.values[-1]) if len(f) else None


def _cadence(
    series: Mapping[str, Series], updates: Sequence[str]
) -> tuple[float | None, int, int | None]:
    """The median step gap of the update metric logged most often, its point count, and the
    first step any update metric was logged at (None: no update logged yet)."""
    logged = [series[m] for m in updates if m in series and len(series[m])]
    first = min((int(s.steps[0]) for s in logged), default=None)
    ranked = sorted(logged, key=len, reverse=True) or [
        series[m] for m in sorted(series) if len(series[m])
    ]
    for s in ranked:
        if len(s) >= 2:
            return float(np.median(np.diff(s.steps))), len(s), first
    return None, len(ranked[0]) if ranked else 0, first


def run_context(
    config: Mapping[str, Any] | None,
    series: Mapping[str, Series] | None = None,
    update_metrics: Sequence[str] = DEFAULT_UPDATE_METRICS,
    random_returns: Mapping[str, float] | None = None,
) -> RunContext:
    """The context of a run from its config, completed by inference from its series.
    `update_metrics` are the registry's (`Registry.update_metrics()`); `random_returns` the
    measured return of a uniformly random policy by env id (`registry.random_returns()`)."""
    cfg = dict(config or {})
    ser = dict(series or {})
    src: dict[str, str] = {}

    def given(key: str) -> Any:
        if key in cfg and cfg[key] is not None:
            src[key] = "config"
            return cfg[key]
        return None

    framework = given("framework")
    framework = framework if isinstance(framework, str) else None
    algorithm = given("algorithm")
    algorithm = algorithm.upper() if isinstance(algorithm, str) else None
    if algorithm is None:
        algorithm = _infer_algorithm(framework, ser)
        if algorithm is not None:
            src["algorithm"] = "inferred from the logged metrics"
    num_iterations = _int(given("num_iterations"))
    updates_per_batch = _int(given("updates_per_batch"))

    step_unit = given("step_unit")
    if step_unit not in ("env_steps", "updates"):
        step_unit = None
        if framework in _UPDATE_FRAMEWORKS:
            step_unit, src["step_unit"] = "updates", f"{framework} steps are optimizer updates"
        elif framework in _ENV_FRAMEWORKS:
            step_unit, src["step_unit"] = "env_steps", f"{framework} steps are env timesteps"

    cadence, points, first_update = _cadence(ser, update_metrics)
    if cadence is not None:
        src["cadence"] = "measured: median step gap between logged update points"
    if first_update is not None:
        src["first_update"] = "measured: the first step an update metric was logged at"
    learning_starts = _int(given("learning_starts"))
    if learning_starts is None and _FAMILY.get(algorithm or "") == "off_policy" and first_update:
        # SB3 and CleanRL log no update metric before learning starts: the first one marks it
        learning_starts = first_update
        src["learning_starts"] = f"inferred: the first update was logged at step {first_update:,}"
    exploration_end = _exploration_end(ser.get("exploration_rate"))
    if exploration_end is not None:
        src["exploration_end"] = "measured: epsilon reached its final value"
    task_reward = given("task_reward")
    task_reward = task_reward if isinstance(task_reward, str) else None
    env = given("env")
    if env is None:
        env = given("env_id")
    env = env if isinstance(env, str) else None
    random_return = _float(given("random_return"))
    if random_return is None and env is not None and env in (random_returns or {}):
        random_return = float((random_returns or {})[env])
        src["random_return"] = f"measured for {env} (registry/random_returns.yaml)"
    planned = _int(given("planned_steps"))

    action_space = given("action_space")
    # "unknown" in the config: judge the run without an action space, and do not infer one
    no_inference = action_space == "unknown"
    n_actions = _int(given("n_actions"))
    action_dims = _int(given("action_dims"))
    vocab = _int(given("vocab_size"))
    if action_space not in ACTION_SPACES:
        action_space = None
        if no_inference:
            pass
        elif n_actions is not None:
            action_space = "discrete"
            src["action_space"] = "config n_actions"
        elif framework in _UPDATE_FRAMEWORKS or algorithm in ("GRPO", "RLOO"):
            action_space, src["action_space"] = (
                "token",
                f"{framework or algorithm}: a language model",
            )
        elif "action_std" in ser or algorithm in ("SAC", "TD3", "DDPG", "TD3/DDPG"):
            action_space = "continuous"
            src["action_space"] = (
                "inferred: action std logged" if "action_std" in ser else f"{algorithm}"
            )
    if not no_inference and action_space in (None, "discrete") and n_actions is None:
        n = _n_from_first_entropy(ser.get("policy_entropy"))
        if n is not None and (action_space == "discrete" or framework in _ENV_FRAMEWORKS):
            action_space, n_actions = "discrete", n
            src["n_actions"] = f"inferred: first entropy ≈ ln {n} (a uniform initial policy)"
            src.setdefault("action_space", src["n_actions"])
    ent = ser.get("policy_entropy")
    if (
        not no_inference
        and action_space is None
        and ent is not None
        and bool(np.any(ent.finite().values < 0))
    ):
        # only a differential (Gaussian) entropy goes below zero
        action_space, src["action_space"] = "continuous", "inferred: negative entropy logged"

    clip = _float(given("clip_epsilon"))
    if clip is None:
        clip = _last(ser, "clip_epsilon")
        if clip is not None:
            src["clip_epsilon"] = "logged clip range"
    kl_coef = _float(given("kl_coef"))
    if kl_coef is None:
        kl_coef = _last(ser, "kl_coef")
        if kl_coef is not None:
            src["kl_coef"] = "logged KL coefficient"
    schedule = given("lr_schedule")
    schedule = schedule if isinstance(schedule, str) else None
    annealed = False
    lr = ser.get("learning_rate")
    if lr is not None and len(lr.finite()) >= 2:
        v = lr.finite().values
        peak = float(np.max(v))
        if schedule is None:
            schedule = "constant" if np.allclose(v, v[0], rtol=1e-6) else "decaying"
            src["lr_schedule"] = "inferred from the logged learning rate"
        annealed = peak > 0 and float(v[-1]) <= _LR_ANNEALED * peak
    return RunContext(
        framework=framework,
        algorithm=algorithm,
        num_iterations=num_iterations,
        updates_per_batch=updates_per_batch,
        step_unit=step_unit,
        cadence=cadence,
        points=points,
        planned_steps=planned,
        action_space=action_space,
        n_actions=n_actions,
        action_dims=action_dims,
        vocab_size=vocab,
        group_size=_int(given("group_size")),
        max_length=_int(given("max_length")),
        clip_epsilon=clip,
        kl_coef=kl_coef,
        lr_schedule=schedule,
        lr_annealed=annealed,
        learning_starts=learning_starts,
        first_update=first_update,
        exploration_end=exploration_end,
        env=env,
        random_return=random_return,
        task_reward=task_reward,
        sources=src,
    )


def _exploration_end(epsilon: Series | None) -> int | None:
    """The step an epsilon schedule reached the value it holds since (None: no schedule logged,
    or still falling at its last point: the run is still exploring)."""
    if epsilon is None:
        return None
    f = epsilon.finite()
    if len(f) < 2 or f.values[-1] != f.values[-2]:
        return None
    held = np.flatnonzero(f.values != f.values[-1])
    return int(f.steps[held[-1] + 1]) if held.size else int(f.steps[0])


def _infer_algorithm(framework: str | None, ser: Mapping[str, Series]) -> str | None:
    """The algorithm from the metrics a run logs (each family logs its own set, reference
    rl-metric-names.md §1-5): GRPO's group statistics, SAC's temperature, PPO's clip fraction,
    DQN's ε or a lone TD loss, a deterministic actor-critic's actor and critic losses with no
    entropy at all, A2C's policy loss and entropy without clipping."""
    if framework in _UPDATE_FRAMEWORKS:
        if "zero_std_group_fraction" in ser or "reward_std" in ser:
            return "GRPO"
        if "value_loss" in ser:
            return "PPO"  # an LLM trainer with a critic (TRL PPO, verl/OpenRLHF PPO)
        return None
    if "entropy_coef" in ser and "clip_fraction" not in ser and "policy_entropy" not in ser:
        return "SAC"
    if "clip_fraction" in ser or "clip_epsilon" in ser:
        return "PPO"
    if "exploration_rate" in ser:
        return "DQN"
    if framework not in _ENV_FRAMEWORKS:
        return None
    policy = "policy_entropy" in ser or "action_std" in ser
    critic = "value_loss" in ser or "q_value" in ser
    if "policy_loss" in ser:
        return "A2C" if policy else "TD3/DDPG" if critic else None
    if not policy and ("total_loss" in ser or "q_value" in ser or "td_error" in ser):
        return "DQN"  # a value-based learner: its TD loss is its whole loss
    return None


def _n_from_first_entropy(entropy: Series | None) -> int | None:
    if entropy is None:
        return None
    f = entropy.finite()
    if not len(f):
        return None
    first = float(f.values[0])
    if not 0.5 < first < 7.0:
        return None
    n = round(math.exp(first))
    # entropy only falls from uniform: the first point may be a little below ln n, never above
    if n >= 2 and math.log(n) * (1 - _LN_N_TOLERANCE) <= first <= math.log(n) * 1.001:
        return int(n)
    if n + 1 >= 2 and math.log(n + 1) * (1 - _LN_N_TOLERANCE) <= first <= math.log(n + 1) * 1.001:
        return int(n + 1)
    return None
