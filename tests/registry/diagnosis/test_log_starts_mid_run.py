"""A log that begins after its run did (a run resumed from a checkpoint into a new log, as
verl's console of a resumed job: Bihan/dstack-configs `verl_demo.log`, steps 101-435 of 435) holds
none of what the run learned before: whether it ever improved and the share of its gain lost
since its best are unknown, not alarms (registry/diagnosis/context.py, `log_starts_mid_run`).
The same values logged from the run's start are judged as before."""

from __future__ import annotations

import numpy as np
import pytest

import registry
from registry.diagnosis import build_card
from registry.diagnosis.context import log_starts_mid_run
from registry.diagnosis.rules import RuleContext, evaluate_rule
from registry.diagnosis.stats import as_series

PLANNED = 435


@pytest.mark.parametrize(
    ("first", "every", "mid_run"),
    [
        (101, 1, True),  # resumed at 101 of 435
        (43, 1, False),  # within the first tenth of the run
        (60, 40, False),  # a sparse log's first point: not past two of its intervals
        (100, 20, True),
    ],
)
def test_a_log_starts_mid_run_past_a_tenth_of_the_plan_and_two_intervals(
    first: int, every: int, mid_run: bool
) -> None:
    steps = np.arange(first, first + 10 * every, every)
    assert log_starts_mid_run(PLANNED, steps) is mid_run
    assert log_starts_mid_run(None, steps) is False  # no planned length: nothing to say


def _reward(first: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A reward at its ceiling that rises by 0.03 and falls back 0.04 below where the log
    begins: all of the gain the log shows, lost."""
    rng = np.random.default_rng(3)
    n = 300
    level = np.concatenate([np.linspace(0.94, 0.97, n // 2), np.linspace(0.97, 0.90, n // 2)])
    return {"raw_reward": (np.arange(first, first + n), level + rng.normal(0, 0.003, n))}


def _config(first: int) -> dict[str, object]:
    return {"framework": "verl", "action_space": "token", "planned_steps": first + 300 - 1}


@pytest.mark.parametrize(("first", "judged"), [(1, True), (136, False)])
def test_all_of_the_gain_lost_is_judged_only_from_the_runs_start(
    builtin: registry.Registry, first: int, judged: bool
) -> None:
    data = _reward(first)
    config = _config(first)
    series = {k: as_series(v) for k, v in data.items()}
    (rule,) = [r for r in builtin.rules if r.id == "reward_collapse_raw"]
    ctx = RuleContext.of(builtin, config, builtin.stages_for(config), run_points=300)
    assert evaluate_rule(rule, series, ctx).fired is judged


def test_a_log_begun_mid_run_says_why_it_does_not_judge_never_improved(
    builtin: registry.Registry,
) -> None:
    rng = np.random.default_rng(5)
    flat = 0.95 + rng.normal(0, 0.005, 300)
    for first, said in ((1, False), (136, True)):
        data = {"raw_reward": (np.arange(first, first + 300), flat)}
        card = build_card(builtin, "raw_reward", data, _config(first))
        ref = next(e for e in card.evidence if e.kind == "return_reference")
        assert ("never_improved" in ref.data["findings"]) is not said, ref.text
        assert ("its log begins at step 136 of the planned 435" in ref.text) is said, ref.text
