"""`rlvitals serve LOGDIR` (README, "Watch runs live"): pointed at a folder of SB3 TensorBoard
runs it lists them in a page left open in Chromium, picks up a run started later and new steps
of a run being written, without a reload; a bad file in the folder is named on stderr and
skipped, the rest read; the terminal and the page name the store (absolute) and the folder; a
second start on the same store reads only what is new and renames nothing. Real processes
(`python -m rlvitals serve` under waitress), real event files written with tensorboard's own
writer under SB3's tag names, headless Debian Chromium."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from exporter.store import Outbox

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

ROOT = Path(__file__).resolve().parents[2]
# generous: the machine the suite runs on may be loaded (a serve process starts in seconds)
WAIT_S = 90.0
# What SB3's TensorBoard output writes for PPO (stable_baselines3/common/logger.py, the keys
# of on_policy_algorithm.py and ppo.py), one value each per 2048-step rollout.
SB3_TAGS = (
    "rollout/ep_rew_mean",
    "rollout/ep_len_mean",
    "time/fps",
    "train/approx_kl",
    "train/clip_fraction",
    "train/entropy_loss",
    "train/learning_rate",
    "train/value_loss",
)
ROLLOUT = 2048


class Sb3Writer:
    """One SB3 run's event file, kept open and appended to as SB3's TensorBoard output does."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(folder))
        self.rollouts = 0

    def write(self, rollouts: int) -> int:
        """`rollouts` more rollouts' values, flushed; returns the last step written."""
        for _ in range(rollouts):
            self.rollouts += 1
            step = self.rollouts * ROLLOUT
            for i, tag in enumerate(SB3_TAGS):
                value = 3e-4 if tag == "train/learning_rate" else 0.01 * (i + 1) + step * 1e-6
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
                self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()
        return self.rollouts * ROLLOUT

    def close(self) -> None:
        self._writer.close()


class Served:
    """`python -m rlvitals serve ARGV` started in `cwd`, its stderr collected as it comes."""

    def __init__(self, cwd: Path, *argv: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        env["PYTHONPATH"] = str(ROOT)  # this checkout's code, not an installed copy's
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvitals", "serve", "--port", "0", *argv],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_url()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def _wait_url(self) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = re.search(r"on (http://127\.0\.0\.1:\d+)/ reading", self.stderr)
            if found:
                return found.group(1)
            assert self.proc.poll() is None, self.stderr
            time.sleep(0.1)
        raise AssertionError(f"serve printed no address in {WAIT_S:.0f} s:\n{self.stderr}")

    def wait_said(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.stderr:
            assert time.monotonic() < deadline, f"{text!r} never said:\n{self.stderr}"
            time.sleep(0.1)

    def stop(self) -> str:
        """SIGTERM, as a stopped container gets; what it printed on stdout (the run lines)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=WAIT_S)
        self._reader.join(5)
        assert self.proc.returncode == 0, self.stderr
        return out


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Sb3Writer]]]:
    """`runs/` under a working folder: PPO_1 and PPO_2 (SB3 TensorBoard runs) and a file named
    like an event file that holds no events."""
    runs = tmp_path / "work" / "runs"
    writers = {name: Sb3Writer(runs / name) for name in ("PPO_1", "PPO_2")}
    writers["PPO_1"].write(5)
    writers["PPO_2"].write(3)
    bad = runs / "broken" / "events.out.tfevents.1700000000.host.1.0"
    bad.parent.mkdir()
    bad.write_bytes(b"this is not a TensorBoard event file\n" * 8)
    yield runs, writers
    for writer in writers.values():
        writer.close()


def _rows(page: Any) -> dict[str, str]:
    return {
        str(tr.get_attribute("data-run")): tr.locator(".last-step").inner_text()
        for tr in page.locator("table.runs tbody tr").all()
    }


def _wait_rows(page: Any, want: dict[str, int]) -> None:
    """Until the run list shows each run of `want` with that last step (as the page formats)."""
    shown = {name: f"{step:,}" for name, step in want.items()}
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = _rows(page)
        if all(rows.get(name) == step for name, step in shown.items()):
            return
        assert time.monotonic() < deadline, f"the page shows {rows}, not {shown}"
        page.wait_for_timeout(200)


def test_serve_logdir_lists_runs_and_follows_new_runs_and_steps_in_an_open_page(
    browser: Any, folder: tuple[Path, dict[str, Sb3Writer]]
) -> None:
    runs, writers = folder
    work = runs.parent
    store = work / "store"
    served = Served(work, "runs", "--store", "store", "--poll", "0.2")
    tab = Page(browser, served.url)
    try:
        # the terminal names the store, absolute, and the folder
        assert f"store {store}" in served.stderr
        assert f"following runs ({runs})" in served.stderr
        page = tab.page
        page.goto(served.url + "/?refresh=1")
        page.evaluate("window.__notReloaded = true")
        _wait_rows(page, {"PPO_1": 5 * ROLLOUT, "PPO_2": 3 * ROLLOUT})
        # the bad file: named on stderr and skipped, the other runs read
        served.wait_said("skipped runs/broken/events.out.tfevents.1700000000.host.1.0")
        # the page names the store it reads and the folder followed, with its logs counted
        line = page.locator("#reading")
        deadline = time.monotonic() + WAIT_S
        while "following: runs (3 logs)" not in line.inner_text():
            assert time.monotonic() < deadline, line.inner_text()
            page.wait_for_timeout(200)
        assert line.inner_text().startswith(f"store: {store} · ")
        assert page.locator("#follow-error").is_hidden()

        # a run started later and new steps of a run being written show without a reload
        writers["PPO_3"] = Sb3Writer(runs / "PPO_3")
        writers["PPO_3"].write(2)
        writers["PPO_1"].write(4)
        _wait_rows(page, {"PPO_1": 9 * ROLLOUT, "PPO_2": 3 * ROLLOUT, "PPO_3": 2 * ROLLOUT})
        assert page.evaluate("window.__notReloaded") is True
        while "following: runs (4 logs)" not in line.inner_text():
            assert time.monotonic() < deadline + WAIT_S, line.inner_text()
            page.wait_for_timeout(200)
        tab.shot("serve-logdir-run-list.png")
    finally:
        tab.close()
        first = served.stop()
    assert "run 'PPO_1': 9 steps" in first, first

    # written while serve was down, then a second start on the same store
    writers["PPO_1"].write(2)
    again = Served(work, "runs", "--store", "store", "--poll", "0.2")
    try:
        again.wait_said("file(s) go on from where the last reader stopped")
        deadline = time.monotonic() + WAIT_S
        while True:
            with Outbox(store / "outbox.sqlite") as box:
                last = box.last_step("PPO_1")
            if last == 11 * ROLLOUT:
                break
            assert time.monotonic() < deadline, f"PPO_1 ends at step {last}"
            time.sleep(0.2)
    finally:
        second = again.stop()
    # only what is new was read: PPO_1's two new rollouts, nothing of the others
    assert "run 'PPO_1': 2 steps, 16 values" in second, second
    assert "run 'PPO_2': 0 steps" in second and "run 'PPO_3': 0 steps" in second, second
    with Outbox(store / "outbox.sqlite") as box:
        names = sorted(r.run for r in box.runs())
        counts = {s.field: s.count for s in box.stats("PPO_1")}
        kinds = {e.kind for e in box.events("PPO_1")}
    assert names == ["PPO_1", "PPO_2", "PPO_3"]  # no PPO_1-2: the run went on
    assert counts and set(counts.values()) == {11}, counts  # every stored series: 11 points
    assert "resume" not in kinds, kinds
