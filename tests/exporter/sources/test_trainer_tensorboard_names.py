"""verl's and OpenRLHF's TensorBoard output, with the tags and folders current versions write,
imports as their run: the framework told from the tags, every metric tag translated by the
registry (values through its declared transform), at the trainer's step."""

from __future__ import annotations

from pathlib import Path

import pytest
from logmakers import write_event_file

import registry
from exporter import Outbox
from rlvitals.cli import main

# verl's Tracking writes every key unchanged with add_scalar(key, value, global_steps), into
# $TENSORBOARD_DIR or tensorboard_log/{project_name}/{experiment_name} (verl/utils/tracking.py,
# v0.4.1+); keys as verl v0.9 logs them (verl/trainer/ppo/metric_utils.py, the actor's losses)
VERL_KEYS = (
    "actor/pg_loss",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/entropy",
    "actor/kl_loss",
    "actor/grad_norm",
    "critic/score/mean",
    "critic/rewards/mean",
    "critic/advantages/mean",
    "response_length/mean",
    "response_length/clip_ratio",
    "timing_s/step",
    "perf/throughput",
)
# OpenRLHF's TensorboardLogger writes add_scalar(f"train/{k}", v, global_step) for every status
# key into <tensorboard_dir>/<run_name> (openrlhf/utils/logging_utils.py, v0.11.0); status keys
# from openrlhf/trainer/ray/ppo_actor.py, experience_maker.py, samples_generator.py, ppo_trainer.py
OPENRLHF_KEYS = (
    "train/policy_loss",
    "train/actor_lr",
    "train/actor_grad_norm",
    "train/ppo_clip_ratio",
    "train/ppo_kl",
    "train/kl",
    "train/reward",
    "train/return",
    "train/group_reward_std",
    "train/response_clip_ratio",
    "train/rollout/reward_mean",
    "train/rollout/response_length_mean",
    "train/timing/step_total",
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store" / "outbox.sqlite"


def _steps(keys: tuple[str, ...], steps: range) -> list[tuple[int, dict[str, float]]]:
    return [(s, {k: 0.01 * (i + 1) * s for i, k in enumerate(keys)}) for s in steps]


def _assert_translated(
    box: Outbox, run: str, framework: str, rows: list[tuple[int, dict[str, float]]]
) -> None:
    reg = registry.load()
    record = box.run(run)
    assert record is not None and record.framework == framework
    fields: dict[str, list[str]] = {}
    for name in rows[0][1]:
        fields.setdefault(reg.resolve(name, framework).field, []).append(name)
    for field, names in fields.items():
        steps, values = box.series(run, field)
        assert steps.tolist() == [s for s, _ in rows], field
        if len(names) == 1:  # one name for the field: its values, through the transform
            res = reg.resolve(names[0], framework)
            want = [res.transform.apply(row[names[0]]) for _, row in rows]
            assert values.tolist() == pytest.approx(want), names[0]
    assert box.fields(run, "unregistered") == []


def test_verl_tensorboard_folder_imports_as_its_experiment(store: Path, tmp_path: Path) -> None:
    rows = _steps(VERL_KEYS, range(1, 6))
    write_event_file(tmp_path / "tensorboard_log" / "verl_examples" / "qwen2_7b_grpo", rows)
    assert main(["import", str(tmp_path / "tensorboard_log")]) == 0
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["qwen2_7b_grpo"]
        _assert_translated(box, "qwen2_7b_grpo", "verl", rows)


def test_openrlhf_tensorboard_tags_import_with_their_train_prefix(
    store: Path, tmp_path: Path
) -> None:
    rows = _steps(OPENRLHF_KEYS, range(1, 6))
    # the default run name is ppo_%m%dT%H:%M (openrlhf/cli/train_ppo_ray.py)
    write_event_file(tmp_path / "tb" / "ppo_0813T19:25", rows)
    assert main(["import", str(tmp_path / "tb")]) == 0
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["ppo_0813T19:25"]
        _assert_translated(box, "ppo_0813T19:25", "openrlhf", rows)
