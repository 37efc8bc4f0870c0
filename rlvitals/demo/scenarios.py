"""Failure scenarios: each takes a healthy trajectory and injects one failure at a declared step.

A scenario declares what must flag the failure (a rule id from `rules.yaml`, a metric's alert
from `metrics.yaml` by metric id and severity, or an event kind the exporter writes) and the
number of steps after the injection within which that must happen. Injection sizes are taken
from the registry's own thresholds where it has them (e.g. KL blows up to twice the critical
KL alert), so a changed registry moves the scenarios with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from registry import Metric, Registry

from .simulate import FloatArray, SimConfig, SimEvent, Trajectory, clip_from_kl, simulate

__all__ = ["SCENARIOS", "Expectation", "Scenario", "build", "scenario_named"]

ExpectKind = Literal["rule", "alert", "event"]
Inject = Callable[[Registry, Trajectory, int, np.random.Generator], Trajectory]


@dataclass(frozen=True)
class Expectation:
    """What must flag the failure: a rule id, an alert (metric id + severity) or an event kind."""

    kind: ExpectKind
    id: str
    severity: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "alert":
            return f"alert {self.id} ({self.severity})"
        return f"{self.kind} {self.id}"


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    at: float  # injection point as a fraction of the run
    expect: Expectation | None
    tolerance: int  # steps after the injection within which `expect` must be met
    inject: Inject | None = None

    def injection_step(self, steps: int) -> int:
        return int(self.at * steps)

    @property
    def min_steps(self) -> int:
        """The shortest run in which the injection and its detection window both fit."""
        room = max(1e-9, 1.0 - self.at)
        return max(200, math.ceil((self.tolerance + 50) / room))


def _ramp(n: int, start: int, length: int) -> FloatArray:
    """0 before `start`, rising smoothly to 1 over `length` steps, 1 after."""
    x = np.clip((np.arange(n, dtype=np.float64) - start) / max(1, length), 0.0, 1.0)
    out: FloatArray = x * x * (3.0 - 2.0 * x)
    return out


def _after(n: int, start: int) -> FloatArray:
    out: FloatArray = np.maximum(0.0, np.arange(n, dtype=np.float64) - start)
    return out


def _threshold(metric: Metric, condition: str, severity: str) -> float:
    for alert in metric.alerts:
        if alert.condition == condition and alert.severity == severity:
            return alert.threshold
    raise ValueError(f"{metric.id} declares no {severity} alert '{condition}'")


def _entropy_collapse(
    reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator
) -> Trajectory:
    n = tr.steps.size
    v = tr.values
    s = _ramp(n, a, 30)
    entropy_metric = reg.metric("policy_entropy")
    floor = 0.8 * _threshold(entropy_metric, "below", "critical")
    ent = v["policy_entropy"]
    target = np.log(floor / ent[a])
    entropy = ent * np.exp(target * s)
    kl_typical = float(np.median(v["policy_kl"][:a]))
    kl = v["policy_kl"] * (1.0 + 3.0 * s)
    raw = v["raw_reward"].copy()
    raw[a:] = raw[a] + 0.02 * rng.standard_normal(n - a)
    return tr.with_values(
        {
            "policy_entropy": entropy,
            "policy_kl": kl,
            "clip_fraction": clip_from_kl(reg.metric("clip_fraction"), kl, kl_typical),
            "raw_reward": raw,
            "shaped_reward": raw + v["kl_penalty_reward"],
        }
    )


def _kl_blowup(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    n = tr.steps.size
    v = tr.values
    peak = 2.0 * _threshold(reg.metric("policy_kl"), "above", "critical")
    kl_typical = float(np.median(v["policy_kl"][:a]))
    s = _ramp(n, a, 25)
    kl = np.exp(np.log(v["policy_kl"]) * (1.0 - s) + np.log(peak) * s)
    kl = kl * np.exp(rng.normal(0.0, 0.1, n) * s)
    raw = v["raw_reward"] - 0.3 * _ramp(n, a + 20, 200) * (v["raw_reward"][a] - v["raw_reward"][0])
    return tr.with_values(
        {
            "policy_kl": kl,
            "clip_fraction": clip_from_kl(reg.metric("clip_fraction"), kl, kl_typical),
            "grad_norm": v["grad_norm"] * (1.0 + 6.0 * s),
            "value_loss": v["value_loss"] * (1.0 + 3.0 * s),
            "raw_reward": raw,
            "shaped_reward": raw + v["kl_penalty_reward"],
        }
    )


# Numbers a NaN loss poisons: losses, gradients and everything computed from the new policy.
_POISONED = (
    "value_loss",
    "policy_loss",
    "grad_norm",
    "policy_kl",
    "policy_entropy",
    "explained_variance",
    "clip_fraction",
)


def _nan_loss(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    n = tr.steps.size
    v = tr.values
    spike = _ramp(n, a - 8, 8)
    changed: dict[str, FloatArray] = {"grad_norm": v["grad_norm"] * (1.0 + 30.0 * spike)}
    for name in _POISONED:
        arr = changed.get(name, v[name]).copy()
        arr[a:] = math.nan
        changed[name] = arr
    raw = v["raw_reward"].copy()
    raw[a:] = v["raw_reward"][0] + 0.05 * rng.standard_normal(n - a)
    changed["raw_reward"] = raw
    changed["shaped_reward"] = raw + v["kl_penalty_reward"]
    text = "loss became NaN (fp16 overflow); training continued without a finite update"
    return tr.with_values(changed).with_events(SimEvent(a, "exception", text))


def _reward_hacking(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    v = tr.values
    n = tr.steps.size
    level = abs(float(v["raw_reward"][a]))
    gap = 0.0012 * level * _after(n, a)
    raw = v["raw_reward"] - gap
    return tr.with_values(
        {
            "raw_reward": raw,
            "shaped_reward": v["shaped_reward"] + 1.2 * gap,
            "policy_entropy": v["policy_entropy"] * (1.0 - 0.25 * _ramp(n, a, 400)),
        }
    )


def _length_hacking(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    v = tr.values
    n = tr.steps.size
    raw = v["raw_reward"].copy()
    raw[a:] = float(np.mean(raw[a - 20 : a])) + 0.01 * rng.standard_normal(n - a)
    grow = 1.0 + 0.0012 * _after(n, a)
    length = v["response_length_mean"] * grow
    cap = float(tr.config.get("max_new_tokens", np.inf))
    trunc = v["truncation_rate"] + 0.2 * _ramp(n, a + 100, 400)
    return tr.with_values(
        {
            "raw_reward": raw,
            "shaped_reward": raw + v["kl_penalty_reward"],
            "response_length_mean": length,
            "response_length_max": np.minimum(cap, v["response_length_max"] * grow),
            "truncation_rate": np.clip(trunc, 0.0, 1.0),
            "generation_tps": v["samples_per_second"] * length,
        }
    )


def _refusal_rise(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    v = tr.values
    n = tr.steps.size
    high = _threshold(reg.metric("refusal_rate"), "above", "critical")
    rate = v["refusal_rate"] + (high - float(np.median(v["refusal_rate"][:a]))) * _ramp(n, a, 300)
    return tr.with_values({"refusal_rate": np.clip(rate, 0.0, 1.0)})


def _resume(reg: Registry, tr: Trajectory, a: int, rng: np.random.Generator) -> Trajectory:
    """The job dies at step `a` and restarts from the last checkpoint saved before it: the steps
    after that checkpoint are logged a second time by a new process."""
    ckpts = [e.step for e in tr.events if e.kind == "checkpoint" and e.step < a]
    if not ckpts:
        raise ValueError(f"no checkpoint before step {a} to resume from")
    ckpt = max(ckpts)
    n = tr.steps.size
    order = np.concatenate([np.arange(a + 1), np.arange(ckpt + 1, n)]).astype(np.int64)
    crash = SimEvent(a, "exception", "worker lost (preempted); job restarted from checkpoint")
    return tr.with_order(order).with_events(crash).injected_at(ckpt + 1)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("healthy", "Healthy PPO run", 1.0, None, 0),
    Scenario(
        "entropy_collapse",
        "Entropy collapses while policy KL and clip fraction climb",
        0.5,
        Expectation("rule", "entropy_cliff_with_kl_and_clip_rising"),
        150,
        _entropy_collapse,
    ),
    Scenario(
        "kl_blowup",
        "Learning rate too high: policy KL blows through the trust region",
        0.6,
        Expectation("rule", "kl_near_trust_region_edge"),
        60,
        _kl_blowup,
    ),
    Scenario(
        "nan_loss",
        "Loss turns NaN after a gradient spike",
        0.7,
        Expectation("alert", "nonfinite_count", "critical"),
        0,
        _nan_loss,
    ),
    Scenario(
        "reward_hacking",
        "Shaped reward climbs while raw task reward falls",
        0.45,
        Expectation("rule", "shaped_reward_up_raw_reward_down"),
        250,
        _reward_hacking,
    ),
    Scenario(
        "length_hacking",
        "Responses keep growing while raw reward is flat",
        0.4,
        Expectation("rule", "length_rising_raw_reward_flat"),
        600,
        _length_hacking,
    ),
    Scenario(
        "refusal_rise",
        "Refusal rate climbs while reward still rises",
        0.35,
        Expectation("rule", "refusal_rising_with_reward"),
        150,
        _refusal_rise,
    ),
    Scenario(
        "resume",
        "Job restarted from a checkpoint: steps replayed",
        0.55,
        Expectation("event", "resume"),
        0,
        _resume,
    ),
)


def scenario_named(name: str) -> Scenario:
    for sc in SCENARIOS:
        if sc.name == name:
            return sc
    known = ", ".join(s.name for s in SCENARIOS)
    raise KeyError(f"no demo scenario {name!r}; choose one of {known}")


def build(reg: Registry, sc: Scenario, cfg: SimConfig) -> Trajectory:
    """The scenario's trajectory: a healthy run with the failure injected."""
    _check_expectation(reg, sc)
    healthy = simulate(reg, cfg)
    if sc.inject is None:
        return healthy
    a = sc.injection_step(cfg.steps)
    rng = np.random.default_rng([cfg.seed, 1 + SCENARIOS.index(sc)])
    out = sc.inject(reg, healthy, a, rng)
    return out if out.injection is not None else out.injected_at(a)


def _check_expectation(reg: Registry, sc: Scenario) -> None:
    e = sc.expect
    if e is None:
        return
    if e.kind == "rule":
        reg.rule(e.id)
    elif e.kind == "alert":
        metric = reg.metric(e.id)
        if not any(a.severity == e.severity for a in metric.alerts):
            raise ValueError(f"scenario {sc.name}: {e.id} has no {e.severity} alert")
