"""The shipped registry: loads, covers what the issue requires, and its generated docs are current."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import registry
from rlvitals.build import generated_files

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = [
    "raw_reward", "shaped_reward", "reward_before_norm", "reward_after_norm", "reward_component",
    "episodic_return", "advantage_mean", "advantage_std", "policy_entropy", "entropy_coef",
    "entropy_gradient", "policy_kl", "ref_kl", "kl_coef", "kl_clip_ratio", "clip_fraction",
    "policy_loss", "value_loss", "explained_variance", "td_error", "q_consistency", "grad_norm",
    "grad_norm_clipped", "learning_rate", "response_length_mean", "response_length_max",
    "response_length_p90", "episode_length", "length_reward", "refusal_rate", "rm_score", "eval_score",
    "reward_density", "reward_std", "reward_consistency", "samples_per_second", "rollout_throughput",
    "generation_tps", "training_tps", "mfu", "gpu_utilization", "gpu_memory_used", "update_time",
    "data_loading_time", "log_flush_latency", "padding_ratio", "image_sample_ratio", "global_step",
    "nonfinite_count",
]  # fmt: skip
REQUIRED_TERMS = [
    "return", "baseline", "gae", "group_size", "reference_model", "trust_region_clipping",
    "reward_shaping", "reward_normalization", "ema_smoothing", "training_step", "episode",
    "on_policy_vs_off_policy", "reward_hacking", "entropy_collapse", "model_flops_utilization",
    "tokens_per_second",
]  # fmt: skip
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_shipped_registry_loads(builtin: registry.Registry) -> None:
    assert len(builtin.metrics) >= len(REQUIRED)
    assert len(builtin.terms) >= 30
    assert len(builtin.rules) >= 8


@pytest.mark.parametrize("metric_id", REQUIRED)
def test_required_metric_is_declared(builtin: registry.Registry, metric_id: str) -> None:
    metric = builtin.metric(metric_id)
    assert metric.definition.en and CJK.search(metric.definition.zh)
    assert CJK.search(metric.title.zh)


def test_required_terms_exist_with_links_to_metrics(builtin: registry.Registry) -> None:
    ids = {t.id for t in builtin.terms}
    missing = [t for t in REQUIRED_TERMS if t not in ids]
    assert not missing
    assert all(t.explains or t.related_terms for t in builtin.terms)


def test_entropy_coefficient_is_a_hyperparameter_never_an_entropy(
    builtin: registry.Registry,
) -> None:
    coef = builtin.metric("entropy_coef")
    assert coef.kind == "hyperparameter"
    assert coef.unit != "nats"
    assert builtin.resolve("train/ent_coef", "sb3").metric == "entropy_coef"


def test_seed_numbers_are_the_defaults_an_unknown_action_space_widens_them(
    builtin: registry.Registry,
) -> None:
    entropy = builtin.metric("policy_entropy")
    # no absolute entropy band holds for every action space (the seeds' early 0.8-2.5 nats is
    # out of reach of a two-action policy, issue 35): where the space is unknown the band is
    # relative to ln n, and not judged while n is unknown
    assert entropy.bands is not None and entropy.bands.basis == "max_entropy"
    assert entropy.bands_for(None) == entropy.bands
    # the unknown space's alerts are the discrete ones at its smallest space, two actions: any
    # larger space's fire sooner, so not knowing the space never narrows the reading (not for
    # tokens: published healthy LLM runs sit below them, calibration/llm_corpus)
    unscoped = {
        a.severity: (a.threshold, a.for_steps)
        for a in entropy.alerts
        if a.action_space is not None and "unknown" in a.action_space
    }
    assert unscoped["warning"][0] == pytest.approx(0.1 * math.log(2), abs=1e-4)
    assert unscoped["critical"][0] == pytest.approx(0.02 * math.log(2), abs=1e-4)
    assert all(steps >= 2 for _, steps in unscoped.values())
    assert not any(
        a.basis == "absolute" and a.action_space is not None and "token" in a.action_space
        for a in entropy.alerts
    )
    discrete = {
        a.severity: (a.threshold, a.basis)
        for a in entropy.alerts
        if a.action_space == ("discrete",)
    }
    assert discrete == {"warning": (0.1, "max_entropy"), "critical": (0.02, "max_entropy")}
    clip = builtin.metric("clip_fraction")
    assert (clip.limits.min, clip.limits.max) == (0, 1)


def test_every_number_has_a_reason(builtin: registry.Registry) -> None:
    for m in builtin.metrics:
        assert len(m.limits.reason) >= 8, m.id
        for a in m.alerts:
            assert len(a.reason) >= 8, (m.id, a)
        for stage in ("early", "mid", "late"):
            band = m.band_at(stage)  # type: ignore[arg-type]
            assert band is None or len(band.reason) >= 8, (m.id, stage)


def test_rules_name_only_registered_metrics(builtin: registry.Registry) -> None:
    for rule in builtin.rules:
        for metric in rule.metrics:
            assert builtin.has_metric(metric)
        assert CJK.search(rule.reading.zh) and rule.actions


def test_generated_docs_are_committed_and_current(builtin: registry.Registry) -> None:
    for rel, content in generated_files(builtin).items():
        if rel.startswith("docs/"):
            path = ROOT / rel
            assert path.exists(), f"{rel} missing: run `rlvitals build`"
            assert path.read_text(encoding="utf-8") == content, (
                f"{rel} is stale: run `rlvitals build`"
            )
