"""What `rlvitals serve` says on its terminal, as a real process: `--logdir` is taken as
TensorBoard users type it; every option its follower advises is one `serve` has; a folder with no
logs yet is said to have none (it is followed for them, as `tensorboard --logdir` does); and
waitress's own queue notices ("Task queue depth is N", said whenever requests wait for a worker
thread) stay off the terminal unless `--verbose` asks for them."""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request
from pathlib import Path

from cli_hints import OPTION, hint_logs, options_of
from logdir_serve import WAIT_S, Served

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "runs" / "sb3_ppo_cartpole_healthy"


def _runs(url: str) -> set[str]:
    with urllib.request.urlopen(url + "/api/runs", timeout=10) as r:
        return {row["run"] for row in json.load(r)["runs"]}


def _until(what: str, ok: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (ok() if callable(ok) else ok):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def test_logdir_is_followed_as_tensorboard_users_type_it(tmp_path: Path) -> None:
    shutil.copytree(RUN, tmp_path / "runs" / "ppo")
    served = Served(tmp_path, "--logdir", "runs/")
    try:
        _until("the run is listed", lambda: "ppo" in _runs(served.url))
        assert "following runs/" in served.stderr
    finally:
        served.stop()


def test_every_option_the_follower_advises_is_one_serve_has(tmp_path: Path) -> None:
    logs = hint_logs(tmp_path)
    said = []
    served = Served(tmp_path, str(logs))
    try:
        _until("the logs' runs are listed", lambda: {"own", "hf", "amb"} <= _runs(served.url))
    finally:
        served.stop()
    said.append(served.stderr)
    # a file named alone whose format cannot be told: the follower says how to name it
    served = Served(tmp_path, "notes.txt")
    try:
        served.wait_said("pass --format")
    finally:
        served.stop()
    said.append(served.stderr)
    advised = set(OPTION.findall("\n".join(said)))
    assert {"--format", "--pattern", "--step-key", "--framework", "--set"} <= advised
    assert advised <= options_of("serve"), advised - options_of("serve")


def test_a_folder_with_no_logs_yet_is_said_to_have_none(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    served = Served(tmp_path, "runs/")
    try:
        served.wait_said("no logs under runs/ yet; looking again every 2 s")
        # and a run that appears later is followed
        shutil.copytree(RUN, tmp_path / "runs" / "ppo")
        _until("the new run is listed", lambda: "ppo" in _runs(served.url))
    finally:
        served.stop()


def _crowd(url: str, n: int = 40) -> None:
    """`n` requests at once, as a run page asking for every series of several runs does."""

    def get() -> None:
        with urllib.request.urlopen(url + "/api/runs", timeout=WAIT_S) as r:
            r.read()

    threads = [threading.Thread(target=get) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)


def test_waitress_queue_notices_are_shown_only_when_asked(tmp_path: Path) -> None:
    said = {}
    for flags in ([], ["--verbose"]):
        served = Served(tmp_path, "--threads", "1", *flags)
        try:
            for _ in range(3):
                _crowd(served.url)
        finally:
            served.stop()
        said[bool(flags)] = served.stderr
    # with --verbose the same crowd makes waitress say it (else this test could not fail)
    assert "Task queue depth is" in said[True]
    assert "Task queue depth" not in said[False]
