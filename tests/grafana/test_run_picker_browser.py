"""The run page has a run selector: in a real headless Chromium against the real app, another run
of the store is added to the overlay from the page itself and one is taken off, the rest of the
view kept in the address (here the column count)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_page import Page, serving

import exporter
import registry

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

NAMES = ["ppo-a", "ppo-b", "ppo-c"]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Iterator[str]:
    store = tmp_path_factory.mktemp("picker")
    for i, name in enumerate(NAMES):
        with exporter.init(
            name,
            framework="sb3",
            registry=builtin,
            settings=exporter.ExporterSettings(store=store, policy="warn"),
        ) as run:
            for step in range(0, 10_240, 1024):
                run.log(
                    step, {"train/approx_kl": 0.01 * (i + 1), "rollout/ep_rew_mean": step / 100}
                )
    with serving(store, builtin) as url:
        yield url


def _chips(page: Any) -> list[str]:
    return [c.get_attribute("data-run") for c in page.locator(".run-chip").all()]


def test_a_run_is_added_and_taken_off_from_the_run_page(browser: Any, base_url: str) -> None:
    tab = Page(browser, base_url)
    page = tab.open_run("run=ppo-a&cols=3")
    assert _chips(page) == ["ppo-a"]
    select = page.locator("#add-run")
    page.wait_for_function("() => !document.getElementById('add-run').disabled")
    options = [o for o in select.locator("option").all_inner_texts()][1:]
    assert options == ["ppo-b", "ppo-c"]  # the store's other runs
    select.select_option("ppo-c")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('.run-chip').length === 2")
    assert _chips(page) == ["ppo-a", "ppo-c"]
    assert "cols=3" in page.url and page.url.count("run=") == 2
    page.locator("a.remove-run", has_text="ppo-a").click()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('.run-chip').length === 1")
    assert _chips(page) == ["ppo-c"] and "cols=3" in page.url
    assert page.locator("a.remove-run").count() == 0  # the last run stays
    assert tab.errors == [] and tab.outside == []
    tab.close()
