"""Stage bands scaled to the run, and runs of alert violations."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest

import registry
from registry.diagnosis.bands import (
    alert_states,
    band_state,
    basis_scale,
    consecutive_violations,
    early_mean,
    in_warmup,
    warmup_end,
)
from registry.diagnosis.stats import as_series
from registry.model import Alert, Band, Bands

NAN = math.nan
WithBands = Callable[[str, Bands], registry.Registry]


def test_the_band_follows_the_stage_of_the_current_step(reg: registry.Registry) -> None:
    entropy = reg.metric("policy_entropy")
    stages = reg.stages_for({})
    early = band_state(entropy, 100, 1.0, stages)
    mid = band_state(entropy, 5000, 1.0, stages)
    late = band_state(entropy, 50_000, 1.0, stages)
    assert early is not None and (early.stage, early.low, early.high, early.inside) == (
        "early",
        0.8,
        2.5,
        True,
    )
    assert mid is not None and (mid.stage, mid.low, mid.high, mid.inside) == ("mid", 0.3, 1.2, True)
    assert late is not None and (late.stage, late.inside) == ("late", False)


def test_run_config_stage_boundaries_move_the_band(reg: registry.Registry) -> None:
    stages = reg.stages_for({"stage_boundaries": {"early_end": 100, "mid_end": 200}})
    state = band_state(reg.metric("policy_entropy"), 500, 0.3, stages)
    assert state is not None and state.stage == "late" and state.inside is True


def test_a_metric_without_bands_has_no_band_state(reg: registry.Registry) -> None:
    assert band_state(reg.metric("raw_reward"), 10, 1.0, reg.stages) is None


def test_bases_scale_by_early_value_clip_epsilon_and_max_entropy() -> None:
    assert basis_scale("absolute", None, None) == 1.0
    assert basis_scale("early_value", None, 2.0) == 2.0
    assert basis_scale("clip_epsilon", {"clip_epsilon": 0.2}, None) == 0.2
    assert basis_scale("max_entropy", {"n_actions": 2}, None) == pytest.approx(math.log(2))
    assert basis_scale("clip_epsilon", {}, None) is None
    assert basis_scale("max_entropy", {"n_actions": 1}, None) is None
    assert basis_scale("max_entropy", {"n_actions": True}, None) is None
    assert basis_scale("early_value", None, 0.0) is None
    assert basis_scale("early_value", None, -1.0) is None


def test_a_max_entropy_band_is_judged_in_nats_for_the_action_space(
    reg: registry.Registry, with_bands: WithBands
) -> None:
    r = with_bands("policy_entropy", Bands("max_entropy", early=Band(0.5, 1.0, "half to full")))
    metric = r.metric("policy_entropy")
    two = band_state(metric, 10, 0.6, r.stages, {"n_actions": 2})
    assert two is not None and two.high == pytest.approx(math.log(2)) and two.inside is True
    big = band_state(metric, 10, 0.6, r.stages, {"n_actions": 50_000})
    assert (
        big is not None and big.inside is False and big.low == pytest.approx(0.5 * math.log(50_000))
    )
    unknown = band_state(metric, 10, 0.6, r.stages, {})
    assert unknown is not None and unknown.inside is None and unknown.scale is None


def test_an_early_value_band_is_relative_to_the_runs_early_mean(
    reg: registry.Registry, with_bands: WithBands
) -> None:
    r = with_bands("raw_reward", Bands("early_value", late=Band(0.5, None, "keeps half")))
    steps = np.arange(0, 30_000, 100)
    values = np.where(steps < 2000, 4.0, 1.5)
    s = as_series((steps, values))
    ev = early_mean(s, r.stages)
    assert ev == 4.0
    state = band_state(r.metric("raw_reward"), int(steps[-1]), 1.5, r.stages, None, ev)
    assert state is not None and state.low == 2.0 and state.inside is False


def test_early_values_fall_back_to_the_first_points_when_the_run_starts_late(
    reg: registry.Registry,
) -> None:
    s = as_series((np.arange(5000, 5100), np.r_[np.full(10, 3.0), np.full(90, 9.0)]))
    assert early_mean(s, reg.stages) == 3.0


def test_violations_are_counted_back_from_the_latest_point_and_nan_does_not_break_them() -> None:
    alert = Alert("warning", "below", 0.1, 3, "test alert")
    s = as_series((np.arange(8), [0.5, 0.05, 0.5, 0.05, NAN, 0.04, 0.03, 0.02]))
    assert consecutive_violations(s, alert, 1.0) == (4, 3)
    recovered = as_series((np.arange(4), [0.05, 0.05, 0.05, 0.5]))
    assert consecutive_violations(recovered, alert, 1.0) == (0, None)
    absolute = Alert("critical", "abs_above", 1.0, 2, "test alert")
    assert consecutive_violations(as_series(([1, 2], [-3.0, 2.0])), absolute, 1.0) == (2, 1)


def test_an_alert_is_active_once_violated_for_its_for_steps(reg: registry.Registry) -> None:
    kl = reg.metric("policy_kl")  # warning > 0.05 for 3, critical > 0.2 for 3
    s = as_series((np.arange(10), [0.01] * 6 + [0.3, 0.3, 0.1, 0.1]))
    states = {a.alert.severity: a for a in alert_states(kl, s)}
    assert states["warning"].consecutive == 4 and states["warning"].active
    assert states["critical"].consecutive == 0 and not states["critical"].active


def test_an_alert_with_an_unknown_basis_is_never_active(reg: registry.Registry) -> None:
    alert = Alert("warning", "above", 0.8, 1, "ratio to clip epsilon", basis="clip_epsilon")
    metric = dataclasses.replace(reg.metric("policy_kl"), alerts=(alert,))
    s = as_series((np.arange(5), [1.0] * 5))
    (state,) = alert_states(metric, s, {})
    assert state.threshold is None and not state.active
    (known,) = alert_states(metric, s, {"clip_epsilon": 0.2})
    assert known.threshold == pytest.approx(0.16) and known.active


def test_warmup_is_the_first_tenth_of_the_early_stage_unless_configured(
    reg: registry.Registry,
) -> None:
    assert warmup_end(reg.stages, None) == 200
    assert warmup_end(reg.stages, {"warmup_steps": 50}) == 50
    assert in_warmup(199, reg.stages, None) and not in_warmup(200, reg.stages, None)


def test_run_config_band_replaces_the_registry_band_for_that_stage(
    builtin: registry.Registry,
) -> None:
    entropy = builtin.metric("policy_entropy")
    stages = builtin.stages
    # A two-action policy starts near ln 2 = 0.69 nats: with its action space unknown, the
    # registry's band (relative to ln n) is not judged, never an absolute one it cannot reach
    default = band_state(entropy, 10, 0.65, stages)
    assert default is not None and default.inside is None
    config = {"bands": {"policy_entropy": {"early": [0.3, 0.7]}}}
    overridden = band_state(entropy, 10, 0.65, stages, config)
    assert overridden is not None and overridden.inside is True
    assert (overridden.low, overridden.high, overridden.basis) == (0.3, 0.7, "run_config")
    later = band_state(entropy, stages.mid_end + 1, 0.2, stages, config)
    assert later is not None and later.basis == entropy.bands.basis


def test_malformed_run_config_band_is_ignored_not_trusted(builtin: registry.Registry) -> None:
    entropy = builtin.metric("policy_entropy")
    for bad in ([0.9, 0.1], ["x", 1], [0.1], "0.1-0.9", [float("nan"), 1.0]):
        state = band_state(
            entropy, 10, 0.65, builtin.stages, {"bands": {"policy_entropy": {"early": bad}}}
        )
        assert state is not None and state.basis != "run_config", bad
