"""Fixtures for the diagnosis engine: the mini registry plus rules and bands built in Python."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

import registry
from registry.model import Band, Bands, Condition, Rule, Text

RuleFactory = Callable[..., Rule]


def _rule(
    rule_id: str,
    *conditions: tuple[str, str, str, float],
    severity: str = "warning",
    window: int = 40,
    min_points: int = 8,
    for_steps: int = 1,
) -> Rule:
    return Rule(
        id=rule_id,
        title=Text(en=f"Rule {rule_id}", zh=f"规则 {rule_id}"),
        severity=severity,  # type: ignore[arg-type]
        window=window,
        conditions=tuple(Condition(m, s, op, v) for m, s, op, v in conditions),
        reading=Text(en=f"{rule_id} held.", zh=f"{rule_id} 成立。"),
        actions=(Text(en=f"Act on {rule_id}.", zh=f"处理 {rule_id}。"),),
        reason="test rule built in Python",
        min_points=min_points,
        for_steps=for_steps,
    )


@pytest.fixture
def make_rule() -> RuleFactory:
    return _rule


@pytest.fixture
def with_rules(reg: registry.Registry) -> Callable[..., registry.Registry]:
    """The mini registry with its rules replaced."""

    def build(*rules: Rule) -> registry.Registry:
        return dataclasses.replace(reg, rules=tuple(rules))

    return build


@pytest.fixture
def with_bands(reg: registry.Registry) -> Callable[[str, Bands], registry.Registry]:
    """The mini registry with one metric's bands replaced."""

    def build(metric_id: str, bands: Bands) -> registry.Registry:
        metrics = tuple(
            dataclasses.replace(m, bands=bands) if m.id == metric_id else m for m in reg.metrics
        )
        return dataclasses.replace(reg, metrics=metrics)

    return build


def band(low: float | None, high: float | None) -> Band:
    return Band(low, high, "test band")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
