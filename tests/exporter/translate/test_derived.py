"""Derived metrics and the per-step NaN/Inf count are computed by the exporter as inputs arrive."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import exporter
import registry
from exporter.store.outbox import Outbox


@pytest.fixture(scope="module")
def shipped() -> registry.Registry:
    return registry.load()


def _series(tmp_path: Path, run: str, field: str) -> dict[int, float]:
    outbox = Outbox(tmp_path / "outbox.sqlite")
    try:
        steps, values = outbox.series(run, field)
    finally:
        outbox.close()
    return dict(zip(steps.tolist(), values.tolist(), strict=True))


def _settings(tmp_path: Path) -> exporter.ExporterSettings:
    return exporter.ExporterSettings(store=tmp_path, policy="warn")


def test_kl_clip_ratio_divides_policy_kl_by_the_configured_clip_epsilon(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    with exporter.init(
        "ppo", registry=shipped, settings=_settings(tmp_path), config={"clip_epsilon": 0.2}
    ) as run:
        for step in range(5):
            run.log(step, {"train/approx_kl": 0.01 * (step + 1)}, framework="sb3")
    ratio = _series(tmp_path, "ppo", "kl_clip_ratio")
    assert ratio == pytest.approx({s: 0.05 * (s + 1) for s in range(5)})


def test_without_clip_epsilon_no_ratio_is_invented(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    with exporter.init("ppo", registry=shipped, settings=_settings(tmp_path)) as run:
        run.log(0, {"policy_kl": 0.02})
    assert _series(tmp_path, "ppo", "kl_clip_ratio") == {}


def test_kl_clip_ratio_uses_the_clip_range_the_run_logs_when_the_config_has_none(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    # SB3 logs train/clip_range beside train/approx_kl at every update (a schedule shows there)
    with exporter.init("ppo", registry=shipped, settings=_settings(tmp_path)) as run:
        for step, clip in enumerate((0.2, 0.2, 0.1)):
            run.log(step, {"train/approx_kl": 0.02, "train/clip_range": clip}, framework="sb3")
    ratio = _series(tmp_path, "ppo", "kl_clip_ratio")
    assert ratio == pytest.approx({0: 0.1, 1: 0.1, 2: 0.2})


def test_a_logged_derived_metric_is_not_overwritten(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    with exporter.init(
        "ppo", registry=shipped, settings=_settings(tmp_path), config={"clip_epsilon": 0.2}
    ) as run:
        run.log(3, {"kl_clip_ratio": 0.9, "policy_kl": 0.01})
    assert _series(tmp_path, "ppo", "kl_clip_ratio") == {3: 0.9}


def test_entropy_gradient_is_the_slope_per_thousand_steps(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    window = shipped.metric("entropy_gradient").derived.window  # type: ignore[union-attr]
    assert window is not None
    with exporter.init("ppo", registry=shipped, settings=_settings(tmp_path)) as run:
        for step in range(0, 3 * window):
            run.log(step, {"policy_entropy": 2.0 - 0.004 * step})
    grad = _series(tmp_path, "ppo", "entropy_gradient")
    assert min(grad) >= max(2, window // 2) - 1  # needs half a window of history first
    assert np.allclose(list(grad.values()), -4.0)


def test_resume_restarts_the_gradient_from_the_replayed_steps(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    with exporter.init("ppo", registry=shipped, settings=_settings(tmp_path)) as run:
        for step in range(100):
            run.log(step, {"policy_entropy": 2.0 - 0.004 * step})
        for step in range(60, 100):  # replayed from a checkpoint, now rising
            run.log(step, {"policy_entropy": 1.0 + 0.01 * step})
    # The gradient describes the stored series: steps before the resume point stay as they were,
    # the replayed ones are overwritten, and nothing from the abandoned branch is left in it.
    entropy = _series(tmp_path, "ppo", "policy_entropy")
    window = shipped.metric("entropy_gradient").derived.window  # type: ignore[union-attr]
    assert window is not None
    x = np.array([s for s in entropy if s > 99 - window], dtype=float)
    y = np.array([entropy[int(s)] for s in x])
    expected = 1000.0 * np.polyfit(x, y, 1)[0]
    assert _series(tmp_path, "ppo", "entropy_gradient")[99] == pytest.approx(expected)


def test_nonfinite_values_are_counted_per_step_across_log_calls(
    tmp_path: Path, shipped: registry.Registry
) -> None:
    with exporter.init("ppo", registry=shipped, settings=_settings(tmp_path)) as run:
        run.log(7, {"policy_loss": math.nan, "value_loss": 0.5})
        run.log(7, {"grad_norm": math.inf})
        run.log(8, {"policy_loss": 0.1})
    assert _series(tmp_path, "ppo", "nonfinite_count") == {7: 2.0, 8: 0.0}
    assert _series(tmp_path, "ppo", "policy_loss") == {8: 0.1}
