"""Translation of one log call: which name wins when two mean the same metric, and what values
come out."""

from __future__ import annotations

import numpy as np
import pytest

import registry
from exporter.counts import RunCounters
from exporter.translate.steps import Translator, to_number


def _translator(reg: registry.Registry, framework: str | None = "cleanrl") -> Translator:
    return Translator(
        reg, RunCounters(), run="r", rank=None, policy="strict", framework=framework, last_step=None
    )


def _kl(rows: list[tuple[object, ...]]) -> list[object]:
    return [row[6] for row in rows if row[5] == "policy_kl"]


@pytest.mark.parametrize(
    "values",
    [
        {"losses/approx_kl": 0.01, "losses/old_approx_kl": 0.002},
        {"losses/old_approx_kl": 0.002, "losses/approx_kl": 0.01},
    ],
)
def test_two_names_for_one_metric_in_one_call_keep_the_alias_the_registry_prefers(
    reg: registry.Registry, values: dict[str, float]
) -> None:
    # CleanRL logs its k3 estimate (approx_kl) and k1 (old_approx_kl); the registry lists k3 first
    rows, _ = _translator(reg).log(5, values, 1.0, None)
    assert _kl(rows) == [0.01]


def test_a_canonical_id_wins_over_any_alias_in_the_same_call(reg: registry.Registry) -> None:
    rows, _ = _translator(reg).log(5, {"losses/approx_kl": 0.01, "policy_kl": 0.03}, 1.0, None)
    assert _kl(rows) == [0.03]


def test_the_same_name_logged_again_at_a_step_overwrites_it(reg: registry.Registry) -> None:
    translator = _translator(reg)
    first, _ = translator.log(5, {"losses/old_approx_kl": 0.02}, 1.0, None)
    again, _ = translator.log(5, {"losses/old_approx_kl": 0.04}, 1.0, None)
    assert _kl(first) == [0.02] and _kl(again) == [0.04]


@pytest.mark.parametrize("value", [np.float64(0.25), np.float32(0.25), 1, True, np.int64(3)])
def test_numbers_of_any_numeric_type_become_plain_floats(value: object) -> None:
    number = to_number(value)
    assert number is not None and number.__class__ is float and number == float(value)  # type: ignore[arg-type]
