"""MLflow's file store, written by the real `mlflow` package, read by `rlvitals import` / `tail`
/ `evaluate` without it: one run per MLflow run, at its MLflow steps, under its run name, its
names translated by the registry, its params in the run context."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from trackermakers import end_mlflow_run, log_more, write_mlflow_run

import registry
from exporter import Outbox
from exporter.sources.mlflow_files import MlflowRunSource
from exporter.sources.record import Malformed, Record
from rlvitals.cli import main

# What a TRL GRPO run logs through the Hugging Face Trainer's MLflow callback: raw keys, at
# `state.global_step` (transformers/integrations/integration_utils.py, MLflowCallback.on_log)
GRPO_ROWS = [
    (
        step,
        {
            "reward": 0.1 * i,
            "kl": 0.001 * i,
            "completions/mean_length": 100.0 + i,
            "rewards/accuracy_reward/mean": 0.05 * i,
            "frac_reward_zero_std": 0.5,
        },
    )
    for i, step in enumerate((10, 20, 30, 40), start=1)
]
PARAMS = {"num_generations": 8, "beta": 0.04, "max_completion_length": 256, "epsilon": 0.2}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store" / "outbox.sqlite"


def test_an_mlflow_run_is_one_run_at_its_steps_under_its_run_name(
    store: Path, tmp_path: Path
) -> None:
    mlruns = tmp_path / "mlruns"
    write_mlflow_run(mlruns, GRPO_ROWS, run_name="qwen-0.5b-grpo", params=PARAMS)
    assert main(["import", str(mlruns)]) == 0
    reg = registry.load()
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["qwen-0.5b-grpo"]
        record = box.run("qwen-0.5b-grpo")
        assert record is not None and record.framework == "trl"
        for name in GRPO_ROWS[0][1]:
            field = reg.resolve(name, "trl").field
            steps, values = box.series("qwen-0.5b-grpo", field)
            assert steps.tolist() == [step for step, _ in GRPO_ROWS]
            assert values.tolist() == pytest.approx([row[name] for _, row in GRPO_ROWS])
        # the params name TRL's settings (GRPOConfig: num_generations is the group size, beta
        # the KL coefficient, max_completion_length the length limit, epsilon the clip range)
        config = record.config
        assert config["group_size"] == 8 and config["algorithm"] == "GRPO"
        assert config["kl_coef"] == 0.04 and config["max_length"] == 256
        assert config["clip_epsilon"] == 0.2
        assert record.state == "finished"  # MLflow's status FINISHED


def test_a_run_left_running_is_imported_without_a_normal_end(store: Path, tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    write_mlflow_run(mlruns, GRPO_ROWS[:2], run_name="crashed", end=False)
    try:
        assert main(["import", str(mlruns)]) == 0
    finally:
        end_mlflow_run()
    with Outbox(store) as box:
        record = box.run("crashed")
        assert record is not None and record.state == "ended"


def test_runs_of_one_name_stay_apart_by_their_id(store: Path, tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    first = write_mlflow_run(mlruns, GRPO_ROWS[:1], run_name="grpo")
    second = write_mlflow_run(mlruns, GRPO_ROWS[:3], run_name="grpo")
    unnamed = write_mlflow_run(mlruns, GRPO_ROWS[:2], run_name=None)
    assert main(["import", str(mlruns)]) == 0
    with Outbox(store) as box:
        runs = {r.run for r in box.runs()}
        # MLflow names a run it was given no name for itself (mlflow.tracking.fluent):
        # whatever it chose, it is in the run's tag, and the run is stored under it
        given = (unnamed / "tags" / "mlflow.runName").read_text()
        assert runs == {"grpo", f"grpo-{second.name[:8]}", given}
        assert box.series("grpo", "raw_reward")[0].tolist() == [10]
        assert box.series(f"grpo-{second.name[:8]}", "raw_reward")[0].tolist() == [10, 20, 30]
    assert first.name != second.name


def test_deleted_runs_and_logged_models_are_not_runs(store: Path, tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    run = write_mlflow_run(mlruns, GRPO_ROWS, run_name="kept")
    experiment = run.parent
    # MLflow moves a deleted run's folder to `.trash`; a logged model keeps metrics of its own
    # under `<experiment>/models/<model_id>/` (file_store.py)
    shutil.copytree(run, mlruns / ".trash" / "deadbeef")
    model = experiment / "models" / "m-1"
    shutil.copytree(run, model)
    (model / "traces.json").write_text('{"not": "a log"}\n')
    assert main(["import", str(mlruns)]) == 0
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["kept"]


def test_a_malformed_metric_line_is_named_and_the_rest_read(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlruns = tmp_path / "mlruns"
    run = write_mlflow_run(mlruns, GRPO_ROWS, run_name="damaged")
    reward = run / "metrics" / "reward"
    lines = reward.read_text().splitlines()
    lines[1] = "1700000000000 not-a-number 20"
    reward.write_text("\n".join(lines) + "\n")
    assert main(["import", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{reward}:2: not an MLflow metric line" in err
    with Outbox(store) as box:
        assert box.series("damaged", "raw_reward")[0].tolist() == [10, 30, 40]


def test_a_growing_run_is_read_on_from_where_each_file_stopped(tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    run = write_mlflow_run(mlruns, GRPO_ROWS[:2], run_name="live", end=False)
    problems: list[Malformed] = []
    source = MlflowRunSource(run, problems.append)
    try:
        first = list(source.poll())
        log_more(GRPO_ROWS[2:])
        # a line MLflow is still writing (no newline yet) waits for the next poll
        with open(run / "metrics" / "kl", "a") as fh:
            fh.write("1700000000000 0.5")
        second = list(source.poll())
        with open(run / "metrics" / "kl", "a") as fh:
            fh.write(" 50\n")
        third = list(source.poll())
    finally:
        end_mlflow_run()
    assert [r.step for r in first] == [10, 20]
    assert [r.step for r in second] == [30, 40]
    assert second[0].values == pytest.approx(GRPO_ROWS[2][1])
    assert third == [Record(step=50, values={"kl": 0.5}, wall_time=1_700_000_000.0)]
    assert list(source.poll()) == [] and problems == []


def test_tail_of_a_growing_run_stores_each_step_once(store: Path, tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    write_mlflow_run(mlruns, GRPO_ROWS[:2], run_name="followed", end=False)
    try:
        assert main(["tail", str(mlruns), "--no-follow"]) == 0
        log_more(GRPO_ROWS[2:])
        assert main(["tail", str(mlruns), "--no-follow"]) == 0  # a restarted sidecar
    finally:
        end_mlflow_run()
    with Outbox(store) as box:
        assert [r.run for r in box.runs()] == ["followed"]
        steps, values = box.series("followed", "raw_reward")
        assert steps.tolist() == [10, 20, 30, 40]
        assert values.tolist() == pytest.approx([row["reward"] for _, row in GRPO_ROWS])


def test_a_value_logged_again_at_a_step_keeps_the_last(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlruns = tmp_path / "mlruns"
    # a resumed run logs its last steps again (MLflow appends; its "latest" is the newest);
    # MLflow writes NaN as `nan`, read as a non-finite value, not as a bad line
    rows = [*GRPO_ROWS[:3], (20, {"reward": 9.0}), (40, {"reward": float("nan")})]
    write_mlflow_run(mlruns, rows, run_name="resumed")
    assert main(["import", str(mlruns)]) == 0
    out, err = capsys.readouterr()
    assert "non-finite 1" in out and "skipped" not in err
    with Outbox(store) as box:
        steps, values = box.series("resumed", "raw_reward")
    assert steps.tolist() == [10, 20, 30]
    assert values.tolist() == pytest.approx([0.1, 9.0, 0.3])


def test_evaluate_replays_each_mlflow_run_of_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlruns = tmp_path / "mlruns"
    write_mlflow_run(mlruns, GRPO_ROWS, run_name="first-run", params=PARAMS)
    write_mlflow_run(mlruns, GRPO_ROWS, run_name="second-run", experiment="other")
    assert main(["evaluate", str(mlruns)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert sorted(row.split(" | ")[0].strip("| ") for row in rows[2:]) == [
        "first-run",
        "second-run",
    ]


def test_verl_s_flattened_config_params_give_its_run_context(store: Path, tmp_path: Path) -> None:
    # verl's MLflow logger logs its whole config flattened with "/" (verl/utils/tracking.py,
    # _flatten_dict(..., sep="/")), so each param is a sub-folder of params/
    params = {
        "algorithm/adv_estimator": "grpo",
        "algorithm/use_kl_in_reward": False,
        "actor_rollout_ref/rollout/n": 5,
        "actor_rollout_ref/actor/clip_ratio": 0.28,
        "actor_rollout_ref/actor/use_kl_loss": True,
        "actor_rollout_ref/actor/kl_loss_coef": 0.001,
        "data/max_response_length": 2048,
    }
    rows = [(s, {"actor/pg_loss": 0.1, "critic/score/mean": 0.5}) for s in (1, 2, 3)]
    run = write_mlflow_run(tmp_path / "mlruns", rows, run_name="verl-grpo", params=params)
    assert (run / "params" / "actor_rollout_ref" / "rollout" / "n").read_text() == "5"
    assert main(["import", str(tmp_path / "mlruns")]) == 0
    with Outbox(store) as box:
        record = box.run("verl-grpo")
    assert record is not None and record.framework == "verl"
    config = record.config
    assert config["algorithm"] == "GRPO" and config["group_size"] == 5
    assert config["clip_epsilon"] == 0.28 and config["kl_coef"] == 0.001
    assert config["max_length"] == 2048
