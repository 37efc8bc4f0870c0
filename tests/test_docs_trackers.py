"""docs/trackers.md is true command by command: every line of its `bash` blocks is run, in the
page's order, in a fresh folder (its example writes the W&B and MLflow runs the rest reads), and
each is checked against what the page says it does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from test_readme_commands import _command, _get, _run, _serving

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "trackers.md"
_FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)

INSTALL = "pip install -e '.[trackers]'"
EXAMPLE = "python examples/tracker_runs.py"
IMPORT = "rlvitals import wandb/ mlruns/"
RUNS = "rlvitals runs"
EVALUATE = "rlvitals evaluate wandb/ mlruns/"
TAIL = "rlvitals tail wandb/ mlruns/ --no-follow"
SERVE = "rlvitals serve wandb/ mlruns/"
RUN_NAMES = {"grpo-wandb", "grpo-mlflow"}  # the names the example gives its runs


def page_commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        _command(line)
        for block in _FENCE.findall(text)
        for line in block.splitlines()
        if _command(line)
    ]


def test_the_page_shows_these_commands_in_this_order() -> None:
    # a command added to the page without a check here fails this
    assert page_commands() == [INSTALL, EXAMPLE, IMPORT, RUNS, EVALUATE, TAIL, SERVE]


def test_the_trackers_extra_installs_what_the_readers_and_the_example_import() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["trackers"]
    assert {re.split(r"[=<>\[ ]", r, maxsplit=1)[0] for r in extra} == {"wandb", "mlflow-skinny"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Would install" not in done.stdout, done.stdout


def test_the_page_commands_do_what_it_says(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    _run(EXAMPLE, tmp_path)
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert list((tmp_path / "mlruns").glob("*/*/metrics"))

    imported = _run(IMPORT, tmp_path)
    for name in RUN_NAMES:
        line = next(x for x in imported.stdout.splitlines() if x.startswith(f"run '{name}'"))
        assert "60 steps" in line and "framework trl" in line and "now finished" in line

    listed = _run(RUNS, tmp_path).stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in listed[1:]}
    assert set(rows) == RUN_NAMES
    assert all(row[2] == "trl" and row[3] == "finished" for row in rows.values())
    assert "W&B recorded the run's exit with code 0" in "\n".join(listed)
    assert "MLflow recorded the run FINISHED" in "\n".join(listed)

    evaluated = _run(EVALUATE, tmp_path).stdout
    table = [line for line in evaluated.splitlines() if line.startswith("| ")][2:]
    assert {row.split(" | ")[0].strip("| ") for row in table} == RUN_NAMES

    tailed = _run(TAIL, tmp_path)
    assert set(re.findall(r"run '([\w-]+)'", tailed.stdout)) == RUN_NAMES
    # the same runs again, no copies: a tail goes on with the runs an import made
    assert {x.split()[0] for x in _run(RUNS, tmp_path).stdout.splitlines()[1:]} == RUN_NAMES


def test_serve_follows_both_folders(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    _run(EXAMPLE, tmp_path)
    with _serving(SERVE, tmp_path) as base:
        deadline = time.monotonic() + 120
        while True:
            runs = json.loads(_get(base + "/api/runs", "application/json"))["runs"]
            listed = {r["run"] for r in runs}
            if listed >= RUN_NAMES:
                break
            assert time.monotonic() < deadline, f"after 120 s the run list has {sorted(listed)}"
            time.sleep(0.5)
