"""The run page's layout in a real headless Chromium (Debian's `chromium`, driven by PyPI
`playwright`), against the real app over HTTP on an embedded store the real exporter wrote: at
1400 px the charts sit two side by side (a Columns control, kept in the address), a group folds
away and stays folded after a reload, a pinned chart moves to a Pinned group on top and the
address keeps it, each diagnosis card is folded to a status line (the status `/api/cards`
gives) that opens on click, compared runs' lines sit side by side, the dark scheme (system or
chosen) gives a dark page with readable text and chart axes, the PNG button downloads the chart
at its drawn size, and the readout of a transformed metric gives the value the framework logged
beside the one shown. Every page must leave the console free of errors (`Page.close`)."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page, serving

import exporter
import registry
from grafana.live import UI

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

STEPS = 400
HOVER_STEP = 100
RUNS = ("grid-a", "grid-b")


def _value_loss(step: int) -> float:
    """What SB3 logs as train/value_loss (the registry stores half of it)."""
    return 2.0 / (1 + step / 50) + 0.1 * math.sin(step)


def _entropy_loss(step: int) -> float:
    """What SB3 logs as train/entropy_loss (−H: the registry stores H)."""
    return -(1.0 - step / (4 * STEPS))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Path:
    root = tmp_path_factory.mktemp("layout-store")
    settings = exporter.ExporterSettings(store=root, policy="warn")
    for i, name in enumerate(RUNS):
        with exporter.init(
            name, project="grid", framework="sb3", registry=builtin, settings=settings
        ) as run:
            for step in range(STEPS):
                run.log(
                    step,
                    {
                        "train/approx_kl": 0.01 + 0.005 * math.sin(step / 17) + i * 1e-3,
                        "train/entropy_loss": _entropy_loss(step) - i * 0.01,
                        "train/value_loss": _value_loss(step) + i,
                        "rollout/ep_rew_mean": 20 + step * 0.3 + i,
                        "train/clip_fraction": 0.1 + 0.05 * math.sin(step / 9),
                        "train/learning_rate": 3e-4,
                        "custom/probe": float(step % 7),
                    },
                )
    return root


@pytest.fixture(scope="module")
def base_url(store: Path, builtin: registry.Registry) -> Iterator[str]:
    with serving(store, builtin) as url:
        yield url


@pytest.fixture
def tab(browser: Any, base_url: str) -> Iterator[Page]:
    page = Page(browser, base_url)
    yield page
    page.close()


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


def _fields(page: Any, group: str) -> list[str]:
    return [
        p.get_attribute("data-field")
        for p in page.locator(f'.group[data-group="{group}"] .panel').all()
    ]


def test_at_1400_px_charts_sit_side_by_side_and_the_columns_are_kept_in_the_address(
    tab: Page,
) -> None:
    page = tab.open_run(f"run={RUNS[0]}")
    assert page.viewport_size["width"] == 1400
    first, second, third = _fields(page, "core")[:3]
    a = _box(page, f'.panel[data-field="{first}"]')
    b = _box(page, f'.panel[data-field="{second}"]')
    assert a["y"] == pytest.approx(b["y"], abs=1)  # one row
    assert a["x"] + a["width"] <= b["x"]  # side by side, not overlapping
    c = _box(page, f'.panel[data-field="{third}"]')
    assert c["y"] >= a["y"] + a["height"]  # two per row by default
    # Each chart fills its cell.
    chart_width = tab.chart(first, "u.width")
    assert a["width"] - 40 <= chart_width <= a["width"]
    page.select_option("#columns", "3")
    c = _box(page, f'.panel[data-field="{third}"]')
    assert c["y"] == pytest.approx(a["y"], abs=1)  # three in the row now
    page.wait_for_function(f"() => rlvitalsDash.charts.get({first!r}).width < {chart_width}")
    assert "cols=3" in page.evaluate("window.location.search")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.input_value("#columns") == "3"
    c = _box(page, f'.panel[data-field="{third}"]')
    assert c["y"] == pytest.approx(_box(page, f'.panel[data-field="{first}"]')["y"], abs=1)
    page.select_option("#columns", "1")
    a = _box(page, f'.panel[data-field="{first}"]')
    b = _box(page, f'.panel[data-field="{second}"]')
    assert b["y"] >= a["y"] + a["height"]  # one per row
    tab.shot("layout-one-column.png")


def test_collapsing_a_group_hides_its_charts_and_survives_a_reload(tab: Page) -> None:
    page = tab.open_run(f"run={RUNS[0]}")
    core = _fields(page, "core")
    assert core and all(page.locator(f'.panel[data-field="{f}"]').is_visible() for f in core)
    toggle = page.locator('.group[data-group="core"] .group-toggle')
    assert toggle.get_attribute("aria-expanded") == "true"
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert all(page.locator(f'.panel[data-field="{f}"]').is_hidden() for f in core)
    assert page.locator('.group[data-group="registered"] .panel').first.is_visible()
    assert "fold=core" in page.evaluate("window.location.search")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert all(page.locator(f'.panel[data-field="{f}"]').is_hidden() for f in core)
    # Opened again, its charts take their cells' width (they were drawn while folded).
    page.locator('.group[data-group="core"] .group-toggle').click()
    assert all(page.locator(f'.panel[data-field="{f}"]').is_visible() for f in core)
    cell = _box(page, f'.panel[data-field="{core[0]}"]')["width"]
    page.wait_for_function(
        f"() => Math.abs(rlvitalsDash.charts.get({core[0]!r}).width - {cell}) <= 40"
    )
    assert "fold=" not in page.evaluate("window.location.search")


def test_pinning_moves_a_chart_to_the_top_and_the_address_keeps_it(tab: Page) -> None:
    page = tab.open_run(f"run={RUNS[0]}")
    core = _fields(page, "core")
    field = "value_loss" if "value_loss" in core else _fields(page, "registered")[0]
    home = page.locator(f'.panel[data-field="{field}"]').get_attribute("data-group")
    before = _fields(page, home)
    assert page.locator('.group[data-group="pinned"]').count() == 0
    page.locator(f'.panel[data-field="{field}"] .pin').click()
    groups = [g.get_attribute("data-group") for g in page.locator(".group").all()]
    assert groups[0] == "pinned"
    assert _fields(page, "pinned") == [field]
    assert page.locator(".panel").first.get_attribute("data-field") == field
    assert page.locator(f'.panel[data-field="{field}"] .pin').get_attribute("aria-pressed") == (
        "true"
    )
    top = _box(page, f'.panel[data-field="{field}"]')["y"]
    assert all(_box(page, f'.panel[data-field="{f}"]')["y"] > top for f in before if f != field)
    assert f"pin={field}" in page.evaluate("window.location.search")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert _fields(page, "pinned") == [field]
    # Unpinned, it goes back to its place in its own group and the Pinned group goes away.
    page.locator(f'.panel[data-field="{field}"] .pin').click()
    assert _fields(page, home) == before
    assert page.locator('.group[data-group="pinned"]').count() == 0
    assert "pin=" not in page.evaluate("window.location.search")


def _api(page: Any, path: str) -> Any:
    return page.evaluate(f"fetch({path!r}).then(r => r.json())")


def test_the_folded_card_shows_the_status_the_api_gives_and_opens_on_click(tab: Page) -> None:
    page = tab.open_run(f"run={RUNS[0]}")
    page.wait_for_selector(".card-fold")
    for metric in ("policy_entropy", "policy_kl", "episodic_return"):
        card = _api(page, f"/api/cards?run={RUNS[0]}&metric={metric}")["cards"][0]
        fold = page.locator(f'.panel[data-field="{metric}"] .card-fold')
        assert fold.count() == 1
        assert fold.get_attribute("data-status") == card["status"]
        line = fold.locator(":scope > summary")
        assert line.locator(".status").inner_text().lower() == card["status_label"].lower()
        # One line under the chart, not a text block beside it.
        chart = _box(page, f'.panel[data-field="{metric}"] .chart')
        box = line.bounding_box()
        assert box["y"] >= chart["y"] + chart["height"] - 1
        assert box["height"] < 30
        assert fold.locator("article.card .reading").is_hidden()
    fold = page.locator('.panel[data-field="policy_entropy"] .card-fold')
    fold.locator(":scope > summary").click()
    assert fold.locator("article.card .reading").is_visible()
    card = _api(page, f"/api/cards?run={RUNS[0]}&metric=policy_entropy")["cards"][0]
    assert fold.locator("article.card .reading").inner_text() == card["reading"]
    fold.locator(":scope > summary").click()
    assert fold.locator("article.card .reading").is_hidden()


def test_compared_runs_status_lines_sit_one_under_another_whole(tab: Page) -> None:
    page = tab.open_run(f"run={RUNS[0]}&run={RUNS[1]}")
    page.wait_for_selector(".card-fold")
    for metric in ("policy_kl", "policy_entropy"):
        folds = page.locator(f'.panel[data-field="{metric}"] .card-fold').all()
        assert [f.get_attribute("data-run") for f in folds] == list(RUNS)
        a, b = (f.bounding_box() for f in folds)
        # one line per run, in run order, each as wide as the chart: the headline is never cut
        assert a["y"] + a["height"] <= b["y"] + 0.5
        for fold in folds:
            line = fold.locator(".headline")
            assert line.evaluate("e => e.scrollWidth <= e.clientWidth"), line.inner_text()
        for run, fold in zip(RUNS, folds, strict=True):
            card = _api(page, f"/api/cards?run={run}&metric={metric}")["cards"][0]
            assert fold.get_attribute("data-status") == card["status"]
            assert fold.locator(".run-name").inner_text() == run


# The WCAG contrast of two CSS colours, each read back from a 1x1 canvas (any CSS syntax).
_CONTRAST = """([a, b]) => {
  const ctx = document.createElement("canvas").getContext("2d");
  const rgb = (c) => { ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = c; ctx.fillRect(0, 0, 1, 1);
    return Array.from(ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)); };
  const lum = (c) => { const [r, g, b] = rgb(c).map((v) => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return { ratio: (x + 0.05) / (y + 0.05), la: lum(a), lb: lum(b) };
}"""

_COLOURS = """(field) => {
  const u = rlvitalsDash.charts.get(field);
  const cs = getComputedStyle(document.body);
  const ax = u.axes[1];
  const stroke = typeof ax.stroke === "function" ? ax.stroke(u, 1) : ax.stroke;
  const tip = getComputedStyle(document.querySelector(".panel .tip"));
  return { bg: cs.backgroundColor, fg: cs.color, axis: stroke, tipBg: tip.backgroundColor,
           tipFg: tip.color, scheme: document.body.dataset.scheme };
}"""


def _readable(page: Any, field: str) -> dict[str, Any]:
    c = page.evaluate(_COLOURS, field)
    text = page.evaluate(_CONTRAST, [c["fg"], c["bg"]])
    axis = page.evaluate(_CONTRAST, [c["axis"], c["bg"]])
    tip = page.evaluate(_CONTRAST, [c["tipFg"], c["tipBg"]])
    assert text["ratio"] >= 7, (c, text)  # WCAG AAA for body text
    assert axis["ratio"] >= 4.5, (c, axis)  # AA for the tick labels
    assert tip["ratio"] >= 7, (c, tip)  # the report's tooltip, from its shared CSS
    return {"colours": c, "bg_luminance": text["lb"] if text["la"] > text["lb"] else text["la"]}


def test_dark_mode_follows_the_system_and_the_toggle_is_remembered(
    tab: Page, base_url: str
) -> None:
    page = tab.page
    page.emulate_media(color_scheme="dark")
    page = tab.open_run(f"run={RUNS[0]}&run={RUNS[1]}")
    dark = _readable(page, "policy_kl")
    assert dark["colours"]["scheme"] == "dark"
    bg = page.evaluate(_CONTRAST, [dark["colours"]["bg"], "#000"])
    assert bg["la"] < 0.05  # a dark background
    page.set_viewport_size({"width": 1400, "height": 1100})
    shot = tab.shot("serve-grid-dark.png")  # docs/serve-grid-dark.png is a copy of it
    assert shot.stat().st_size > 50_000
    # Chosen light, it stays light after a reload though the system is dark.
    page.select_option("#theme", "light")
    light = _readable(page, "policy_kl")
    assert light["colours"]["scheme"] == "light"
    assert page.evaluate(_CONTRAST, [light["colours"]["bg"], "#000"])["la"] > 0.9
    assert light["colours"]["axis"] != dark["colours"]["axis"]  # the charts were redrawn
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.input_value("#theme") == "light"
    assert _readable(page, "policy_kl")["colours"]["scheme"] == "light"
    # The run list reads the same choice; back on auto it follows the system again.
    page.goto(base_url + "/")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page = tab.open_run(f"run={RUNS[0]}")
    page.select_option("#theme", "auto")
    assert _readable(page, "policy_kl")["colours"]["scheme"] == "dark"
    page.goto(base_url + "/")
    body = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert page.evaluate(_CONTRAST, [body, "#000"])["la"] < 0.05


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_png_button_downloads_the_chart_at_its_drawn_size(tab: Page, tmp_path: Path) -> None:
    page = tab.open_run(f"run={RUNS[0]}&run={RUNS[1]}")
    panel = page.locator('.panel[data-field="policy_kl"]')
    with page.expect_download() as dl:
        panel.locator(".dl-menu > summary").click()  # the chart's downloads are one menu
        panel.locator(".png").click()
    path = tmp_path / "chart.png"
    dl.value.save_as(path)
    assert dl.value.suggested_filename.endswith("policy_kl.png")
    assert path.stat().st_size > 5_000
    width, height = _png_size(path)
    drawn_w, drawn_h = tab.chart("policy_kl", "[u.ctx.canvas.width, u.ctx.canvas.height]")
    assert width == drawn_w  # the chart's own pixels, not a screenshot of the page
    assert height > drawn_h  # plus the title above and the legend below


def _hover_raw(tab: Page, field: str, step: int) -> str:
    page = tab.page
    over = page.locator(f'.panel[data-field="{field}"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    x = tab.chart(field, f"u.valToPos({step}, 'x')")
    page.mouse.move(0, 0)
    page.mouse.move(box["x"] + x, box["y"] + box["height"] / 2, steps=3)
    page.wait_for_function(
        f"() => rlvitalsDash.charts.get({field!r}).cursor.idx === {step}", timeout=5_000
    )
    # one legend row per run: "smoothed · raw R"
    row = page.locator(f'.panel[data-field="{field}"] .u-legend tr.u-series.run-row').first
    return row.locator(".u-value").inner_text().partition(" · " + UI["en"]["raw"] + " ")[2]


def _shown_and_logged(text: str) -> tuple[float, float]:
    logged_word = UI["en"]["logged_as"].format(framework="sb3", v="")
    shown, _, rest = text.partition(" (")
    assert rest.startswith(logged_word) and rest.endswith(")"), text
    return float(shown.replace(",", "")), float(rest[len(logged_word) : -1].replace(",", ""))


def test_the_readout_of_a_transformed_metric_gives_the_value_as_logged(tab: Page) -> None:
    page = tab.open_run(f"run={RUNS[0]}")
    # SB3's value_loss is stored × 0.5 (the registry's alias); the readout adds SB3's number.
    shown, logged = _shown_and_logged(_hover_raw(tab, "value_loss", HOVER_STEP))
    assert logged == pytest.approx(_value_loss(HOVER_STEP), rel=5e-3)
    assert shown == pytest.approx(0.5 * _value_loss(HOVER_STEP), rel=5e-3)
    # SB3's entropy_loss is −H: the readout gives it with SB3's sign.
    shown, logged = _shown_and_logged(_hover_raw(tab, "policy_entropy", HOVER_STEP))
    assert logged == pytest.approx(_entropy_loss(HOVER_STEP), rel=5e-3)
    assert shown == pytest.approx(-_entropy_loss(HOVER_STEP), rel=5e-3)
    # A metric logged as the registry stores it has no second number.
    kl = _hover_raw(tab, "policy_kl", HOVER_STEP)
    assert "(" not in kl and float(kl) > 0
    page.mouse.move(0, 0)
