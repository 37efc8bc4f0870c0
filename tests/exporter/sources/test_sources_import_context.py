"""`rlvitals import` stores the run context: what the logs' text summaries and keys say,
overridden by `--config FILE` and `--set KEY=VALUE`; bad config input is a clear error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exporter.store.outbox import Outbox
from rlvitals.cli import main

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _config(store: Path, run: str) -> dict[str, object]:
    with Outbox(store / "outbox.sqlite") as box:
        record = box.run(run)
    assert record is not None
    return dict(record.config)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store"


def test_import_reads_cleanrl_hyperparameters_and_takes_set_over_them(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "cleanrl_ppo_noclip"
    shutil.copytree(RUNS / "cleanrl_ppo_noclip", logs)
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text("n_actions: 2\nclip_epsilon: 0.3\n")
    args = ["import", str(logs), "--config", str(cfg_file), "--set", "clip_epsilon=0.25"]
    assert main(args) == 0
    config = _config(store, "cleanrl_ppo_noclip")
    assert config["framework"] == "cleanrl" and config["algorithm"] == "PPO"
    assert config["planned_steps"] == 40960 and config["lr_schedule"] == "constant"
    assert config["n_actions"] == 2 and config["clip_epsilon"] == 0.25  # --set > --config > logs
    assert "run context:" in capsys.readouterr().err


def test_import_reads_trl_args(store: Path, tmp_path: Path) -> None:
    logs = tmp_path / "grpo_mu2_healthy"
    shutil.copytree(RUNS / "grpo_mu2_healthy", logs)
    assert main(["import", str(logs)]) == 0
    config = _config(store, "grpo_mu2_healthy")
    assert (config["algorithm"], config["num_iterations"], config["kl_coef"]) == ("GRPO", 2, 0.0)
    assert (config["action_space"], config["vocab_size"], config["planned_steps"]) == (
        "token",
        24,
        200,
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "clip_epsilon"], "expected KEY=VALUE"),
        (["--config", "missing.yaml"], "cannot read it"),
        (["--config", "LIST"], "expected a mapping"),
    ],
)
def test_bad_config_input_is_a_clear_error(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    extra = [
        str(listing) if e == "LIST" else str(tmp_path / e) if e.endswith(".yaml") else e
        for e in extra
    ]
    assert main(["import", str(RUNS / "cleanrl_ppo_healthy"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
