"""Real logs import: SB3's progress.json (JSON Lines with a .json name) and the Hugging Face
Trainer's trainer_state.json (one run per output folder, checkpoints included, no false resume)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from exporter import Outbox
from rlvitals.cli import main

FIXTURES = Path(__file__).parents[2] / "fixtures" / "logs"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store" / "outbox.sqlite"


def test_sb3_progress_json_is_imported_when_its_folder_is(store: Path) -> None:
    assert main(["import", str(FIXTURES / "sb3_ppo_json")]) == 0
    lines = [json.loads(x) for x in (FIXTURES / "sb3_ppo_json/PPO_1/progress.json").open()]
    trained = [x for x in lines if "train/value_loss" in x]
    with Outbox(store) as box:
        record = box.run("PPO_1")
        assert record is not None and record.framework == "sb3"
        steps, values = box.series("PPO_1", "value_loss")
        assert steps.tolist() == [x["time/total_timesteps"] for x in trained]
        assert values.tolist() == pytest.approx([0.5 * x["train/value_loss"] for x in trained])
        assert box.transforms("PPO_1")["value_loss"][0].note == "train/value_loss × 0.5"


def test_trainer_state_imports_as_one_run_per_output_folder(store: Path) -> None:
    assert main(["import", str(FIXTURES / "hf_trainer")]) == 0
    state = json.loads((FIXTURES / "hf_trainer/tiny-gpt2/trainer_state.json").read_text())
    logged = [e for e in state["log_history"] if "loss" in e]
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["tiny-gpt2"]
        steps, values = box.series("tiny-gpt2", "total_loss")
        assert steps.tolist() == [e["step"] for e in logged]
        assert values.tolist() == pytest.approx([e["loss"] for e in logged])
        final = box.series("tiny-gpt2", "train_loss", measurement="unregistered")
        assert final[0].tolist() == [12]
        assert box.events("tiny-gpt2") == []


def test_a_new_checkpoint_adds_its_steps_without_a_false_resume(
    store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "logs" / "tiny-gpt2"
    shutil.copytree(FIXTURES / "hf_trainer/tiny-gpt2/checkpoint-6", out / "checkpoint-6")
    args = ["tail", str(tmp_path / "logs"), "--no-follow"]
    assert main(args) == 0
    with Outbox(store) as box:
        assert box.series("tiny-gpt2", "total_loss")[0].tolist() == [2, 4, 6]
    shutil.copytree(FIXTURES / "hf_trainer/tiny-gpt2/checkpoint-12", out / "checkpoint-12")
    assert main(args) == 0  # the restarted sidecar goes on with its run
    with Outbox(store) as box:
        assert box.series("tiny-gpt2", "total_loss")[0].tolist() == [2, 4, 6, 8, 10, 12]
        assert box.events("tiny-gpt2", kind="resume") == []
        assert [r.run for r in box.runs()] == ["tiny-gpt2"]


def test_a_broken_trainer_state_is_reported_by_name_without_a_traceback(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "out" / "trainer_state.json"
    bad.parent.mkdir()
    # nothing could be read from it: said, and the import fails (issue 34: a file that holds
    # no metrics says so with rc != 0)
    bad.write_text('{"global_step": 3, "log_history": "oops"}')
    assert main(["import", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: no 'log_history' list" in err and "Traceback" not in err
    assert "read no metric values" in err
    bad.write_text('{"log_history": [{"loss": 1.0}, {"step": -2}]}')
    assert main(["import", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "entry 1 has no integer 'step'" in err and "Traceback" not in err
    bad.write_text("{not json")
    assert main(["import", str(bad), "--format", "trainer-state"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: not valid JSON" in err and "line 1, column 2" in err
    assert "Traceback" not in err
    # an integer past Python's 4,300-digit parse limit is named, not a traceback
    bad.write_text('{"global_step": 1, "log_history": [{"step": 1, "loss": 1' + "0" * 5000 + "}]}")
    assert main(["import", str(bad), "--format", "trainer-state"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: cannot be read as JSON: Exceeds the limit (4300 digits)" in err
    assert "Traceback" not in err
