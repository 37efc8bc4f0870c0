"""`rlvitals serve LOGDIR` (docs/serve.md): pointed at a folder of SB3 TensorBoard
runs it lists them in a page left open in Chromium, picks up a run started later and new steps
of a run being written, without a reload; a bad file in the folder is named on stderr and
skipped, the rest read; the terminal and the page name the store (absolute) and the folder; a
second start on the same store reads only what is new and renames nothing. Real processes
(`python -m rlvitals serve` under waitress), real event files written with tensorboard's own
writer under SB3's tag names, headless Debian Chromium."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page
from logdir_serve import ROLLOUT, WAIT_S, Sb3Writer, Served

from exporter.store import Outbox

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")


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
