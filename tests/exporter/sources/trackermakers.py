"""Makers of other trackers' real local runs: an MLflow file store written by the `mlflow`
package itself, and W&B offline run folders written by `wandb` itself (in a child interpreter:
wandb starts its own service process and keeps global state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Rows = Iterable[tuple[int, Mapping[str, float]]]


@contextmanager
def _file_store_allowed() -> Iterator[None]:
    # MLflow >= 3.13 refuses to open a file store unless this is set
    # (mlflow/store/tracking/file_store.py, mlflow/environment_variables.py)
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if before is None:
            del os.environ["MLFLOW_ALLOW_FILE_STORE"]
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before


def write_mlflow_run(
    store: Path,
    rows: Rows,
    *,
    run_name: str | None,
    params: Mapping[str, Any] | None = None,
    experiment: str = "grpo",
    end: bool = True,
) -> Path:
    """One run logged with `mlflow.log_metric(key, value, step=step)` into the file store at
    `store`; returns its run folder. With `end=False` the run is left RUNNING (still active:
    `log_more` goes on with it)."""
    import mlflow

    with _file_store_allowed():
        mlflow.set_tracking_uri("file:" + str(store))
        mlflow.set_experiment(experiment)
        run = mlflow.start_run(run_name=run_name)
        if params:
            mlflow.log_params(dict(params))
        log_more(rows)
        if end:
            mlflow.end_run()
    info = run.info
    return store / info.experiment_id / info.run_id


def log_more(rows: Rows) -> None:
    """More points of the active MLflow run."""
    import mlflow

    with _file_store_allowed():
        for step, values in rows:
            for key, value in values.items():
                mlflow.log_metric(key, value, step=step)


def end_mlflow_run() -> None:
    import mlflow

    with _file_store_allowed():
        mlflow.end_run()


_WANDB_SCRIPT = r"""
import json, os, sys
spec = json.loads(sys.stdin.read())
import wandb
run = wandb.init(dir=spec["dir"], project="p", name=spec["name"], config=spec["config"],
                 id=spec["id"], resume="allow" if spec["id"] else None)
for line in spec["print_before"]:  # printed after init: what W&B captures
    print(line, flush=True)
if spec["step_metric"]:
    run.define_metric(spec["step_metric"])
    run.define_metric(spec["glob"], step_metric=spec["step_metric"], step_sync=spec["sync"])
for row in spec["rows"]:
    if spec["print_rows"]:
        print(" - ".join([f"step:{row['step']}"] + [f"{k}:{v}" for k, v in row["values"].items()]),
              flush=True)
    if row["step"] is None:
        run.log(row["values"])
    else:
        run.log(row["values"], step=row["step"])
if spec["table"]:
    run.log({"samples": wandb.Table(columns=["prompt", "reward"], data=[["2+2", 1.0]])})
run.finish()
"""


def write_wandb_run(
    root: Path,
    rows: Iterable[tuple[int | None, Mapping[str, float]]],
    *,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
    step_metric: str | None = None,
    glob: str = "*",
    step_sync: bool = True,
    run_id: str | None = None,
    print_before: Iterable[str] = (),
    print_rows: bool = False,
    table: bool = False,
) -> Path:
    """One W&B offline run under `root` (`wandb.init(dir=root)`, `WANDB_MODE=offline`), each row
    logged with `wandb.log(values, step=step)` (no `step` when None); with `step_metric`, the
    run defines it as the step of the keys matching `glob` (`step_sync`: W&B copies its last
    value into a row that lacks it), as the Hugging Face Trainer's W&B callback does. `print_before` lines are printed after `wandb.init` (W&B captures the console
    from there), before the rows. Returns the new run folder."""
    root.mkdir(parents=True, exist_ok=True)
    before = set((root / "wandb").glob("*run-*"))
    spec = {
        "dir": str(root),
        "name": name,
        "config": dict(config or {}),
        "id": run_id,
        "step_metric": step_metric,
        "glob": glob,
        "sync": step_sync,
        "rows": [{"step": step, "values": dict(values)} for step, values in rows],
        "print_before": list(print_before),
        "print_rows": print_rows,
        "table": table,
    }
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("WANDB_DIR", None)
    subprocess.run(
        [sys.executable, "-c", _WANDB_SCRIPT],
        input=json.dumps(spec),
        text=True,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (folder,) = set((root / "wandb").glob("*run-*")) - before - {root / "wandb" / "latest-run"}
    return folder
