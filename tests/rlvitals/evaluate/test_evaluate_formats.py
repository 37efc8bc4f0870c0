"""`rlvitals evaluate` reads every format `import` reads (issue 35: it refused a folder of JSON
Lines with "no TensorBoard event files"): TensorBoard event files, JSON Lines, SB3's
progress.csv and progress.json, a trainer's console log, Hugging Face's trainer_state.json, an
MLflow file store and a W&B offline run, each written by its real writer where the repo has one.
Every run gets a row with cards (a status other than no_data / not read), alone and in a folder
of them all."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exporter.sources.discover import FORMATS
from rlvitals.cli import main
from tests.exporter.sources.consolemakers import verl_log
from tests.exporter.sources.logmakers import Sb3Csv, sb3_rows, write_event_file
from tests.exporter.sources.trackermakers import write_mlflow_run, write_wandb_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
N = 40  # SB3 dumps: enough updates for every card's window


def _numbers(row: dict[str, object]) -> dict[str, float]:
    return {k: float(v) for k, v in row.items() if isinstance(v, int | float)}


def _steps() -> list[tuple[int, dict[str, float]]]:
    return [(int(r["time/total_timesteps"]), _numbers(r)) for r in sb3_rows(N)]  # type: ignore[call-overload]


def _tensorboard(root: Path) -> Path:
    write_event_file(root / "tb", _steps())
    return root / "tb"


def _jsonl(root: Path) -> Path:
    run = root / "own-loop"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, **v}) + "\n" for s, v in _steps())
    )
    return run


def _sb3_csv(root: Path) -> Path:
    run = root / "sb3-csv"
    run.mkdir()
    writer = Sb3Csv(run / "progress.csv")
    for row in sb3_rows(N):
        writer.write(row)
    writer.close()
    return run


def _sb3_json(root: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "logs" / "sb3_ppo_json" / "PPO_1", root / "sb3-json"))


def _trainer_state(root: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "logs" / "hf_trainer" / "tiny-gpt2", root / "hf"))


def _console(root: Path) -> Path:
    run = root / "verl-console"
    run.mkdir()
    (run / "train.log").write_text(verl_log(range(1, N + 1)))
    return run


def _mlflow(root: Path) -> Path:
    store = root / "mlruns"
    write_mlflow_run(store, _steps(), run_name="mlflow-run", experiment="ppo")
    return store


def _wandb(root: Path) -> Path:
    write_wandb_run(root / "wb", _steps(), name="wandb-run")
    return root / "wb"


MAKERS: dict[str, Callable[[Path], Path]] = {
    "tensorboard": _tensorboard,
    "jsonl": _jsonl,
    "sb3-csv": _sb3_csv,
    "sb3-json": _sb3_json,  # SB3's progress.json is JSON Lines under its own file name
    "trainer-state": _trainer_state,
    "console": _console,
    "mlflow": _mlflow,
    "wandb": _wandb,
}


def test_every_format_import_discovers_has_a_maker_here() -> None:
    """`regex` is the user's own pattern over a text file (`--pattern`), tested on its own."""
    assert set(FORMATS) - {"regex"} <= set(MAKERS)


def _evaluate(*args: str) -> list[dict[str, Any]]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["evaluate", *args, "--json"])
    rows: list[dict[str, Any]] = json.loads(buffer.getvalue())
    assert code == 0, rows
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("formats")
    return {fmt: make(root) for fmt, make in MAKERS.items()}


@pytest.mark.parametrize("fmt", MAKERS)
def test_evaluate_gives_a_run_of_each_format_its_cards(runs: dict[str, Path], fmt: str) -> None:
    (row,) = _evaluate(str(runs[fmt]))
    assert row["end"] not in ("no_data", "not read"), row
    assert row["tags"] is None or row["tags"]["recognised"] > 0, row


def test_evaluate_of_a_folder_of_every_format_gives_each_run_its_row(
    runs: dict[str, Path],
) -> None:
    (root,) = {p.parent for p in runs.values()}
    rows = _evaluate(str(root))
    assert len(rows) == len(runs), [r["run"] for r in rows]
    assert all(r["end"] not in ("no_data", "not read") for r in rows), rows
