"""A dashboard started with RLVITALS_DATASOURCE_TOKEN (as compose starts it) is usable from a
browser: in a real headless Chromium against a real `rlvitals serve` process, a page opened
without signing in leads to the sign-in page, a wrong token says so, the right one returns to
the page asked for with its runs and charts, and the session survives a reload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page
from serve_process import Served

import exporter
import registry

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

TOKEN = "team-token-0123456789abcdef"


@pytest.fixture
def locked_serve(tmp_path: Path, builtin: registry.Registry) -> Iterator[str]:
    store = tmp_path / "store"
    run = exporter.init(
        "ppo-team",
        framework="sb3",
        registry=builtin,
        settings=exporter.ExporterSettings(store=store, policy="warn"),
    )
    for step in range(0, 20_000, 2048):
        run.log(step, {"train/approx_kl": 0.01, "rollout/ep_rew_mean": step / 100})
    run.finish()
    env = {"RLVITALS_STORE": str(store), "RLVITALS_DATASOURCE_TOKEN": TOKEN}
    server = Served(tmp_path, env=env)
    try:
        yield server.url
    finally:
        server.kill()


def test_a_browser_signs_in_once_and_gets_the_page_it_asked_for(
    browser: Any, locked_serve: str
) -> None:
    tab = Page(browser, locked_serve)
    page = tab.page
    page.goto(locked_serve + "/run?run=ppo-team")
    assert page.url.startswith(locked_serve + "/login?next=")
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    error = page.locator("#login-error")
    error.wait_for(state="visible")
    assert "wrong token" in error.inner_text()
    assert page.url.startswith(locked_serve + "/login")
    # the browser logs the refused POST's 401 itself; nothing after signing in may fail
    assert all("401" in e for e in tab.errors)
    tab.errors.clear()
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(locked_serve + "/run?run=ppo-team")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator("#error").is_hidden()
    assert page.locator(".run-chip").get_attribute("data-run") == "ppo-team"
    # the session is a cookie the page cannot read: no token in script reach
    assert TOKEN not in page.evaluate("document.cookie")
    page.goto(locked_serve + "/")
    page.wait_for_selector('tr[data-run="ppo-team"]')
    page.reload()
    page.wait_for_selector('tr[data-run="ppo-team"]')
    assert tab.errors == [] and tab.outside == []
    tab.close()


def test_another_browser_without_the_cookie_is_still_refused(
    browser: Any, locked_serve: str
) -> None:
    tab = Page(browser, locked_serve)
    answer = tab.page.request.get(locked_serve + "/api/runs")
    assert answer.status == 401
    tab.close()
