"""The run list (`/` in a browser) keeps itself current, in a real headless Chromium against the
real app over HTTP, reading an embedded store the real exporter writes while the page is open:
runs appear without a reload (also on a store that was empty), statuses and last steps follow,
the filter box narrows the rows (substring or /regex/, kept in the address) and the status
badges have their colours, labels and hover text. Every page must leave the console free of
errors and ask nothing of any other host (`Page.close`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page, serving
from installed import installed

import exporter
import registry
from grafana.live import UI

installed("playwright.sync_api", "playwright")

# A poll is every 5 s by default (?refresh=1 makes it 1 s): a new row must show within this.
APPEAR_MS = 20_000


def _start(
    store: Path, reg: registry.Registry, name: str, project: str = "cartpole"
) -> exporter.Run:
    """A run begun by the real exporter, a few steps logged and flushed into the store."""
    run = exporter.init(
        name,
        project=project,
        framework="sb3",
        config={"seed": 1},
        registry=reg,
        settings=exporter.ExporterSettings(store=store, policy="warn"),
    )
    for step in range(12):
        run.log(step, {"train/approx_kl": 0.01 + step * 1e-4, "rollout/ep_rew_mean": float(step)})
    assert run.flush()
    return run


def _logged(store: Path, reg: registry.Registry, name: str, project: str = "cartpole") -> None:
    """A whole run: started, logged, finished."""
    _start(store, reg, name, project).finish()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def base_url(store: Path, builtin: registry.Registry) -> Iterator[str]:
    store.mkdir()
    with serving(store, builtin) as url:
        yield url


@pytest.fixture
def tab(browser: Any, base_url: str) -> Iterator[Page]:
    page = Page(browser, base_url)
    yield page
    page.close()


def _visible_runs(page: Any) -> list[str]:
    return [
        r.get_attribute("data-run")
        for r in page.locator("table.runs tbody tr").all()
        if r.is_visible()
    ]


def _wait_row(page: Any, name: str) -> Any:
    """The row of `name` once a poll has added it (attached: the filter may hide it)."""
    page.wait_for_selector(f'tr[data-run="{name}"]', state="attached", timeout=APPEAR_MS)
    return page.locator(f'tr[data-run="{name}"]')


def test_empty_store_page_shows_the_first_run_without_reload(
    tab: Page, store: Path, builtin: registry.Registry
) -> None:
    page = tab.page
    page.goto(tab.base + "/")  # the default 5 s poll
    # the message names the store it read, absolute (docs/serve.md)
    assert page.locator("p.empty").inner_text() == UI["en"]["no_runs_in"].format(store=store)
    assert page.locator("table.runs").is_hidden() and page.locator("#filter").is_hidden()
    page.evaluate("window.__notReloaded = true")
    run = _start(store, builtin, "ppo-first")
    row = _wait_row(page, "ppo-first")
    assert row.is_visible()
    assert page.locator("p.empty").is_hidden() and page.locator("#filter").is_visible()
    assert page.evaluate("window.__notReloaded") is True
    cells = row.locator("td").all_inner_texts()
    assert cells[0].strip() == "ppo-first" and cells[1:3] == ["cartpole", "sb3"]
    assert row.locator(".run-status").inner_text() == UI["en"]["live"]
    assert row.locator(".last-step").inner_text() == "11"
    assert cells[5].endswith(" UTC")
    assert row.locator("a.run-link").get_attribute("href") == "/run?run=ppo-first&lang=en"
    polled = row.evaluate("tr => tr.outerHTML")
    # The row the poll built is the row the server renders for the same run.
    page.reload()
    assert page.locator('tr[data-run="ppo-first"]').evaluate("tr => tr.outerHTML") == polled
    page.evaluate("window.__notReloaded = true")
    run.finish()
    page.wait_for_function(
        "() => document.querySelector('tr[data-run=\"ppo-first\"] .run-status')"
        ".dataset.status === 'finished'",
        timeout=APPEAR_MS,
    )
    assert page.evaluate("window.__notReloaded") is True


def test_a_run_started_later_appears_beside_the_open_one(
    tab: Page, store: Path, builtin: registry.Registry
) -> None:
    _logged(store, builtin, "ppo-a")
    page = tab.page
    page.goto(tab.base + "/?refresh=1")
    assert _visible_runs(page) == ["ppo-a"]
    page.locator('tr[data-run="ppo-a"] input.pick').check()
    page.evaluate("window.__notReloaded = true")
    run = _start(store, builtin, "ppo-b", project="lunar")
    row = _wait_row(page, "ppo-b")
    assert _visible_runs(page) == ["ppo-a", "ppo-b"]
    assert row.locator("td").nth(1).inner_text() == "lunar"
    assert row.locator(".run-status").get_attribute("data-status") == "live"
    # ppo-a kept its tick through the polls; the new row's tick box compares both.
    assert page.locator('tr[data-run="ppo-a"] input.pick').is_checked()
    row.locator("input.pick").check()
    assert page.evaluate("window.__notReloaded") is True
    for step in range(12, 40):
        run.log(step, {"train/approx_kl": 0.01})
    assert run.flush()
    page.wait_for_function(
        "() => document.querySelector('tr[data-run=\"ppo-b\"] .last-step').textContent === '39'",
        timeout=APPEAR_MS,
    )
    run.finish()
    page.click("#compare")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert [c.get_attribute("data-run") for c in page.locator(".run-chip").all()] == [
        "ppo-a",
        "ppo-b",
    ]


def test_filter_by_substring_and_regex_kept_in_the_address(
    tab: Page, store: Path, builtin: registry.Registry
) -> None:
    for name in ("ppo-cart-s1", "ppo-cart-s2", "ppo-cart-s3"):
        _logged(store, builtin, name)
    _logged(store, builtin, "a2c-moon-s1", project="LunarLander")
    page = tab.page
    page.goto(tab.base + "/?refresh=1")
    assert len(_visible_runs(page)) == 4
    page.fill("#filter", "A2C")  # substring, any case
    assert _visible_runs(page) == ["a2c-moon-s1"]
    assert page.locator("#filter-count").inner_text() == "1 of 4 runs shown"
    page.fill("#filter", "lunar")  # the project counts too
    assert _visible_runs(page) == ["a2c-moon-s1"]
    page.fill("#filter", "/ppo-.*-s[12]/")
    assert _visible_runs(page) == ["ppo-cart-s1", "ppo-cart-s2"]
    assert page.locator("#filter-error").is_hidden()
    assert "filter=%2Fppo-.*-s%5B12%5D%2F" in page.evaluate("window.location.search")
    assert "filter=" in page.locator(".lang-switch").get_attribute("href")
    # Ticked but filtered out is not compared.
    page.fill("#filter", "")
    page.locator('tr[data-run="ppo-cart-s3"] input.pick').check()
    page.fill("#filter", "s1")
    assert page.locator("#compare").is_disabled()
    # A link reopens the filter.
    page.goto(tab.base + "/?refresh=1&filter=%2Fppo-.*-s%5B12%5D%2F")
    assert page.input_value("#filter") == "/ppo-.*-s[12]/"
    assert _visible_runs(page) == ["ppo-cart-s1", "ppo-cart-s2"]
    # Newly polled rows honour it.
    _logged(store, builtin, "ppo-cart-s9")
    _logged(store, builtin, "ppo-moon-s2")
    hidden = _wait_row(page, "ppo-cart-s9")
    _wait_row(page, "ppo-moon-s2")
    assert hidden.is_hidden()
    assert _visible_runs(page) == ["ppo-cart-s1", "ppo-cart-s2", "ppo-moon-s2"]
    # A broken pattern says so beside the box and filters nothing (and throws nothing).
    page.fill("#filter", "/ppo-(/")
    error = page.locator("#filter-error")
    assert error.is_visible()
    assert "not a valid regular expression" in error.inner_text()
    assert page.get_attribute("#filter", "aria-invalid") == "true"
    assert len(_visible_runs(page)) == 6
    page.fill("#filter", "/s3$/")
    assert error.is_hidden() and _visible_runs(page) == ["ppo-cart-s3"]
    page.fill("#filter", "no-such-run")
    assert _visible_runs(page) == []
    assert page.locator("#filter-count").inner_text() == UI["en"]["filter_none"]


def _record_state(store: Path) -> Any:
    """`Outbox.record_state(run, state, reason)`, or skip while the store cannot record one."""
    from exporter.store.outbox import Outbox

    if not hasattr(Outbox, "record_state"):
        pytest.skip(
            "Outbox.record_state (crashed/incomplete states with a reason) is not in the store yet"
        )
    return Outbox(store / "outbox.sqlite")


def test_a_crashed_runs_badge_is_red_with_its_reason_as_hover_text(
    tab: Page, store: Path, builtin: registry.Registry
) -> None:
    box = _record_state(store)
    run = _start(store, builtin, "ppo-boom")
    page = tab.page
    page.goto(tab.base + "/?refresh=1")
    badge = page.locator('tr[data-run="ppo-boom"] .run-status')
    assert badge.get_attribute("data-status") == "live"
    try:
        box.record_state("ppo-boom", "crashed", "RuntimeError: boom")
        # After a poll...
        page.wait_for_function(
            "() => document.querySelector('tr[data-run=\"ppo-boom\"] .run-status')"
            ".dataset.status === 'crashed'",
            timeout=APPEAR_MS,
        )
        assert badge.inner_text() == UI["en"]["crashed"]
        assert badge.get_attribute("title") == "RuntimeError: boom"
        assert badge.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(198, 40, 40)"
        # ... and as the server renders it.
        page.reload()
        assert badge.get_attribute("data-status") == "crashed"
        assert badge.get_attribute("title") == "RuntimeError: boom"
    finally:
        box.close()
        run.finish()


def test_every_status_has_its_badge_label_colour_and_reason(
    tab: Page, store: Path, builtin: registry.Registry
) -> None:
    """The statuses `/api/runs` may give, rendered by the page's poll. Until the store records
    crashed/incomplete states, the API's answer is replaced here (only `/api/runs`, with rows
    of the runs really in the store); everything else is the real app."""
    statuses = ["live", "stalled", "finished", "crashed", "incomplete", "ended", "unknown", "odd"]
    for status in statuses:
        _logged(store, builtin, f"run-{status}")
    page = tab.page
    dropped: set[str] = set()

    def answer(route: Any) -> None:
        body = json.loads(route.fetch().text())
        for row in body["runs"]:
            row["status"] = row["run"].removeprefix("run-")
            row["status_reason"] = "RuntimeError: boom" if row["status"] == "crashed" else None
        body["runs"] = [r for r in body["runs"] if r["run"] not in dropped]
        route.fulfill(json=body)

    page.route("**/api/runs", answer)
    for lang in ("en", "zh"):
        page.goto(f"{tab.base}/?refresh=1&lang={lang}")
        page.wait_for_function(
            "() => document.querySelector('tr[data-run=\"run-crashed\"] .run-status')"
            ".dataset.status === 'crashed'",
            timeout=APPEAR_MS,
        )
        colours = {}
        for status in statuses:
            badge = page.locator(f'tr[data-run="run-{status}"] .run-status')
            assert badge.get_attribute("data-status") == status
            assert badge.inner_text() == UI[lang].get(status, status)  # any string is shown
            colours[status] = badge.evaluate("b => getComputedStyle(b).backgroundColor")
        assert page.locator('tr[data-run="run-crashed"] .run-status').get_attribute("title") == (
            "RuntimeError: boom"
        )
        assert page.locator('tr[data-run="run-ended"] .run-status').get_attribute("title") is None
        assert colours["crashed"] == "rgb(198, 40, 40)"
        assert colours["ended"] == colours["unknown"]
        # live, stalled, finished, crashed, incomplete, ended/unknown: a colour each
        assert len({colours[s] for s in statuses[:6]}) == 6
    assert [UI["zh"][s] for s in ("crashed", "incomplete", "ended", "unknown")] == [
        "崩溃",
        "未完成",
        "已结束",
        "未知",
    ]
    assert UI["zh"]["finished"] != UI["zh"]["ended"]
    tab.shot("dashboard-run-statuses.png")
    # A run gone from the store loses its row.
    dropped.add("run-odd")
    page.wait_for_selector('tr[data-run="run-odd"]', state="detached", timeout=APPEAR_MS)
    assert len(page.locator("table.runs tbody tr").all()) == len(statuses) - 1
