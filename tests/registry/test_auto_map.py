"""Which unknown names are read as a metric by themselves (issue 35: high-confidence mappings
applied by default), at the boundaries `registry/auto_map.py` states: the name's leaf is a
spelling the registry has for exactly one metric, no earlier word says something else, it is not
a bare abbreviation, no framework spells the whole name, its value is inside the metric's
physical limits, the run does not already log that metric, and `--map TAG=` keeps it as logged.
Expectations come from the registry's own aliases and limits, not from the module's output."""

from __future__ import annotations

import math

import pytest

import registry
from registry import AutoMap, UnknownName
from registry.quantity import words


@pytest.fixture
def rules(builtin: registry.Registry) -> AutoMap:
    return AutoMap.of(builtin)


def _leaf_of(builtin: registry.Registry, metric: str, leaf: str) -> str:
    """`leaf`, checked to be the last segment of one of `metric`'s aliases in metrics.yaml."""
    keys = [a.key for a in builtin.metric(metric).aliases]
    assert any(k.rsplit("/", 1)[-1] == leaf for k in keys), keys
    return leaf


def test_a_known_leaf_under_a_projects_own_prefix_is_read_as_its_metric(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    leaf = _leaf_of(builtin, "policy_kl", "approx_kl")
    name = f"myproj/{leaf}"
    with pytest.raises(UnknownName):
        builtin.resolve(name)  # not a spelling the registry has: only its leaf is
    assert rules.metric_for(name, 0.01) == "policy_kl"
    # the words count, not their order or separators
    assert rules.metric_for("myproj/kl-approx", 0.01) == "policy_kl"


def test_the_value_decides_at_the_metrics_physical_limits(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    limits = builtin.metric("clip_fraction").limits
    assert limits.min is not None and limits.max is not None
    name = f"mine/{_leaf_of(builtin, 'clip_fraction', 'clipfrac')}"
    assert rules.metric_for(name, limits.max) == "clip_fraction"
    assert rules.metric_for(name, limits.min) == "clip_fraction"
    assert rules.metric_for(name, math.nextafter(limits.max, math.inf)) is None
    assert rules.metric_for(name, math.nextafter(limits.min, -math.inf)) is None
    assert rules.metric_for(name, math.nan) is None
    assert rules.metric_for(name, None) is None  # no value seen: the name alone is an offer


def test_a_prefix_word_of_another_metric_keeps_the_name_as_logged(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    # `critic` is a word of the critic's metrics (its grad norm, its learning rate), not of the
    # policy's KL: a critic's approx_kl is not the policy's
    assert any("critic" in words(m.id) for m in builtin.metrics)
    assert "critic" not in words(builtin.metric("policy_kl").title.en)
    assert rules.metric_for("critic/approx_kl", 0.01) is None
    # a word no metric uses says nothing
    assert rules.metric_for("zzproj/approx_kl", 0.01) == "policy_kl"


def test_a_bare_abbreviation_is_never_read_by_itself(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    # `eps` spells samples per second for one framework and is many loops' epsilon
    leaf = _leaf_of(builtin, "samples_per_second", "eps")
    assert rules.metric_for(f"loop/{leaf}", 0.1) is None
    assert rules.metric_for("loop/samples_per_second", 120.0) == "samples_per_second"


def test_a_leaf_that_spells_two_metrics_is_only_an_offer(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    # `grad_norm` is the policy's gradient norm for some frameworks, the critic's for others
    spelled = {
        m.id
        for m in builtin.metrics
        for a in m.aliases
        if set(words(a.key.rsplit("/", 1)[-1])) == {"grad", "norm"}
    } | {m.id for m in builtin.metrics if set(words(m.id)) == {"grad", "norm"}}
    assert len(spelled) > 1, spelled
    assert rules.metric_for("mine/grad_norm", 1.0) is None


def test_a_name_some_framework_spells_is_left_to_the_registry(
    builtin: registry.Registry, rules: AutoMap
) -> None:
    # SB3's value loss is scaled on its way to the metric: reading it as is would drop that
    assert builtin.resolve("train/value_loss", "sb3").metric == "value_loss"
    assert rules.metric_for("train/value_loss", 1.0) is None


def test_a_metric_the_run_already_logs_is_not_written_twice(rules: AutoMap) -> None:
    assert rules.metric_for("myproj/approx_kl", 0.01, logged={"policy_kl"}) is None


def test_kept_as_logged_wins(builtin: registry.Registry) -> None:
    (kept,) = registry.parse_kept(["myproj/approx_kl="])
    assert AutoMap.of(builtin.keeping([kept])).metric_for("myproj/approx_kl", 0.01) is None
    assert registry.parse_map(["myproj/approx_kl="], builtin) == ()
    assert registry.map_record(builtin.keeping([kept])) == {"myproj/approx_kl": None}
