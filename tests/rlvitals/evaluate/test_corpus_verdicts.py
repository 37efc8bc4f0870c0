"""The diagnosis on the calibration corpus: real SB3, CleanRL-style and TRL GRPO runs trained on
this machine (calibration/corpus.py), replayed card by card at every logged step from their
committed event files (no training here), against the verdicts written from their curves before
the engine was tuned (tests/fixtures/runs/expected.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import registry
from rlvitals.evaluate.replay import MAX_LAG_POINTS, Expected, RunVerdict, load_run, verdict

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
EXPECTED: dict[str, Any] = yaml.safe_load((RUNS / "expected.yaml").read_text())["runs"]
# Disagreements the engine still has with the written verdicts: kept visible, not hidden by
# editing either side (none left: grpo_mu1_beta_lr was warned for its KL climbing out of zero
# until `ref_kl_surge_with_reward_up` asked for a surge, see registry/rules.yaml).
KNOWN: dict[str, str] = {}


@pytest.fixture(scope="module")
def shipped() -> registry.Registry:
    return registry.load()


_cache: dict[str, RunVerdict] = {}


def _verdict(reg: registry.Registry, name: str) -> RunVerdict:
    if name not in _cache:
        _cache[name] = verdict(reg, load_run(RUNS / name, reg), Expected.of(EXPECTED[name]))
    return _cache[name]


def _params() -> list[Any]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[n])) if n in KNOWN else n
        for n in EXPECTED
    ]


def test_the_corpus_is_the_size_the_issue_asks_for() -> None:
    frameworks = {n.split("_")[0] for n in EXPECTED}
    assert len(EXPECTED) >= 20 and frameworks == {"sb3", "cleanrl", "grpo"}
    assert {"healthy", "destabilised"} == {e["verdict"] for e in EXPECTED.values()}
    assert all((RUNS / n).is_dir() for n in EXPECTED)


@pytest.mark.parametrize("name", _params())
def test_each_corpus_run_gets_its_verdict_class(shipped: registry.Registry, name: str) -> None:
    v = _verdict(shipped, name)
    exp = Expected.of(EXPECTED[name])
    if exp.verdict == "healthy":
        assert v.flag_step is None, v.flag_reading
    else:
        assert v.flag_step is not None, "never flagged"
        assert v.lag_points is not None and v.lag_points <= MAX_LAG_POINTS, v.flag_reading
        assert set(v.flag_kinds) & exp.kinds, (v.flag_kinds, v.flag_reading)
    if exp.dead_at_end:
        assert v.end_status == "critical"
    assert v.passed, v.problems


def test_the_context_is_read_from_the_logs(shipped: registry.Registry) -> None:
    sb3 = load_run(RUNS / "sb3_ppo_cartpole_healthy", shipped).context
    assert sb3.describe() == (
        "read as: SB3 PPO, 2 discrete actions, one point per 512 env steps, clip 0.2, lr constant"
    )
    grpo = load_run(RUNS / "grpo_mu1_beta_healthy", shipped).context
    assert (grpo.algorithm, grpo.num_iterations, grpo.kl_coef, grpo.planned_steps) == (
        "GRPO",
        1,
        0.04,
        200,
    )
    assert grpo.action_space == "token" and grpo.vocab_size == 24 and grpo.step_unit == "updates"
    cleanrl = load_run(RUNS / "cleanrl_ppo_noclip", shipped).context
    assert (cleanrl.clip_epsilon, cleanrl.planned_steps, cleanrl.lr_schedule) == (
        100.0,
        40960,
        "constant",
    )
    sac = load_run(RUNS / "sb3_sac_pendulum_healthy", shipped).context
    assert (sac.algorithm, sac.action_space) == ("SAC", "continuous")


def test_a_config_overrides_what_the_logs_say(shipped: registry.Registry) -> None:
    run = load_run(RUNS / "grpo_mu1_healthy", shipped, config={"num_iterations": 2})
    assert run.context.num_iterations == 2 and run.context.sources["num_iterations"] == "config"
