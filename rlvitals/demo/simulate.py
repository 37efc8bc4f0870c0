"""Healthy PPO/GRPO-like training trajectories, pure numpy, shaped by the registry.

Every level that the registry declares a healthy band for is drawn from that band: entropy walks
down through the stage bands (it sits where adjacent stage bands overlap at each boundary), the
clip fraction sits at the centre of its band and moves with policy KL, MFU at the centre of its
band. What the registry leaves to the task (reward scale, sequence lengths, throughput) is a
parameter of `SimConfig`. The couplings are the ones the registry's `related` lists describe:
shaped reward = raw reward minus the KL penalty (so it tracks raw reward), clip fraction follows
policy KL, reference KL grows as the policy drifts, value loss falls while explained variance
rises, response length grows with reward early on.

The run config handed to the exporter carries `clip_epsilon`, `kl_coef`, `warmup_steps` and
`stage_boundaries` scaled to the run length, so the stage bands apply to a short demo as they
would to a long run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from registry import Band, Metric, Registry
from registry.diagnosis import basis_scale

__all__ = [
    "SimConfig",
    "SimEvent",
    "Trajectory",
    "band_centre",
    "simulate",
    "stage_knots",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# The metrics the simulator draws. Only ids: levels, bands and thresholds come from the registry.
SIMULATED: tuple[str, ...] = (
    "raw_reward",
    "shaped_reward",
    "kl_penalty_reward",
    "reward_std",
    "advantage_mean",
    "advantage_std",
    "policy_entropy",
    "policy_kl",
    "ref_kl",
    "kl_coef",
    "clip_fraction",
    "policy_loss",
    "value_loss",
    "explained_variance",
    "grad_norm",
    "learning_rate",
    "response_length_mean",
    "response_length_max",
    "truncation_rate",
    "refusal_rate",
    "samples_per_second",
    "generation_tps",
    "step_time",
    "mfu",
    "gpu_utilization",
    "gpu_memory_used",
)


@dataclass(frozen=True)
class SimConfig:
    """What the registry does not fix: the task's scales. Steps are training steps (one log each)."""

    steps: int = 2000
    seed: int = 0
    clip_epsilon: float = 0.2
    kl_coef: float = 0.05
    learning_rate: float = 1e-6
    reward_start: float = 0.1
    reward_end: float = 0.8
    reward_noise: float = 0.02
    length_start: float = 220.0
    length_growth: float = 0.35
    max_new_tokens: int = 1024
    ref_kl_end: float = 6.0
    value_loss_start: float = 0.6
    grad_norm_start: float = 1.2
    samples_per_second: float = 64.0
    batch_size: int = 256
    gpu_memory_gib: float = 58.0
    gpu_utilization: float = 86.0
    checkpoint_every: int = 250
    learning_fraction: float = 0.2  # time constant of learning, as a fraction of the run
    # the simulated policy's action space, said in its config as a real run's would be: entropy's
    # bands are relative to ln n for a discrete policy, and a run that does not say its action
    # space has its entropy band unjudged (issue 35); 12 actions put ln n near the seeds' 2.5 nats
    n_actions: int = 12

    def __post_init__(self) -> None:
        if self.steps < 100:
            raise ValueError(f"steps={self.steps}: the demo needs at least 100 steps")

    @property
    def stage_boundaries(self) -> dict[str, int]:
        return {"early_end": max(1, self.steps // 5), "mid_end": max(2, self.steps * 3 // 5)}

    @property
    def warmup_steps(self) -> int:
        return max(1, self.steps // 40)

    def run_config(self) -> dict[str, Any]:
        """The hyperparameters a real run would pass to `exporter.init(config=...)`."""
        return {
            "algorithm": "ppo",
            "action_space": "discrete",
            "n_actions": self.n_actions,
            "clip_epsilon": self.clip_epsilon,
            "kl_coef": self.kl_coef,
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "max_new_tokens": self.max_new_tokens,
            "warmup_steps": self.warmup_steps,
            "stage_boundaries": self.stage_boundaries,
            "seed": self.seed,
            "simulated": True,
        }


@dataclass(frozen=True)
class SimEvent:
    step: int
    kind: str
    text: str
    fields: Mapping[str, str | int | float | bool] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Per-step values (NaN where a value is non-finite) and events, in logging order.

    `order` lists indices into `steps` in the order they are logged; a resume logs some twice.
    """

    steps: IntArray
    values: Mapping[str, FloatArray]
    events: tuple[SimEvent, ...]
    config: Mapping[str, Any]
    order: IntArray
    injection: int | None = None

    def with_values(self, values: Mapping[str, FloatArray]) -> Trajectory:
        merged = dict(self.values)
        merged.update(values)
        return replace(self, values=merged)

    def with_events(self, *events: SimEvent) -> Trajectory:
        ordered = tuple(sorted((*self.events, *events), key=lambda e: e.step))
        return replace(self, events=ordered)

    def with_order(self, order: IntArray) -> Trajectory:
        return replace(self, order=order)

    def injected_at(self, step: int) -> Trajectory:
        return replace(self, injection=step)

    def rows(self, index: int) -> dict[str, float]:
        """What one `log()` call sends for the step at `index` (NaN included: the exporter
        records it as a health event)."""
        return {name: float(v[index]) for name, v in self.values.items()}


def band_centre(band: Band, open_fraction: float = 0.4) -> float:
    """A typical healthy value of a band: geometric centre of a positive band, arithmetic centre
    otherwise; `open_fraction` of the one edge of a half-open band."""
    lo, hi = band.low, band.high
    if lo is not None and hi is not None:
        return math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2.0
    if hi is not None:
        return hi * open_fraction
    if lo is not None:
        return lo / open_fraction
    return 1.0


def _join(a: Band, b: Band) -> float:
    """A value healthy in two adjacent stages: the centre of the overlap of their bands."""
    lows = [x for x in (a.low, b.low) if x is not None]
    highs = [x for x in (a.high, b.high) if x is not None]
    lo = max(lows) if lows else None
    hi = min(highs) if highs else None
    if lo is not None and hi is not None:
        return (lo + hi) / 2.0 if lo <= hi else math.sqrt(lo * hi)
    return band_centre(Band(lo, hi, ""))


def stage_knots(
    metric: Metric,
    early_end: int,
    mid_end: int,
    last: int,
    config: Mapping[str, Any] | None = None,
) -> tuple[IntArray, FloatArray]:
    """(step, level) knots that keep a metric inside the stage bands the diagnosis reads for a run
    of `config` (its action space picks the bands, its basis their scale: ln n for a discrete
    policy's entropy): the centre of the early band at step 0, the overlap of adjacent bands at
    each boundary, the centre of the late band at the end."""
    cfg = config or {}
    action_space = cfg.get("action_space")
    bands = metric.bands_for(action_space if isinstance(action_space, str) else None)
    if bands is None:
        raise ValueError(f"{metric.id} has no stage bands to follow")
    scale = basis_scale(bands.basis, cfg, None)
    if scale is None:
        raise ValueError(
            f"{metric.id}'s bands are relative to {bands.basis}, which the run config does not give"
        )
    early, mid, late = bands.early, bands.mid, bands.late
    if early is None or mid is None or late is None:
        raise ValueError(f"{metric.id} lacks a band for one of the stages")
    steps = np.array([0, early_end, mid_end, last], dtype=np.int64)
    levels = np.array(
        [band_centre(early), _join(early, mid), _join(mid, late), band_centre(late)],
        dtype=np.float64,
    )
    return steps, levels * scale


def _band(metric: Metric) -> Band:
    if metric.bands is None:
        raise ValueError(f"{metric.id} declares no healthy band")
    for band in (metric.bands.mid, metric.bands.early, metric.bands.late):
        if band is not None:
            return band
    raise ValueError(f"{metric.id} declares no healthy band")


def _lognormal(rng: np.random.Generator, n: int, sigma: float) -> FloatArray:
    out: FloatArray = np.exp(rng.normal(-0.5 * sigma * sigma, sigma, n))
    return out


def _require(reg: Registry) -> dict[str, Metric]:
    missing = [m for m in SIMULATED if not reg.has_metric(m)]
    if missing:
        raise ValueError(f"the registry lacks metrics the demo simulates: {', '.join(missing)}")
    return {m: reg.metric(m) for m in SIMULATED}


def simulate(reg: Registry, cfg: SimConfig) -> Trajectory:
    """One healthy run of `cfg.steps` steps."""
    m = _require(reg)
    rng = np.random.default_rng(cfg.seed)
    n = cfg.steps
    t = np.arange(n, dtype=np.int64)
    tf = t.astype(np.float64)
    progress = 1.0 - np.exp(-tf / (cfg.learning_fraction * n))  # 0 -> ~1: how much was learned
    bounds = cfg.stage_boundaries
    v: dict[str, FloatArray] = {}

    raw = cfg.reward_start + (cfg.reward_end - cfg.reward_start) * progress
    v["raw_reward"] = raw + rng.normal(0.0, cfg.reward_noise, n)
    v["reward_std"] = (0.35 - 0.15 * progress) * _lognormal(rng, n, 0.05)

    knots_x, knots_y = stage_knots(
        m["policy_entropy"], bounds["early_end"], bounds["mid_end"], n - 1, cfg.run_config()
    )
    entropy = np.exp(np.interp(tf, knots_x.astype(np.float64), np.log(knots_y)))
    v["policy_entropy"] = entropy * _lognormal(rng, n, 0.02)

    # Updates shrink as the policy sharpens; KL stays well inside its band.
    kl_level = band_centre(_band(m["policy_kl"]))
    kl = kl_level * (0.7 + 0.3 * entropy / entropy[0]) * _lognormal(rng, n, 0.15)
    v["policy_kl"] = kl
    v["clip_fraction"] = clip_from_kl(m["clip_fraction"], kl, kl_level)

    ref = cfg.ref_kl_end * progress**1.3 + 0.02
    v["ref_kl"] = ref * _lognormal(rng, n, 0.05)
    v["kl_coef"] = np.full(n, cfg.kl_coef)
    v["kl_penalty_reward"] = -cfg.kl_coef * v["ref_kl"]
    v["shaped_reward"] = v["raw_reward"] + v["kl_penalty_reward"] + rng.normal(0.0, 0.005, n)

    v["advantage_mean"] = rng.normal(0.0, 0.03, n)
    v["advantage_std"] = (1.0 - 0.2 * progress) * _lognormal(rng, n, 0.05)
    v["policy_loss"] = -0.02 * (1.0 - 0.5 * progress) + rng.normal(0.0, 0.004, n)
    v["value_loss"] = cfg.value_loss_start * (0.25 + 0.75 * np.exp(-tf / (0.15 * n)))
    v["value_loss"] = v["value_loss"] * _lognormal(rng, n, 0.08)
    v["explained_variance"] = np.clip(0.1 + 0.78 * progress + rng.normal(0.0, 0.03, n), -1.0, 0.99)
    v["grad_norm"] = cfg.grad_norm_start * (0.6 + 0.4 * np.exp(-tf / (0.3 * n)))
    v["grad_norm"] = v["grad_norm"] * _lognormal(rng, n, 0.15)
    warm = cfg.warmup_steps
    v["learning_rate"] = cfg.learning_rate * np.minimum(1.0, (tf + 1.0) / warm)

    length = cfg.length_start * (1.0 + cfg.length_growth * progress)
    v["response_length_mean"] = length * _lognormal(rng, n, 0.03)
    v["response_length_max"] = np.minimum(
        cfg.max_new_tokens, 2.6 * length * _lognormal(rng, n, 0.05)
    )
    v["truncation_rate"] = np.clip(0.01 * _lognormal(rng, n, 0.3), 0.0, 1.0)
    v["refusal_rate"] = np.clip(0.02 * _lognormal(rng, n, 0.15), 0.0, 1.0)

    sps = cfg.samples_per_second * _lognormal(rng, n, 0.03)
    v["samples_per_second"] = sps
    v["generation_tps"] = sps * v["response_length_mean"]
    v["step_time"] = cfg.batch_size / sps
    v["mfu"] = band_centre(_band(m["mfu"])) * _lognormal(rng, n, 0.03)
    v["gpu_utilization"] = np.clip(cfg.gpu_utilization + rng.normal(0.0, 2.0, n), 0.0, 100.0)
    v["gpu_memory_used"] = cfg.gpu_memory_gib + rng.normal(0.0, 0.3, n)

    events = [SimEvent(warm, "warmup_end", f"learning rate warm-up ended at step {warm}")]
    # a short run saves about eight checkpoints (`--steps 100`: one every 12 steps), so the
    # `resume` scenario has one to restart from wherever its failure is injected
    every = max(1, min(cfg.checkpoint_every, n // 8))
    events += [
        SimEvent(s, "checkpoint", f"saved checkpoint ckpt-{s}", {"path": f"ckpt-{s}"})
        for s in range(every, n, every)
    ]
    return Trajectory(t, v, tuple(events), cfg.run_config(), t.copy())


def clip_from_kl(clip_metric: Metric, kl: FloatArray, kl_typical: float) -> FloatArray:
    """Clip fraction moving with policy KL: the band's low edge at KL 0, the band's centre at the
    typical KL, capped below 1."""
    band = _band(clip_metric)
    low = band.low or 0.0
    slope = (band_centre(band) - low) / kl_typical
    out: FloatArray = np.clip(low + slope * kl, 0.0, 0.95)
    return out
