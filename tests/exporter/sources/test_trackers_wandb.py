"""W&B offline run folders, written by the real `wandb` package (`WANDB_MODE=offline`), read by
`rlvitals import` / `tail` / `evaluate`: one run per W&B run, under its name, at the step the
run logged against, names translated by the registry, its config in the run context; the
captured console beside it is not read a second time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from trackermakers import write_mlflow_run, write_wandb_run

import registry
from exporter import Outbox
from exporter.sources.leveldb_log import BLOCK
from exporter.sources.record import Malformed
from exporter.sources.wandb_offline import WandbRunSource
from rlvitals.cli import main

# verl logs every key unchanged with `wandb.log(data, step=global_steps)` and gives wandb.init
# its whole config (verl/utils/tracking.py)
VERL_ROWS = [
    (
        step,
        {
            "actor/pg_loss": -0.01 * step,
            "actor/entropy": 1.0 - 0.1 * step,
            "critic/score/mean": 0.2 * step,
            "response_length/clip_ratio": 0.01 * step,
            "training/global_step": float(step),
        },
    )
    for step in (1, 2, 3, 4)
]
VERL_CONFIG = {
    "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
    "actor_rollout_ref": {
        "rollout": {"n": 5},
        "actor": {"clip_ratio": 0.2, "use_kl_loss": True, "kl_loss_coef": 0.001},
    },
    "data": {"max_response_length": 1024},
}
# The Hugging Face Trainer's W&B callback logs `train/<key>` without a step, with
# `train/global_step`, after `define_metric("*", step_metric="train/global_step")`
# (transformers/integrations/integration_utils.py, WandbCallback)
HF_ROWS = [
    (
        None,
        {
            "train/loss": 0.5 / i,
            "train/reward": 0.1 * i,
            "train/kl": 0.002 * i,
            "train/completions/mean_length": 30.0 + i,
            "train/frac_reward_zero_std": 0.25,
            "train/global_step": 10.0 * i,
        },
    )
    for i in (1, 2, 3)
]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store" / "outbox.sqlite"


def test_a_verl_run_is_one_run_at_its_steps_under_its_name(store: Path, tmp_path: Path) -> None:
    write_wandb_run(tmp_path / "logs", VERL_ROWS, name="qwen-7b-grpo", config=VERL_CONFIG)
    assert main(["import", str(tmp_path / "logs")]) == 0
    reg = registry.load()
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["qwen-7b-grpo"]
        record = box.run("qwen-7b-grpo")
        assert record is not None and record.framework == "verl"
        for name in ("actor/pg_loss", "actor/entropy", "critic/score/mean"):
            field = reg.resolve(name, "verl").field
            steps, values = box.series("qwen-7b-grpo", field)
            assert steps.tolist() == [1, 2, 3, 4]
            assert values.tolist() == pytest.approx([row[name] for _, row in VERL_ROWS])
        # verl's config: rollout.n is the group size, the KL is a loss term with its own
        # coefficient, data.max_response_length the length limit (verl/trainer/config)
        config = record.config
        assert config["algorithm"] == "GRPO" and config["group_size"] == 5
        assert config["clip_epsilon"] == 0.2 and config["kl_coef"] == 0.001
        assert config["max_length"] == 1024
        assert record.state == "finished"  # W&B's exit record, code 0


def test_the_run_step_metric_places_rows_logged_without_a_step(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_wandb_run(
        tmp_path / "logs",
        HF_ROWS,
        name="tiny-grpo",
        config={"num_generations": 4, "beta": 0.04, "max_completion_length": 64},
        step_metric="train/global_step",
        table=True,  # media are not metrics
    )
    assert main(["import", str(tmp_path / "logs")]) == 0
    assert "samples" not in capsys.readouterr().err
    reg = registry.load()
    with Outbox(store) as box:
        record = box.run("tiny-grpo")
        assert record is not None and record.framework == "trl"
        for name in ("train/loss", "train/reward", "train/kl", "train/completions/mean_length"):
            steps, values = box.series("tiny-grpo", reg.resolve(name, "trl").field)
            assert steps.tolist() == [10, 20, 30]  # not W&B's own counter 0, 1, 2
            assert values.tolist() == pytest.approx([row[name] for _, row in HF_ROWS])
        assert record.config["group_size"] == 4 and record.config["kl_coef"] == 0.04
        assert record.config["max_length"] == 64
        fields = box.fields("tiny-grpo") + box.fields("tiny-grpo", "unregistered")
    assert fields and not any("global_step" in f or "samples" in f for f in fields)


def test_a_row_missing_its_step_metric_is_named_not_misplaced(tmp_path: Path) -> None:
    rows = [*HF_ROWS[:2], (None, {"train/reward": 0.7})]  # no train/global_step in it
    folder = write_wandb_run(
        tmp_path / "logs",
        rows,
        name="gap",
        step_metric="train/global_step",
        glob="train/*",
        step_sync=False,  # so W&B does not copy the last step into the row
    )
    problems: list[Malformed] = []
    (log,) = folder.glob("run-*.wandb")
    records = list(WandbRunSource(log, problems.append).poll(final=True))
    assert [r.step for r in records] == [10, 20]  # never at W&B's own counter, 2
    assert [p.reason for p in problems] == [
        "history row 3 has no whole train/global_step, the step its keys are logged "
        "against; not placed"
    ]


def test_the_captured_console_is_not_read_a_second_time(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_wandb_run(
        tmp_path / "logs",
        VERL_ROWS,
        name="printed-too",
        config=VERL_CONFIG,
        print_before=["Total training steps: 4"],  # verl's trainer prints it before step 1
        print_rows=True,  # verl's console logger prints `step:N - key:value` lines
    )
    output = folder / "files" / "output.log"
    assert "step:1 - actor/pg_loss" in output.read_text()
    assert main(["import", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    assert "1 file(s)" in out
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["printed-too"]
        steps, _ = box.series("printed-too", "policy_loss")
        assert steps.tolist() == [1, 2, 3, 4]
        record = box.run("printed-too")
        # what the console printed before the metrics still gives the run its planned length
        assert record is not None and record.config["planned_steps"] == 4
    (position,) = Outbox(store).source_positions().values()
    assert position.path.endswith(".wandb")


def test_a_run_resumed_into_a_second_folder_is_one_run(store: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_wandb_run(logs, VERL_ROWS[:2], name="resumed", run_id="abc123")
    write_wandb_run(logs, VERL_ROWS[1:], name="resumed", run_id="abc123")
    other = write_wandb_run(logs, VERL_ROWS[:1], name="resumed")  # another run, same name
    assert main(["import", str(logs)]) == 0
    with Outbox(store) as box:
        runs = sorted(r.run for r in box.runs())
        other_id = other.name.rsplit("-", 1)[1]
        assert runs == ["resumed", f"resumed-{other_id[:8]}"]
        assert box.series("resumed", "policy_loss")[0].tolist() == [1, 2, 3, 4]


def test_a_growing_log_yields_each_record_once_wherever_it_was_cut(tmp_path: Path) -> None:
    rows = [(s, {"actor/pg_loss": 0.001 * s, "pad/" + "x" * 40: 1.0}) for s in range(1, 400)]
    folder = write_wandb_run(tmp_path / "logs", rows, name="long", config=VERL_CONFIG)
    (log,) = folder.glob("run-*.wandb")
    data = log.read_bytes()
    assert len(data) > 2 * BLOCK  # records span blocks: FIRST/MIDDLE/LAST chunks are read
    whole = [r.step for r in WandbRunSource(log, print).poll(final=True)]
    growing = tmp_path / "growing" / log.name
    growing.parent.mkdir()
    growing.write_bytes(b"")
    problems: list[Malformed] = []
    source = WandbRunSource(growing, problems.append)
    seen: list[int] = []
    for cut in [*range(0, len(data), 5003), len(data)]:
        with open(growing, "r+b") as fh:
            fh.seek(0, os.SEEK_END)
            fh.write(data[fh.tell() : cut])
        seen += [r.step for r in source.poll()]
    assert seen == whole == list(range(1, 400)) and problems == []


def test_a_damaged_record_is_named_and_the_rest_read(tmp_path: Path) -> None:
    folder = write_wandb_run(tmp_path / "logs", VERL_ROWS, name="damaged")
    (log,) = folder.glob("run-*.wandb")
    data = bytearray(log.read_bytes())
    # a middle one of the key's records (not a byte offset: where wandb's records fall in the
    # file varies from run to run, and the first history record sometimes lay past the middle)
    key = b"critic/score/mean"
    hits = [i for i in range(len(data)) if data.startswith(key, i)]
    assert len(hits) >= 3, hits
    data[hits[len(hits) // 2]] ^= 0xFF
    log.write_bytes(bytes(data))
    problems: list[Malformed] = []
    steps = [r.step for r in WandbRunSource(log, problems.append).poll(final=True)]
    assert any("checksum" in p.reason for p in problems)
    assert 1 in steps and len(steps) < 4


def test_without_wandb_the_import_names_the_extra(tmp_path: Path) -> None:
    write_wandb_run(tmp_path / "logs", VERL_ROWS[:1], name="needs-wandb")
    script = (
        "import sys; sys.modules['wandb'] = None\n"  # as if it were not installed
        "from rlvitals.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "RLVITALS_STORE": str(tmp_path / "store")}
    done = subprocess.run(
        [sys.executable, "-c", script, "import", str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    assert "pip install 'rlvitals[trackers]'" in done.stderr and "Traceback" not in done.stderr


def test_evaluate_replays_each_run_of_a_wandb_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_wandb_run(tmp_path / "logs", VERL_ROWS, name="one", config=VERL_CONFIG)
    write_wandb_run(tmp_path / "logs", VERL_ROWS, name="two")
    assert main(["evaluate", str(tmp_path / "logs" / "wandb")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert sorted(row.split(" | ")[0].strip("| ") for row in rows[2:]) == ["one", "two"]


def test_a_chosen_format_takes_only_that_tracker_s_runs(store: Path, tmp_path: Path) -> None:
    write_wandb_run(tmp_path / "logs", VERL_ROWS, name="from-wandb")
    write_mlflow_run(tmp_path / "logs" / "mlruns", VERL_ROWS, run_name="from-mlflow")
    assert main(["import", str(tmp_path / "logs"), "--format", "wandb"]) == 0
    assert main(["import", str(tmp_path / "logs"), "--format", "mlflow", "--run", "second"]) == 0
    with Outbox(store) as box:
        assert sorted(r.run for r in box.runs()) == ["from-wandb", "second"]
        assert box.series("second", "policy_loss")[0].tolist() == [1, 2, 3, 4]
