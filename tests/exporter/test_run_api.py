"""The Run API writes step-keyed points under canonical ids to a real InfluxDB and the outbox."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry


def test_logged_aliases_land_under_canonical_ids_with_transforms(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path)
    with exporter.init("ppo-1", project="cartpole", registry=reg, settings=settings, rank=0) as run:
        for step in range(0, 50, 10):
            run.log(
                step,
                {"train/approx_kl": 0.01, "train/entropy_loss": -0.6, "policy_kl": 0.01},
                framework="sb3",
            )
        assert run.flush()
        stats = run.stats
    assert stats.accepted == 15 and stats.rejected == 0
    rows = influx.query('SELECT * FROM "policy" GROUP BY *')
    assert [r["time"] for r in rows] == [0, 10, 20, 30, 40]
    for r in rows:
        assert (r["run"], r["project"], r["rank"]) == ("ppo-1", "cartpole", "0")
        assert r["policy_entropy"] == pytest.approx(0.6)  # SB3 logs -H: negated
        assert r["policy_kl"] == 0.01
        assert r["step"] == r["time"] and isinstance(r["step"], int)
        assert r["wall_time"] == pytest.approx(time.time(), abs=60)


def test_gpu_label_becomes_a_tag_and_scale_transform_applies(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init("r", registry=reg, settings=influx.settings(tmp_path)) as run:
        run.log(
            5, {"perf/gpu_util_percent0": 0.5, "perf/gpu_util_percent1": 0.25}, framework="rllib"
        )
    rows = influx.query('SELECT "gpu_utilization" FROM "system" GROUP BY "gpu"')
    assert {r["gpu"]: r["gpu_utilization"] for r in rows} == {"0": 50.0, "1": 25.0}


def test_pattern_metric_is_stored_per_component(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init(
        "grpo", registry=reg, settings=influx.settings(tmp_path), framework="trl"
    ) as run:
        run.log(1, {"rewards/format/mean": 0.5, "rewards/accuracy/mean": 0.25, "reward": 0.75})
    (row,) = influx.query('SELECT * FROM "reward"')
    assert row["reward_component/format"] == 0.5
    assert row["reward_component/accuracy"] == 0.25
    assert row["raw_reward"] == 0.75


def test_config_is_stored_with_the_run_and_as_a_run_config_point(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    config = {"clip_range": 0.2, "kl_coef": 0.05, "optimizer": {"lr": 3e-4}, "env": "CartPole-v1"}
    settings = influx.settings(tmp_path)
    with exporter.init("cfg", project="p", config=config, registry=reg, settings=settings):
        pass
    (row,) = influx.query('SELECT * FROM "run_config"')
    assert row["time"] == 0 and row["step"] == 0
    assert json.loads(row["config_json"]) == config
    assert (row["clip_range"], row["kl_coef"], row["optimizer.lr"]) == (0.2, 0.05, 3e-4)
    with exporter.Outbox(settings.outbox_path) as box:
        (stored,) = box.runs()
    assert (stored.run, stored.project, dict(stored.config)) == ("cfg", "p", config)


def test_events_come_back_as_step_keyed_points(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init("ev", registry=reg, settings=influx.settings(tmp_path)) as run:
        run.event(100, "checkpoint", "saved ckpt-100", path="/ckpt/100")
        run.event(200, "warmup_end", "lr warmup done", lr=3e-4)
        run.event(300, "grad_clip", clipped=True)
    rows = influx.query('SELECT * FROM "events" GROUP BY "kind"')
    by_kind = {r["kind"]: r for r in rows}
    assert by_kind["checkpoint"]["time"] == 100 and by_kind["checkpoint"]["path"] == "/ckpt/100"
    assert by_kind["warmup_end"]["lr"] == 3e-4 and by_kind["warmup_end"]["step"] == 200
    assert by_kind["grad_clip"]["clipped"] is True


def test_without_influx_the_outbox_is_the_embedded_store(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, policy="strict")
    with exporter.init("local", registry=reg, settings=settings) as run:
        for step in range(20):
            run.log(step, {"losses/clipfrac": step / 100})
        run.event(10, "checkpoint", "c")
    with exporter.Outbox(settings.outbox_path) as box:
        steps, values = box.series("local", "clip_fraction")
        assert steps.tolist() == list(range(20))
        assert values[-1] == pytest.approx(0.19)
        assert [e.kind for e in box.events("local")] == ["checkpoint"]
        assert box.latest("local")["clip_fraction"][0] == 19


def test_log_after_finish_is_counted_as_dropped_not_raised(
    tmp_path: Path, reg: registry.Registry
) -> None:
    run = exporter.init("late", registry=reg, settings=exporter.ExporterSettings(store=tmp_path))
    run.finish()
    run.log(1, {"losses/clipfrac": 0.1})
    assert run.stats.dropped == 1


def test_a_full_queue_drops_and_counts_instead_of_blocking(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, queue_size=1)
    with exporter.init("tiny", registry=reg, settings=settings) as run:
        for step in range(5000):
            run.log(step, {"losses/clipfrac": 0.1})
        flushed = run.flush()
        stats = run.stats
    assert stats.accepted + stats.dropped == 5000
    assert flushed is (stats.dropped == 0)  # flush says whether all that was logged is stored
