"""`rlvitals serve LOGDIR` follows a trainer's console log as it is printed (docs/console-logs.md):
a log that holds only a banner when serve starts is picked up once metric lines appear, and its
steps reach the store as they are printed. A real serve process, real files."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from logdir_serve import WAIT_S, Served

from exporter.store import Outbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter" / "sources"))
from consolemakers import ray, verl_line, verl_metrics


def _steps(store: Path, run: str) -> list[int]:
    path = store / "outbox.sqlite"
    if not path.exists():
        return []
    with Outbox(path) as box:
        if box.run(run) is None:
            return []
        return [int(s) for s in box.series(run, "policy_loss")[0].tolist()]


def _until(what: str, ok: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_serve_follows_a_console_log_from_its_banner_to_its_metric_lines(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "store"
    log = logs / "qwen-grpo" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text("2025-01-01 06:50:29 INFO worker.py:1752 -- Started a local Ray instance.\n")
    served = Served(tmp_path, str(logs), "--store", str(store), "--poll", "0.2")
    try:
        with open(log, "a") as fh:
            for step in (1, 2, 3):
                fh.write(ray(verl_line(step, verl_metrics(step))) + "\n")
                fh.flush()
        _until("the first three steps stored", lambda: _steps(store, "qwen-grpo") == [1, 2, 3])
        with open(log, "a") as fh:
            fh.write(ray(verl_line(4, verl_metrics(4))) + "\n")
        _until("the fourth step stored", lambda: _steps(store, "qwen-grpo") == [1, 2, 3, 4])
    finally:
        served.stop()
