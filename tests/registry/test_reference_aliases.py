"""Every framework key in the reference's consolidated table (rl-metric-names.md §8) resolves right.

The test reads the table itself, so a key added to the reference without a decision here fails.
Each backticked token in a cell is either a key with its expected canonical field, or listed in
NOT_A_KEY with the reason it is not one (a config name, a wildcard, a note).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import registry

# Section 8 of the project reference rl-metric-names.md, copied into the repository (source named in
# the file) so a fresh clone checks the same table.
REFERENCE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "rl-metric-names-section8.md"
)
COLUMNS = ("sb3", "cleanrl", "trl", "trl", "verl", "openrlhf", "rllib")
# The table writes RLlib's module id as <mid>, reward-function names as {func} and devices as {i}.
SUBSTITUTE = {"<mid>": "default_policy", "{func}": "accuracy", "{i}": "0"}

# (key, framework) -> canonical field it must resolve to.
EXPECTED: dict[tuple[str, str], str] = {
    ("reward", "trl"): "raw_reward",
    ("rewards/accuracy/mean", "trl"): "reward_component/accuracy",
    ("objective/scores", "trl"): "raw_reward",
    ("env/reward_mean", "trl"): "raw_reward",
    ("ppo/mean_scores", "trl"): "raw_reward",
    ("critic/score/mean", "verl"): "raw_reward",
    ("reward", "openrlhf"): "raw_reward",
    ("rollout/reward_mean", "openrlhf"): "raw_reward",
    ("objective/rlhf_reward", "trl"): "shaped_reward",
    ("objective/non_score_reward", "trl"): "kl_penalty_reward",
    ("critic/rewards/mean", "verl"): "shaped_reward",
    ("return", "openrlhf"): "shaped_reward",
    ("rollout/ep_rew_mean", "sb3"): "episodic_return",
    ("eval/mean_reward", "sb3"): "eval_return",
    ("charts/episodic_return", "cleanrl"): "episodic_return",
    ("eval/episodic_return", "cleanrl"): "eval_return",
    ("env_runners/episode_return_mean", "rllib"): "episodic_return",
    ("episode_reward_mean", "rllib"): "episodic_return",
    ("reward_std", "trl"): "reward_std",
    ("rewards/accuracy/std", "trl"): "reward_component_std/accuracy",
    ("env/reward_std", "trl"): "reward_std",
    ("rollout/reward_std", "openrlhf"): "reward_std",
    ("group_reward_std", "openrlhf"): "reward_std",
    ("frac_reward_zero_std", "trl"): "zero_std_group_fraction",
    ("episode/advantage_mean", "cleanrl"): "advantage_mean",
    ("ppo/policy/advantages_mean", "trl"): "advantage_mean",
    ("critic/advantages/mean", "verl"): "advantage_mean",
    ("train/entropy_loss", "sb3"): "policy_entropy",
    ("losses/entropy", "cleanrl"): "policy_entropy",
    ("entropy", "trl"): "policy_entropy",
    ("policy/entropy_avg", "trl"): "policy_entropy",
    ("ppo/policy/entropy", "trl"): "policy_entropy",
    ("actor/entropy", "verl"): "policy_entropy",
    ("actor/entropy_loss", "verl"): "policy_entropy",
    ("entropy_loss", "openrlhf"): "policy_entropy",
    ("learners/default_policy/entropy", "rllib"): "policy_entropy",
    ("entropy", "rllib"): "policy_entropy",
    ("train/ent_coef", "sb3"): "entropy_coef",
    ("losses/alpha", "cleanrl"): "entropy_coef",
    ("charts/entropy_coefficient", "cleanrl"): "entropy_coef",
    ("entropy_coef", "trl"): "entropy_coef",
    ("learners/default_policy/curr_entropy_coeff", "rllib"): "entropy_coef",
    ("entropy_coeff", "rllib"): "entropy_coef",
    ("train/approx_kl", "sb3"): "policy_kl",
    ("losses/approx_kl", "cleanrl"): "policy_kl",
    ("losses/old_approx_kl", "cleanrl"): "policy_kl",
    ("policy/approxkl_avg", "trl"): "policy_kl",
    ("ppo/policy/approxkl", "trl"): "policy_kl",
    ("ppo/policy/policykl", "trl"): "policy_kl",
    ("actor/ppo_kl", "verl"): "policy_kl",
    ("ppo_kl", "openrlhf"): "policy_kl",
    ("learners/default_policy/mean_kl_loss", "rllib"): "policy_kl",
    ("kl", "rllib"): "policy_kl",
    ("kl", "trl"): "ref_kl",
    ("objective/kl", "trl"): "ref_kl",
    ("actor/kl_loss", "verl"): "ref_kl",
    ("actor/reward_kl_penalty", "verl"): "ref_kl",
    ("kl", "openrlhf"): "ref_kl",
    ("objective/kl_coef", "trl"): "kl_coef",
    ("actor/kl_coef", "verl"): "kl_coef",
    ("actor/reward_kl_penalty_coeff", "verl"): "kl_coef",
    ("learners/default_policy/curr_kl_coeff", "rllib"): "kl_coef",
    ("cur_kl_coeff", "rllib"): "kl_coef",
    ("train/clip_fraction", "sb3"): "clip_fraction",
    ("losses/clipfrac", "cleanrl"): "clip_fraction",
    ("clip_ratio/region_mean", "trl"): "clip_fraction",
    ("clip_ratio", "trl"): "clip_fraction",
    ("policy/clipfrac_avg", "trl"): "clip_fraction",
    ("ppo/policy/clipfrac", "trl"): "clip_fraction",
    ("actor/pg_clipfrac", "verl"): "clip_fraction",
    ("ppo_clip_ratio", "openrlhf"): "clip_fraction",
    ("train/policy_gradient_loss", "sb3"): "policy_loss",
    ("train/policy_loss", "sb3"): "policy_loss",
    ("train/actor_loss", "sb3"): "policy_loss",
    ("losses/policy_loss", "cleanrl"): "policy_loss",
    ("losses/actor_loss", "cleanrl"): "policy_loss",
    ("policy_loss", "trl"): "policy_loss",
    ("loss", "trl"): "total_loss",
    ("loss/policy_avg", "trl"): "policy_loss",
    ("ppo/loss/policy", "trl"): "policy_loss",
    ("actor/pg_loss", "verl"): "policy_loss",
    ("policy_loss", "openrlhf"): "policy_loss",
    ("learners/default_policy/policy_loss", "rllib"): "policy_loss",
    ("train/value_loss", "sb3"): "value_loss",
    ("train/loss", "sb3"): "total_loss",
    ("train/critic_loss", "sb3"): "value_loss",
    ("losses/value_loss", "cleanrl"): "value_loss",
    ("losses/td_loss", "cleanrl"): "value_loss",
    ("losses/qf_loss", "cleanrl"): "value_loss",
    ("loss/value_avg", "trl"): "value_loss",
    ("ppo/loss/value", "trl"): "value_loss",
    ("critic/vf_loss", "verl"): "value_loss",
    ("critic_loss", "openrlhf"): "value_loss",
    ("learners/default_policy/vf_loss", "rllib"): "value_loss",
    ("train/explained_variance", "sb3"): "explained_variance",
    ("losses/explained_variance", "cleanrl"): "explained_variance",
    ("ppo/val/var_explained", "trl"): "explained_variance",
    ("critic/vf_explained_var", "verl"): "explained_variance",
    ("learners/default_policy/vf_explained_var", "rllib"): "explained_variance",
    ("grad_norm", "trl"): "grad_norm",
    ("actor/grad_norm", "verl"): "grad_norm",
    ("critic/grad_norm", "verl"): "critic_grad_norm",
    ("actor_grad_norm", "openrlhf"): "grad_norm",
    ("critic_grad_norm", "openrlhf"): "critic_grad_norm",
    ("learners/default_policy/gradients_default_optimizer_global_norm", "rllib"): "grad_norm",
    ("grad_gnorm", "rllib"): "grad_norm",
    ("train/learning_rate", "sb3"): "learning_rate",
    ("charts/learning_rate", "cleanrl"): "learning_rate",
    ("learning_rate", "trl"): "learning_rate",
    ("lr", "trl"): "learning_rate",
    ("ppo/learning_rate", "trl"): "learning_rate",
    ("actor/lr", "verl"): "learning_rate",
    ("critic/lr", "verl"): "critic_learning_rate",
    ("actor_lr", "openrlhf"): "learning_rate",
    ("critic_lr", "openrlhf"): "critic_learning_rate",
    ("learners/default_policy/default_optimizer_learning_rate", "rllib"): "learning_rate",
    ("cur_lr", "rllib"): "learning_rate",
    ("rollout/ep_len_mean", "sb3"): "episode_length",
    ("charts/episodic_length", "cleanrl"): "episode_length",
    ("completions/mean_length", "trl"): "response_length_mean",
    ("completions/clipped_ratio", "trl"): "truncation_rate",
    ("tokens/responses_len_mean", "trl"): "response_length_mean",
    ("response_length/mean", "verl"): "response_length_mean",
    ("response_length/clip_ratio", "verl"): "truncation_rate",
    ("response_length", "openrlhf"): "response_length_mean",
    ("rollout/response_length_mean", "openrlhf"): "response_length_mean",
    ("rollout/truncated_rate", "openrlhf"): "truncation_rate",
    ("env_runners/episode_len_mean", "rllib"): "episode_length",
    ("time/fps", "sb3"): "samples_per_second",
    ("charts/SPS", "cleanrl"): "samples_per_second",
    ("step_time", "trl"): "step_time",
    ("train_samples_per_second", "trl"): "samples_per_second",
    ("eps", "trl"): "samples_per_second",
    ("perf/time_per_step", "verl"): "step_time",
    ("timing_s/step", "verl"): "step_time",
    ("timing/step_total", "openrlhf"): "step_time",
    ("env_runners/num_env_steps_sampled_lifetime_throughput", "rllib"): "samples_per_second",
    ("timing_per_token_ms/gen", "verl"): "generation_tps",
    ("timing/generation", "openrlhf"): "generation_time",
    ("perf/throughput", "verl"): "tokens_per_second_per_gpu",
    ("timing_per_token_ms/update_actor", "verl"): "training_tps",
    ("perf/mfu/actor", "verl"): "mfu",
    ("perf/gpu_util_percent0", "rllib"): "gpu_utilization",
    ("perf/max_memory_allocated_gb", "verl"): "gpu_memory_used",
    ("perf/max_memory_reserved_gb", "verl"): "gpu_memory_used",
    ("perf/vram_util_percent0", "rllib"): "gpu_memory_utilization",
}

# Tokens in the table that are not metric keys of that concept, and why.
NOT_A_KEY: dict[str, str] = {
    "use_kl_in_reward": "a verl config flag named in a note",
    "target_kl": "SB3 config value, noted as not logged",
    "beta": "TRL config value, noted as not logged",
    "kl_coef": "TRL PPO config value, noted as not logged",
    "clip_ratio/*": "a wildcard in a note about what TRL logs instead of policy KL",
    "sampling/*": "a wildcard naming the rollout-engine mismatch, not policy KL",
    "objective/entropy": "a per-sequence sum of sampled-token -log p, not an entropy (§9 c)",
    "/low_mean": "one-sided clip fraction (r < 1-eps, A < 0): a part of the clip fraction, not it",
    "/high_mean": "one-sided clip fraction (r > 1+eps, A > 0): a part of the clip fraction, not it",
    "actor/pg_clipfrac_lower": "dual-clip lower-bound fraction, a different quantity",
    "vf_loss_unclipped": "logged beside vf_loss in the same step; one value per step is kept (vf_loss)",
    "*_terminated_length": "a wildcard over several TRL keys",
    "val/num_eos_tokens": "a count of EOS tokens, not a length",
    "val-aux/...": "a wildcard over user validation keys",
    "learn()": "a function name in a note",
    "num_tokens": "cumulative token count, not a rate",
    "trl.trainer.utils.compute_mfu": "a helper function, not a logged key",
    "perf/mfu/critic": "the critic's MFU; one MFU per step is kept (the actor's)",
    "perf/mfu/actor_infer": "MFU of the log-prob forward pass; one MFU per step is kept (the actor's)",
}
# The refusal-rate row names a user reward function; no framework logs a refusal rate natively.
ROW_WITHOUT_KEYS = {"Refusal rate"}


def _table() -> list[tuple[str, str, str]]:
    section = REFERENCE.read_text(encoding="utf-8").split("## 8.")[1].split("\n## 9.")[0]
    found = []
    for line in section.splitlines():
        if not line.startswith("| **"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        concept = re.sub(r"\*\*(.*?)\*\*.*", r"\1", cells[0])
        if concept in ROW_WITHOUT_KEYS:
            continue
        for framework, cell in zip(COLUMNS, cells[1:], strict=True):
            for token in re.findall(r"`([^`]+)`", cell):
                for raw, real in SUBSTITUTE.items():
                    token = token.replace(raw, real)
                found.append((concept, framework, token))
    return found


TABLE = _table()


def test_reference_table_is_read() -> None:
    assert len(TABLE) > 120
    assert {fw for _, fw, _ in TABLE} == set(COLUMNS)


@pytest.mark.parametrize(("concept", "framework", "key"), TABLE, ids=lambda v: str(v))
def test_reference_key_resolves_to_its_canonical_metric(
    builtin: registry.Registry, concept: str, framework: str, key: str
) -> None:
    if key in NOT_A_KEY:
        return
    assert (key, framework) in EXPECTED, f"{concept}: no decision for {framework} key {key!r}"
    resolution = builtin.resolve(key, framework)
    assert resolution.field == EXPECTED[(key, framework)]


def test_every_expected_key_still_appears_in_the_reference() -> None:
    present = {(key, fw) for _, fw, key in TABLE}
    assert set(EXPECTED) <= present


@pytest.mark.parametrize(
    "prefixed", ["train/kl", "train/entropy", "train/rewards/accuracy/mean", "train/loss"]
)
def test_backend_train_prefix_is_handled_for_trl(builtin: registry.Registry, prefixed: str) -> None:
    plain = builtin.resolve(prefixed.removeprefix("train/"), "trl")
    assert builtin.resolve(prefixed, "trl") == plain


def test_sign_and_scale_transforms_reach_canonical_values(builtin: registry.Registry) -> None:
    assert builtin.resolve("train/entropy_loss", "sb3").transform.apply(-0.69) == pytest.approx(
        0.69
    )
    assert builtin.resolve("entropy_loss", "openrlhf").transform.apply(0.69) == pytest.approx(0.69)
    assert builtin.resolve("perf/mfu/actor", "verl").transform.apply(0.45) == pytest.approx(45.0)
    assert builtin.resolve("timing_per_token_ms/gen", "verl").transform.apply(4.0) == pytest.approx(
        250.0
    )
    assert builtin.resolve("perf/gpu_util_percent1", "rllib").label("gpu") == "1"


def test_kl_means_reference_kl_in_trl_but_policy_kl_in_rllib(builtin: registry.Registry) -> None:
    assert builtin.resolve("kl", "trl").metric == "ref_kl"
    assert builtin.resolve("kl", "openrlhf").metric == "ref_kl"
    assert builtin.resolve("kl", "rllib").metric == "policy_kl"
    with pytest.raises(registry.AmbiguousName) as info:
        builtin.resolve("kl")
    assert set(info.value.candidates) == {"ref_kl", "policy_kl"}
    assert "framework" in str(info.value)


def test_entropy_loss_sign_depends_on_framework(builtin: registry.Registry) -> None:
    with pytest.raises(registry.AmbiguousName):
        builtin.resolve("train/entropy_loss")
    assert builtin.resolve("train/entropy_loss", "sb3").transform.kind == "negate"
    assert builtin.resolve("train/entropy_loss", "openrlhf").transform.kind == "identity"


def test_sb3_ent_coef_is_a_coefficient_not_an_entropy(builtin: registry.Registry) -> None:
    assert builtin.resolve("train/ent_coef", "sb3").metric == "entropy_coef"


def test_unknown_name_gets_a_clear_answer_not_a_guess(builtin: registry.Registry) -> None:
    with pytest.raises(registry.UnknownName) as info:
        builtin.resolve("losses/entropyy")
    assert "losses/entropyy" in str(info.value)
    assert "losses/entropy" in info.value.candidates
    with pytest.raises(registry.UnknownName) as wrong_fw:
        builtin.resolve("losses/clipfrac", "sb3")
    assert "cleanrl" in str(wrong_fw.value)
