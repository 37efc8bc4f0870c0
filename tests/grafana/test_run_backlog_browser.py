"""The run page says when rows wait to be sent to InfluxDB (issue 39, item 5): while the store's
forwarder has a backlog, fails or drains, a line under the header gives the rows waiting, how
long the oldest has waited, the rate and the forwarder's state, as the forwarder noted them in
the store; with nothing waiting the line is hidden. Real app over HTTP, headless Chromium."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from browser_page import Page, serving

import exporter
import registry
from exporter.store.outbox import ForwarderState, Outbox
from grafana.live import UI

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

WAIT_MS = 20_000


def _note(store: Path, state: str, backlog: int, oldest_age: float, rate: float) -> None:
    now = time.time()
    with Outbox(store / "outbox.sqlite") as box:
        box.note_forwarder(
            ForwarderState(
                owner="test",
                pid=4242,
                host="here",
                started=now - 60,
                updated=now,
                state=state,
                detail="InfluxDB at http://db:8086 answered 500: disk full"
                if state == "failing"
                else "",
                sent=1000,
                rate=rate,
                backlog=backlog,
                oldest=now - oldest_age,
            )
        )


def test_the_run_page_shows_the_backlog_while_rows_wait_and_hides_it_after(
    tmp_path: Path, browser: object, builtin: registry.Registry
) -> None:
    store = tmp_path / "store"
    settings = exporter.ExporterSettings(store=store, policy="warn")
    with exporter.init("alpha", registry=builtin, settings=settings, framework="sb3") as run:
        for step in range(12):
            run.log(step, {"train/approx_kl": 0.01})
    _note(store, "failing", 12_345, 30.0, 0.0)
    with serving(store, builtin) as url:
        tab = Page(browser, url)
        try:
            tab.open_run("run=alpha&refresh=1")
            page = tab.page
            line = page.locator("#run-backlog")
            page.wait_for_selector(
                "#run-backlog[data-ready='1']", state="attached", timeout=WAIT_MS
            )
            assert line.is_visible()
            text = line.inner_text()
            words = UI["en"]
            assert text.startswith(words["backlog"].split("{rows}")[0])
            assert "12,345" in text and "failing" in text
            waited = re.search(r"(\d+) s ago", text)
            assert waited and 30 <= int(waited.group(1)) < 300, text  # noted 30 s old
            assert "disk full" in text and line.get_attribute("data-state") == "failing"
            # the forwarder caught up: at the next poll the line goes
            _note(store, "sending", 0, 0.0, 41_000.0)
            page.wait_for_selector("#run-backlog", state="hidden", timeout=WAIT_MS)
        finally:
            tab.close()
