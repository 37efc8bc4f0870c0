"""Integrations deliver a framework's logs to a run under canonical ids (embedded store)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from installed import installed

import exporter
import registry
from exporter.integrations.tensorboard import SummaryWriter

MINI = Path(__file__).parents[2] / "fixtures" / "mini_registry"


@pytest.fixture
def mini() -> registry.Registry:
    return registry.load(MINI)


def _run(tmp_path: Path, reg: registry.Registry, name: str, **kw: Any) -> exporter.Run:
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    return exporter.init(name, registry=reg, settings=settings, policy="warn", **kw)


def _series(tmp_path: Path, run: str, field: str) -> tuple[list[int], list[float]]:
    with exporter.Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        steps, values = box.series(run, field)
    return steps.tolist(), values.tolist()


def test_importing_the_integrations_does_not_import_their_frameworks() -> None:
    code = (
        "import sys, exporter.integrations.sb3, exporter.integrations.hf, "
        "exporter.integrations.tensorboard, exporter.integrations.gpu\n"
        "bad = [m for m in ('stable_baselines3', 'transformers', 'torch', 'pynvml') "
        "if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_summary_writer_drop_in_logs_a_cleanrl_loop(
    tmp_path: Path, mini: registry.Registry
) -> None:
    run = _run(tmp_path, mini, "cleanrl-run", framework="cleanrl")
    writer = SummaryWriter(tmp_path / "runs" / "CartPole__ppo__1", run=run)
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n|clip_coef|0.2|")
    for update in range(1, 4):
        global_step = 512 * update
        writer.add_scalar("charts/episodic_return", 10.0 * update, global_step)
        writer.add_scalar("losses/approx_kl", np.float32(0.01 * update), global_step)
        writer.add_scalars("losses", {"clipfrac": 0.1 * update}, global_step)
        writer.add_histogram("actions", np.zeros(3), global_step)  # ignored, not an error
    writer.close()
    run.finish()
    assert _series(tmp_path, "cleanrl-run", "policy_kl") == (
        [512, 1024, 1536],
        pytest.approx([0.01, 0.02, 0.03]),
    )
    assert _series(tmp_path, "cleanrl-run", "clip_fraction")[1] == pytest.approx([0.1, 0.2, 0.3])
    assert _series(tmp_path, "cleanrl-run", "raw_reward")[1] == [10.0, 20.0, 30.0]


def test_hf_callback_forwards_trl_logs_at_global_step(
    tmp_path: Path, mini: registry.Registry
) -> None:
    transformers = installed("transformers")
    from exporter.integrations.hf import RlvitalsCallback

    run = _run(tmp_path, mini, "grpo-run", framework="trl")
    callback = RlvitalsCallback(run)
    assert isinstance(callback, transformers.TrainerCallback)
    state = transformers.TrainerState()
    handler = transformers.trainer_callback.CallbackHandler(
        [callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None
    )
    args = SimpleNamespace(output_dir=str(tmp_path / "out"))
    control = transformers.TrainerControl()
    for step in (10, 20):
        state.global_step = step
        logs = {
            "reward": step / 10,
            "rewards/format/mean": 0.5,
            "kl": 0.01,
            "epoch": 0.1,
            "note": "x",
        }
        handler.on_log(args, state, control, logs=logs)
    handler.on_save(args, state, control)
    run.finish()
    assert _series(tmp_path, "grpo-run", "raw_reward") == ([10, 20], [1.0, 2.0])
    assert _series(tmp_path, "grpo-run", "reward_component/format") == ([10, 20], [0.5, 0.5])
    assert _series(tmp_path, "grpo-run", "ref_kl")[1] == [0.01, 0.01]
    with exporter.Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        assert [e.step for e in box.events("grpo-run", "checkpoint")] == [20]


def test_sb3_ppo_cartpole_logs_through_the_callback_and_the_logger(
    tmp_path: Path, mini: registry.Registry
) -> None:
    installed("stable_baselines3", "stable-baselines3")
    installed("gymnasium")
    from stable_baselines3 import PPO

    from exporter.integrations.sb3 import RlvitalsCallback, configure_logger

    run = _run(tmp_path, mini, "ppo-cartpole", framework="sb3")
    model = PPO(
        "MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu"
    )
    model.learn(total_timesteps=1024, callback=RlvitalsCallback(run))
    other = _run(tmp_path, mini, "ppo-cartpole-logger", framework="sb3")
    model.set_logger(configure_logger(other, str(tmp_path / "sb3"), ["csv"]))
    model.learn(total_timesteps=1024, reset_num_timesteps=True)
    run.finish()
    other.finish()
    for name in ("ppo-cartpole", "ppo-cartpole-logger"):
        steps, entropy = _series(tmp_path, name, "policy_entropy")
        assert steps == [512, 768, 1024]  # train/ keys first appear in the second dump
        assert all(0.0 < h <= np.log(2) + 1e-6 for h in entropy)  # negated: positive nats
        assert _series(tmp_path, name, "samples_per_second")[0] == [256, 512, 768, 1024]
