"""The command line under a pipe that closes early (`rlvitals runs --json | head`): it stops
quietly, with the shell's exit status for SIGPIPE, and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from exporter.store.outbox import Outbox

ROOT = Path(__file__).resolve().parents[2]


def test_runs_json_into_a_pipe_closed_early_prints_no_traceback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Outbox(store / "outbox.sqlite") as box:
        for i in range(2000):  # well past a pipe's 64 KiB buffer once printed
            box.claim_run(f"run-{i:04d}")
    child = subprocess.Popen(
        [sys.executable, "-m", "rlvitals.cli", "runs", "--store", str(store), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert child.stdout is not None and child.stderr is not None
    head = child.stdout.read(100)
    child.stdout.close()  # what `head` does once it has its lines
    err = child.stderr.read().decode()
    code = child.wait(60)
    assert head.startswith(b"[")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
