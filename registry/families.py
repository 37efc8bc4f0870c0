"""Who logs a metric: the algorithm families it applies to (`applies_to`) and the frameworks
that spell it (its aliases' `framework`), with the names a reader knows them by.

A chart whose metrics no selected run logs names these (grafana/dashboards_gen/panels.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Metric
from .resolve import FRAMEWORKS

__all__ = ["ANY_FAMILY", "FAMILY_NAMES", "FRAMEWORK_NAMES", "families", "frameworks"]

ANY_FAMILY = "all"
"""`applies_to: [all]`: every algorithm family."""

FAMILY_NAMES: dict[str, dict[str, str]] = {
    "ppo": {"en": "PPO", "zh": "PPO"},
    "grpo": {"en": "GRPO", "zh": "GRPO"},
    "rloo": {"en": "RLOO", "zh": "RLOO"},
    "a2c": {"en": "A2C", "zh": "A2C"},
    "reinforce": {"en": "REINFORCE", "zh": "REINFORCE"},
    "rlhf_ppo": {"en": "RLHF-PPO", "zh": "RLHF-PPO"},
    "dpo": {"en": "DPO", "zh": "DPO"},
    "sac": {"en": "SAC", "zh": "SAC"},
    "td3": {"en": "TD3", "zh": "TD3"},
    "dqn": {"en": "DQN", "zh": "DQN"},
    "off_policy": {"en": "off-policy", "zh": "异策略"},
    "on_policy": {"en": "on-policy", "zh": "同策略"},
    "llm": {"en": "LLM", "zh": "LLM"},
}
"""Each family of the schema's `applies_to` enum (but `all`), as a reader names it."""

FRAMEWORK_NAMES: dict[str, str] = {
    "sb3": "SB3",
    "cleanrl": "CleanRL",
    "trl": "TRL",
    "openrlhf": "OpenRLHF",
    "verl": "verl",
    "rllib": "RLlib",
}
"""Each framework of `FRAMEWORKS`, as its project spells it."""


def families(metrics: Iterable[Metric]) -> tuple[str, ...]:
    """The families the metrics apply to, in the schema's order, or `(ANY_FAMILY,)` when one of
    them applies to every family."""
    ids = {f for m in metrics for f in m.applies_to}
    if ANY_FAMILY in ids:
        return (ANY_FAMILY,)
    return tuple(f for f in FAMILY_NAMES if f in ids)


def frameworks(metrics: Iterable[Metric]) -> tuple[str, ...]:
    """The frameworks with a spelling of one of the metrics, in `FRAMEWORKS` order."""
    ids = {a.framework for m in metrics for a in m.aliases}
    return tuple(f for f in FRAMEWORKS if f in ids)
