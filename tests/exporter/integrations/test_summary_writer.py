"""The SummaryWriter drop-in keeps TensorBoard working (real event files TensorBoard reads) and
keeps every value of a tag written several times at one step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from installed import installed
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import exporter
import registry
from exporter.integrations.tensorboard import SummaryWriter


def _init(tmp_path: Path, reg: registry.Registry) -> exporter.Run:
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    return exporter.init("cleanrl", registry=reg, settings=settings, framework="cleanrl")


def _cleanrl_loop(writer: SummaryWriter) -> None:
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n|clip_coef|0.2|")
    for update in (1, 2):
        step = 512 * update
        for env_return in (10.0 * update, 20.0 * update, 60.0 * update):  # three envs finished
            writer.add_scalar("charts/episodic_return", env_return, step)
        writer.add_scalar("losses/approx_kl", 0.01 * update, step)
    writer.close()


def _tensorboard_reads(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {
        tag: [(e.step, pytest.approx(e.value)) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
    }


@pytest.mark.parametrize("torch_installed", [True, False])
def test_drop_in_writes_event_files_tensorboard_reads_by_default(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch, torch_installed: bool
) -> None:
    if torch_installed:
        installed("torch.utils.tensorboard", "torch")
    else:  # the writer made on TensorBoard's own EventFileWriter
        monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    log_dir = tmp_path / "runs" / "CartPole__ppo__1"
    run = _init(tmp_path, reg)
    _cleanrl_loop(SummaryWriter(log_dir, run=run))
    run.finish()
    assert list(log_dir.glob("events.out.tfevents.*"))
    scalars = _tensorboard_reads(log_dir)
    assert scalars["charts/episodic_return"] == [
        (512, 10.0),
        (512, 20.0),
        (512, 60.0),
        (1024, 20.0),
        (1024, 40.0),
        (1024, 120.0),
    ]
    assert scalars["losses/approx_kl"] == [(512, 0.01), (1024, 0.02)]


def test_tee_false_writes_no_event_files(tmp_path: Path, reg: registry.Registry) -> None:
    log_dir = tmp_path / "runs" / "quiet"
    run = _init(tmp_path, reg)
    _cleanrl_loop(SummaryWriter(log_dir, run=run, tee=False))
    run.finish()
    assert not log_dir.exists()


def test_every_return_of_a_step_is_kept_as_mean_count_min_max(
    tmp_path: Path, reg: registry.Registry
) -> None:
    run = _init(tmp_path, reg)
    _cleanrl_loop(SummaryWriter(tmp_path / "runs" / "x", run=run, tee=False))
    run.finish()
    with exporter.Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        steps, means = box.series("cleanrl", "raw_reward")
        assert steps.tolist() == [512, 1024] and means.tolist() == [30.0, 60.0]
        _, count, low, high = box.spread("cleanrl", "raw_reward")
        assert count.tolist() == [3.0, 3.0]
        assert (low.tolist(), high.tolist()) == ([10.0, 20.0], [60.0, 120.0])
