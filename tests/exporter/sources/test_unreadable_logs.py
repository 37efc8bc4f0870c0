"""Logs this process may not read are named, with the fix, never skipped unsaid.

Under docker compose the sidecar reads ./runs as uid 10001 (docs/compose.md); a trainer writing
with a private umask leaves its logs unreadable to it. The commands run here as a user that really
may not read them: as root (which reads anything), a forked child that has become `nobody`; as
anyone else, the process itself.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter import Outbox
from rlvitals.cli import main

NOBODY = 65534


def _jsonl(path: Path, steps: int = 5) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps({"step": i, "reward": 0.1 * i}) + "\n" for i in range(steps))
    )


@pytest.fixture
def runs() -> Iterator[Path]:
    """A folder anyone may enter (pytest's own tmp folders are private to their owner)."""
    top = Path(tempfile.mkdtemp(prefix="rlvitals-perm-"))
    try:
        top.chmod(0o755)
        (top / "store").mkdir()
        if os.getuid() == 0:
            os.chown(top / "store", NOBODY, NOBODY)
        yield top
    finally:
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chmod(Path(folder) / name, 0o700, follow_symlinks=False)
        for folder, dirs, files in os.walk(top, topdown=False):
            for name in files:
                (Path(folder) / name).unlink()
            for name in dirs:
                (Path(folder) / name).rmdir()
        top.rmdir()


def _run_unprivileged(argv: list[str], err: Path) -> int:
    """`rlvitals ARGV` with stderr into `err`, as a user the test's private files deny."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    if os.getuid() != 0:
        with err.open("w") as out:
            saved, sys.stderr = sys.stderr, out
            try:
                return main(argv)
            finally:
                sys.stderr = saved
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            # pytest has replaced sys.stderr (its capture), so both it and fd 2 go to `err`
            sys.stderr = open(err, "w", buffering=1)  # noqa: SIM115 (the child's whole life)
            os.dup2(sys.stderr.fileno(), 2)
            os.environ.clear()
            os.environ.update(env)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = main(argv)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _private(runs: Path) -> tuple[Path, Path]:
    """A readable run, a private file beside its log and a private run folder."""
    _jsonl(runs / "logs" / "open" / "metrics.jsonl")
    secret = runs / "logs" / "open" / "extra.jsonl"
    _jsonl(secret)
    secret.chmod(0o600)
    _jsonl(runs / "logs" / "private" / "metrics.jsonl")
    folder = runs / "logs" / "private"
    folder.chmod(0o700)
    for path in (runs / "logs", runs / "logs" / "open"):
        path.chmod(0o755)
    (runs / "logs" / "open" / "metrics.jsonl").chmod(0o644)
    if os.getuid() != 0:  # its owner could read it: take that away too
        secret.chmod(0o000)
        folder.chmod(0o000)
    return secret, folder


def test_import_names_each_unreadable_file_and_folder_with_the_fix(runs: Path) -> None:
    secret, folder = _private(runs)
    err = runs / "stderr.txt"
    code = _run_unprivileged(["import", str(runs / "logs"), "--store", str(runs / "store")], err)
    said = err.read_text()
    assert code == 0, said
    for path, fix in ((secret, f"chmod o+r {secret}"), (folder, f"chmod -R o+rX {folder}")):
        lines = [line for line in said.splitlines() if f"cannot read {path} " in line]
        assert len(lines) == 1, said
        assert "permission denied" in lines[0] and fix in lines[0] and "umask 022" in lines[0]
    with Outbox(runs / "store" / "outbox.sqlite") as ob:
        assert {r.run for r in ob.runs()} == {"open"}


def test_a_follower_says_it_once_and_reads_the_logs_once_they_are_readable(runs: Path) -> None:
    _, folder = _private(runs)
    err = runs / "stderr.txt"
    argv = ["tail", str(runs / "logs"), "--follow", "--poll", "0.2", "--max-polls", "40"]
    argv += ["--store", str(runs / "store")]
    if os.getuid() != 0:
        pytest.skip("the follower runs in this process: nothing can make the folder readable")
    pid = os.fork()
    if pid == 0:
        os._exit(_run_unprivileged(argv, err))
    deadline = time.monotonic() + 30
    while f"cannot read {folder} " not in (err.read_text() if err.exists() else ""):
        assert time.monotonic() < deadline, "the follower never named the private folder"
        time.sleep(0.05)
    folder.chmod(0o755)
    (folder / "metrics.jsonl").chmod(0o644)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, err.read_text()
    said = err.read_text()
    assert said.count(f"cannot read {folder} ") == 1, said  # 40 polls, said once
    with Outbox(runs / "store" / "outbox.sqlite") as ob:
        assert {r.run for r in ob.runs()} == {"open", "private"}
        steps, _ = ob.series("private", "nonfinite_count")  # every stored step writes it
        assert steps.tolist() == [0, 1, 2, 3, 4]
