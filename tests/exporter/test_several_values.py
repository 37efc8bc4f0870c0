"""Nothing logged is lost: several values of one name at one step are kept (mean under the field,
count/min/max under `spread`), unknown names are listed and served as logged, and the transform
each field went through is recorded for the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import exporter
import registry
from exporter.schema import SPREAD


def _init(tmp_path: Path, reg: registry.Registry, name: str = "r", **kw: Any) -> exporter.Run:
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    return exporter.init(name, registry=reg, settings=settings, policy="warn", **kw)


def _box(tmp_path: Path) -> exporter.Outbox:
    return exporter.Outbox(tmp_path / "store" / "outbox.sqlite")


def test_several_returns_at_one_step_keep_mean_count_min_and_max(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _init(tmp_path, reg, framework="cleanrl") as run:
        run.log(512, {"charts/episodic_return": [10.0, 30.0, 20.0]})
        run.log(1024, {"charts/episodic_return": 7.0})
    with _box(tmp_path) as box:
        steps, values = box.series("r", "raw_reward")
        assert steps.tolist() == [512, 1024] and values.tolist() == [20.0, 7.0]
        s_steps, count, low, high = box.spread("r", "raw_reward")
        assert s_steps.tolist() == [512]
        assert (count.tolist(), low.tolist(), high.tolist()) == ([3.0], [10.0], [30.0])
        assert "raw_reward" in box.fields("r") and "raw_reward/count" not in box.fields("r")
        assert box.fields("r", SPREAD) == ["raw_reward/count", "raw_reward/max", "raw_reward/min"]


def test_several_values_go_through_the_transform_one_by_one(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _init(tmp_path, reg, framework="sb3") as run:
        run.log(8, {"train/entropy_loss": [-0.5, -0.7]})  # SB3 logs -H: negated
    with _box(tmp_path) as box:
        assert box.series("r", "policy_entropy")[1].tolist() == pytest.approx([0.6])
        _, count, low, high = box.spread("r", "policy_entropy")
        assert (count[0], low[0], high[0]) == (2.0, pytest.approx(0.5), pytest.approx(0.7))


def test_a_list_with_a_non_number_is_rejected_with_its_name(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _init(tmp_path, reg, framework="cleanrl") as run:
        run.log(1, {"charts/episodic_return": [1.0, "x"], "losses/approx_kl": []})
        assert run.flush()
        assert run.stats.rejected == 2
    settings = exporter.ExporterSettings(store=tmp_path / "strict")
    with (
        exporter.init("s", registry=reg, settings=settings, policy="strict") as run,
        pytest.raises(exporter.InvalidSample, match="list holding a non-number"),
    ):
        run.log(1, {"charts/episodic_return": [1.0, None]}, framework="cleanrl")


def test_non_finite_members_are_reported_and_the_rest_kept(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _init(tmp_path, reg, framework="cleanrl") as run:
        run.log(3, {"charts/episodic_return": [1.0, float("nan"), 3.0]})
    with _box(tmp_path) as box:
        assert box.series("r", "raw_reward")[1].tolist() == [2.0]
        assert box.spread("r", "raw_reward")[1].tolist() == [2.0]
        (health,) = box.events("r", "health")
        assert "1 of 3 values non-finite" in health.text


def test_unregistered_keys_are_listed_and_served_under_their_exact_names(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _init(tmp_path, reg, framework="trl") as run:
        for step in (1, 2):
            run.log(step, {"clip_ratio/low_mean": 0.01 * step, "num_tokens": [100.0, 300.0]})
    with _box(tmp_path) as box:
        assert box.fields("r", "unregistered") == ["clip_ratio/low_mean", "num_tokens"]
        steps, values = box.series("r", "clip_ratio/low_mean", measurement="unregistered")
        assert steps.tolist() == [1, 2] and values.tolist() == pytest.approx([0.01, 0.02])
        assert box.spread("r", "num_tokens")[3].tolist() == [300.0, 300.0]
        catalog = {(f.measurement, f.field): f for f in box.catalog("r")}
        assert catalog[("unregistered", "clip_ratio/low_mean")].count == 2
        assert catalog[("unregistered", "num_tokens")].last_step == 2
        assert (SPREAD, "num_tokens/count") in catalog


def test_transforms_applied_are_recorded_per_run_with_a_note(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    with _init(tmp_path, builtin, framework="sb3") as run:
        run.log(
            2048,
            {"train/value_loss": 4.0, "train/entropy_loss": -0.6, "train/approx_kl": 0.01},
        )
    with _init(tmp_path, builtin, "other", framework="cleanrl") as run:
        run.log(1, {"losses/approx_kl": 0.01})
    with _box(tmp_path) as box:
        transforms = box.transforms("r")
        assert box.series("r", "value_loss")[1].tolist() == [2.0]
        assert set(transforms) == {"value_loss", "policy_entropy"}
        (value_loss,) = transforms["value_loss"]
        assert value_loss.note == "train/value_loss × 0.5"
        assert value_loss.framework == "sb3"
        assert transforms["policy_entropy"][0].note == "train/entropy_loss negated"
        assert box.transforms("other") == {}


def test_a_resumed_run_keeps_the_transforms_of_its_first_process(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    with _init(tmp_path, builtin, framework="sb3") as run:
        run.log(1, {"train/value_loss": 4.0})
    with _init(tmp_path, builtin, framework="sb3", resume=True) as run:
        run.log(2, {"train/entropy_loss": -0.6})
    with _box(tmp_path) as box:
        assert set(box.transforms("r")) == {"value_loss", "policy_entropy"}


def test_spread_reaches_influxdb_as_its_own_measurement(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init(
        "r", registry=reg, settings=influx.settings(tmp_path), framework="cleanrl"
    ) as run:
        run.log(512, {"charts/episodic_return": [1.0, 2.0, 6.0]})
        assert run.flush()
    (row,) = influx.query(f'SELECT * FROM "{SPREAD}"')
    assert (row["raw_reward/count"], row["raw_reward/min"], row["raw_reward/max"]) == (3, 1, 6)
    (mean,) = influx.query('SELECT "raw_reward" FROM "reward"')
    assert mean["raw_reward"] == 3.0
    assert np.isclose(mean["time"], 512)


def test_a_numpy_array_is_several_values_even_under_strict(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path / "store", policy="strict")
    with exporter.init("r", registry=reg, settings=settings, framework="cleanrl") as run:
        run.log(4, {"charts/episodic_return": np.array([1.0, 5.0], dtype=np.float32)})
    with _box(tmp_path) as box:
        assert box.series("r", "raw_reward")[1].tolist() == [3.0]
        assert box.spread("r", "raw_reward")[3].tolist() == [5.0]
        assert "raw_reward" in box.latest("r") and "raw_reward/count" not in box.latest("r")


def test_resume_must_be_a_bool(tmp_path: Path, reg: registry.Registry) -> None:
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    with pytest.raises(exporter.ConfigError, match="resume='yes' must be True or False"):
        exporter.init("r", registry=reg, settings=settings, resume="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("after", [3, 60], ids=["one-by-one", "as-a-block"])
def test_a_step_logged_again_with_one_value_replaces_the_spread_its_several_values_left(
    tmp_path: Path, reg: registry.Registry, after: int
) -> None:
    """A resumed run logging a step again overwrites it (steps.py's resume event), its spread
    included: a stored max below the stored value is a run that says two things at once. With
    many calls after the resume, the worker translates them as a block of columns, which writes
    no spread: the steps at or below the highest stored go one by one (an import of a TensorBoard
    file whose step 3 held two events, then 1, then 3 again, left max 0.7 beside a value 0.9)."""
    with _init(tmp_path, reg, framework="cleanrl") as run:
        run.log(3, {"charts/episodic_return": [0.5, 0.7]})
        run.log(1, {"charts/episodic_return": 0.2})  # resumed from an earlier checkpoint
        for step in range(2, after + 1):
            run.log(step, {"charts/episodic_return": 0.9 if step == 3 else 0.1})
    with _box(tmp_path) as box:
        steps, values = box.series("r", "raw_reward")
        assert dict(zip(steps.tolist(), values.tolist(), strict=True))[3] == 0.9
        s_steps, count, low, high = box.spread("r", "raw_reward")
        at = {s: (c, lo, hi) for s, c, lo, hi in zip(s_steps, count, low, high, strict=True)}
        assert at[3] == (1.0, 0.9, 0.9)
