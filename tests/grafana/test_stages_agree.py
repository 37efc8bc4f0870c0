"""A chart's stage and the card under it agree (issue 38): a real SB3 PPO run (CartPole, one
point per 512 steps to step 40,960, `tests/fixtures/runs/sb3_ppo_cartpole_healthy`) imported as a
user would, then, for every card that judged a metric against a stage's band, the stage the
report's chart shades at the card's step and the stage the run page's chart follows there
(`/api/field_series` `stages`) are the card's own.

The run is long past the registry's default boundaries (20,000 steps ends "mid") but its cards
count stages in logged points at its cadence (200 points: 102,400 steps), so a chart that used the
defaults put its last step in "late" under a card that judged "mid"."""

from __future__ import annotations

from pathlib import Path

import pytest

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import EmbeddedHistory
from grafana.report.data import gather
from rlvitals.cli import main

RUN = "sb3-ppo"
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "sb3_ppo_cartpole_healthy"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stages-store")
    assert main(["import", str(LOGS), "--run", RUN, "--store", str(root)]) == 0
    return root


def _stage(boundaries: dict[str, int], step: int) -> str:
    if step < boundaries["early_end"]:
        return "early"
    return "mid" if step < boundaries["mid_end"] else "late"


def test_the_report_and_the_run_page_shade_the_stage_the_card_judged(
    store: Path, builtin: registry.Registry
) -> None:
    client = create_app(DatasourceConfig(store=store), builtin).test_client()
    cards = client.get(f"/api/cards?run={RUN}").get_json()["cards"]
    banded = [c for c in cards if c.get("band") and c["status"] != "no_data"]
    assert len(banded) >= 3, [c["metric"] for c in cards]
    report = gather(builtin, EmbeddedHistory(store / "outbox.sqlite"), RUN, langs=("en",))
    stages = {"early_end": report.stages.early_end, "mid_end": report.stages.mid_end}
    judged = set()
    for card in banded:
        step, stage = card["step"], card["band"]["stage"]
        judged.add(stage)
        assert _stage(stages, step) == stage, (card["metric"], step, stages)
        series = client.get(f"/api/field_series?run={RUN}&field={card['metric']}").get_json()
        if series["stages"] is not None:  # the page draws this metric's band
            assert _stage(series["stages"], step) == stage, (card["metric"], series["stages"])
    # the case the issue met: the last step past the registry's default end of "mid"
    assert max(c["step"] for c in banded) > builtin.stages.mid_end
    assert judged == {"mid"}
