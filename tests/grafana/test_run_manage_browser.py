"""Run management on the live pages, in a real headless Chromium against the real app over HTTP
on a real embedded store: a run renamed and another deleted from the run list (prompt, confirm)
are so in the store and the list; the tags column and the filter box's tag match; a note typed
and a tag added on the run page are there after a reload. The page's console stays free of
errors and it asks nothing of any other host (`Page.close`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page, serving

import exporter
import registry
from exporter.store import run_admin
from exporter.store.outbox import Outbox
from grafana.live import UI

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

WAIT_MS = 20_000


@pytest.fixture
def store(tmp_path: Path, builtin: registry.Registry) -> Path:
    store = tmp_path / "store"
    settings = exporter.ExporterSettings(store=store, policy="warn")
    for name in ("alpha", "beta"):
        with exporter.init(name, registry=builtin, settings=settings, framework="sb3") as run:
            for step in range(12):
                run.log(step, {"train/approx_kl": 0.01, "rollout/ep_rew_mean": float(step)})
    with Outbox(store / "outbox.sqlite") as box:
        run_admin.set_tags(box, "beta", add=["ppo-baseline"])
    return store


@pytest.fixture
def tab(browser: Any, store: Path, builtin: registry.Registry) -> Iterator[Page]:
    with serving(store, builtin, allow_edit=True) as url:
        page = Page(browser, url)
        yield page
        page.close()


def _stored(store: Path) -> set[str]:
    with Outbox(store / "outbox.sqlite") as box:
        return {r.run for r in box.runs()}


def _visible(page: Any) -> list[str]:
    rows = page.locator("table.runs tbody tr").all()
    return [r.get_attribute("data-run") for r in rows if r.is_visible()]


def test_rename_and_delete_from_the_run_list_and_filter_by_tag(tab: Page, store: Path) -> None:
    page = tab.page
    page.goto(f"{tab.base}/?refresh=3600")  # no poll meanwhile: what changes is the action's
    assert page.locator('tr[data-run="beta"] td.tags .tag').inner_text() == "ppo-baseline"
    page.fill("#filter", "baseline")
    assert _visible(page) == ["beta"]
    page.fill("#filter", "")
    answers = {"prompt": "alpha-lr3e-4", "confirm": ""}
    seen: list[str] = []

    def answer(dialog: Any) -> None:
        seen.append(f"{dialog.type}: {dialog.message}")
        if dialog.type == "prompt":
            dialog.accept(answers["prompt"])
        else:
            dialog.accept()

    page.on("dialog", answer)
    page.click('tr[data-run="alpha"] .act-rename')
    page.wait_for_selector('tr[data-run="alpha-lr3e-4"]', timeout=WAIT_MS)
    assert page.locator('tr[data-run="alpha"]').count() == 0
    assert _stored(store) == {"alpha-lr3e-4", "beta"}
    page.click('tr[data-run="beta"] .act-delete')
    page.wait_for_selector('tr[data-run="beta"]', state="detached", timeout=WAIT_MS)
    assert _stored(store) == {"alpha-lr3e-4"}
    assert seen[0].startswith("prompt: ") and "alpha" in seen[0]
    assert seen[1].startswith("confirm: ") and "beta" in seen[1]
    assert page.locator("#manage-error").is_hidden()


def test_a_note_and_a_tag_added_on_the_run_page_survive_a_reload(tab: Page, store: Path) -> None:
    page = tab.open_run("run=alpha")
    page.wait_for_selector("#run-meta[data-ready='1']", timeout=WAIT_MS)
    page.fill("#run-notes", "lr too high\nafter 40k steps")
    page.click("#save-notes")
    # (no wait_for_function: the page's CSP forbids evaluating a string as script)
    page.wait_for_selector(f"#notes-state:has-text('{UI['en']['saved']}')", timeout=WAIT_MS)
    page.fill("#tag-input", "needs-rerun")
    page.press("#tag-input", "Enter")
    page.wait_for_selector(".run-tags .tag:has-text('needs-rerun')", timeout=WAIT_MS)
    page = tab.open_run("run=alpha")  # a reload
    page.wait_for_selector("#run-meta[data-ready='1']", timeout=WAIT_MS)
    assert page.input_value("#run-notes") == "lr too high\nafter 40k steps"
    assert "needs-rerun" in page.locator(".run-tags").inner_text()
    with Outbox(store / "outbox.sqlite") as box:
        record = box.run("alpha")
        assert record is not None and record.notes == "lr too high\nafter 40k steps"
        assert record.tags == ("needs-rerun",)
    # the tag's × takes it off again
    page.click(".run-tags .tag-remove")
    page.wait_for_selector(
        ".run-tags .tag:has-text('needs-rerun')", state="detached", timeout=WAIT_MS
    )
    assert _tags(store, "alpha") == ()


def _tags(store: Path, run: str) -> tuple[str, ...]:
    with Outbox(store / "outbox.sqlite") as box:
        record = box.run(run)
        assert record is not None
        return record.tags
