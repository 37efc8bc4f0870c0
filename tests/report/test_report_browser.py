"""The report in a real headless Chromium (Debian's `chromium`, driven by PyPI `playwright`; no
browser is downloaded): no console errors, no request outside the file, every core chart drawn,
registry tooltips present and shown on hover, the language toggle works, a screenshot saved."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import registry
from grafana.datasource.history.embedded import EmbeddedHistory
from grafana.report import gather, render_report

pw = pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with pw.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.mark.parametrize("run", ["r-kl_blowup", "r-nan_loss", "r-resume"])
def test_report_in_chromium(
    run: str, browser: Any, report_store: Path, builtin_registry: registry.Registry, tmp_path: Path
) -> None:
    store = EmbeddedHistory(report_store / "outbox.sqlite")
    html_path = tmp_path / f"{run}.html"
    html_path.write_text(render_report(store, builtin_registry, run), encoding="utf-8")
    charts = gather(builtin_registry, store, run).charts
    assert charts

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def gate(route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.route("**/*", gate)
    page.on(
        "request", lambda r: None if r.url.startswith(("file:", "data:")) else outside.append(r.url)
    )
    page.goto(html_path.as_uri())
    page.wait_for_load_state("load")

    for chart in charts:
        box = page.locator(f"#chart-{chart.id}")
        assert box.count() == 1, chart.id
        for s in chart.series:
            d = box.locator(f'path.smooth[data-metric="{s.metric.id}"]').get_attribute("d")
            assert d and d.startswith("M"), f"{s.metric.id}: empty path"
            tip = box.locator(f'.tip[data-metric="{s.metric.id}"]')
            assert tip.count() == 1
            assert s.metric.title.en in tip.text_content()
    # Hovering a chart title shows the registry's tooltip; hovering the plot shows a readout.
    first = page.locator(f"#chart-{charts[0].id}")
    first.locator(".info").first.hover()
    assert first.locator(".tip").first.is_visible()
    page.mouse.move(0, 0)
    svg_box = first.locator("svg.chart").bounding_box()
    assert svg_box is not None
    page.mouse.move(svg_box["x"] + svg_box["width"] * 0.6, svg_box["y"] + svg_box["height"] * 0.5)
    assert charts[0].metric.id in first.locator(".readout").inner_text()
    # Language toggle.
    zh_title = charts[0].metric.title.zh
    page.click('[data-set-lang="zh"]')
    assert page.get_by_text(zh_title, exact=True).first.is_visible()
    page.click('[data-set-lang="en"]')
    assert not page.get_by_text(zh_title, exact=True).first.is_visible()

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"report-{run}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    assert shot.stat().st_size > 10_000
    assert errors == []
    assert outside == []
