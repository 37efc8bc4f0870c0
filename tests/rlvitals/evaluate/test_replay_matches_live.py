"""Replay and live are one engine: for every corpus run, the statuses `rlvitals evaluate` replays
at a step S are the statuses `GET /api/cards` answers for the same run logged up to S.

The live side is built independently of the replay: the run's own event records up to S go
through the training-side API (`exporter.init` + `Run.log`, the translator a training process
uses, not the importer the replay uses) into a store of their own, which a real datasource app
serves. The steps compared are the run's first logged steps (physical facts need no history),
its expected failure step and the one after, the replay's first warning and its last step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import exporter
import registry
from exporter.config import ExporterSettings
from exporter.sources.tensorboard import TensorBoardSource, is_event_file
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig
from rlvitals.evaluate.replay import LoadedRun, StepStatus

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
EXPECTED: dict[str, Any] = yaml.safe_load((RUNS / "expected.yaml").read_text())["runs"]
# the session's replay of a corpus run (tests/rlvitals/evaluate/conftest.py)
Replayed = Callable[[str], tuple[LoadedRun, list[StepStatus]]]


def _records(folder: Path) -> list[Any]:
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and is_event_file(p)):
        out += list(TensorBoardSource(path, lambda _m: None).poll(final=True))
    return out


def _live(
    tmp: Path, reg: registry.Registry, run: LoadedRun, records: list[Any], step: int
) -> dict[str, str]:
    """/api/cards on a store holding the run's records up to `step`, logged by a training."""
    settings = ExporterSettings(store=tmp)
    logged = exporter.init(
        run.name,
        settings=settings,
        config=dict(run.config),
        framework=run.framework,
        registry=reg,
    )
    for r in records:
        if r.step <= step:
            logged.log(r.step, r.values, wall_time=r.wall_time)
    logged.finish()
    client = create_app(DatasourceConfig(store=tmp), reg).test_client()
    answer = client.get(f"/api/cards?run={run.name}")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return {c["metric"]: c["status"] for c in answer.get_json()["cards"]}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_statuses_equal_api_cards_on_the_run_cut_there(
    tmp_path: Path,
    name: str,
    replayed: Replayed,
    registry_of: Callable[[str], registry.Registry],
) -> None:
    run, timeline = replayed(name)
    records = _records(RUNS / name)
    by_step = {st.step: st for st in timeline}
    steps = sorted(by_step)  # the steps the replay judges at
    failure = EXPECTED[name].get("failure_step")
    flagged = next((st.step for st in timeline if st.status in ("warning", "critical")), None)
    chosen = {*steps[:2], steps[-1]}
    for s in (failure, flagged):
        if s is not None:
            i = int(np.searchsorted(steps, s))
            chosen |= set(steps[i : i + 2])
    for step in sorted(chosen):
        live = _live(tmp_path / str(step), registry_of(name), run, records, step)
        replay = dict(by_step[step].statuses)
        assert replay == live, f"step {step:,}: replay {replay} != /api/cards {live}"
