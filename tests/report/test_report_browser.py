"""The report in a real headless Chromium (Debian's `chromium`, driven by PyPI `playwright`; no
browser is downloaded): no console errors, no request outside the file, every core chart drawn,
registry tooltips present and shown on hover, the language toggle works, a screenshot saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chromium import ARTIFACTS
from installed import installed

import registry
from grafana.datasource.history.embedded import EmbeddedHistory
from grafana.report import gather, render_report

pw = installed("playwright.sync_api", "playwright")


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


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows (RGBA) of a non-interlaced 8-bit RGB/RGBA PNG (Chromium's)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if channels == 3:  # RGB: add an opaque alpha to each pixel
            line = bytearray(
                b"".join(bytes(line[j : j + 3]) + b"\xff" for j in range(0, stride, 3))
            )
        rows.append(bytes(line))
    return width, height, rows


def test_a_one_point_chart_paints_its_point(
    browser: Any, builtin_registry: registry.Registry, tmp_path: Path
) -> None:
    from grafana.datasource.history.memory import MemoryHistory

    store = MemoryHistory({"one": {"raw_reward": ([2048], [12.0])}})
    html_path = tmp_path / "one.html"
    html_path.write_text(render_report(store, builtin_registry, "one", lang="en"), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(html_path.as_uri())
    svg = page.locator("svg.chart[data-chart]").first
    color = svg.locator('path.smooth[data-metric="raw_reward"]').get_attribute("stroke")
    assert color is not None and color.startswith("#")
    target = bytes(int(color[i : i + 2], 16) for i in (1, 3, 5))
    shot = svg.screenshot()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "report-one-point.png").write_bytes(shot)
    page.close()
    _, _, rows = _png_pixels(shot)
    painted = sum(
        1
        for row in rows
        for j in range(0, len(row), 4)
        if all(abs(row[j + k] - target[k]) <= 40 for k in range(3))
    )
    assert painted >= 4, "the one point of the series is not drawn"
    assert errors == []
