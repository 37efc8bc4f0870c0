"""The run page's numbers in a real headless Chromium (Debian's `chromium`, driven by PyPI
`playwright`), against the real app over HTTP on an embedded store the real exporter wrote: y
tick labels with the digits they need (a constant 3e-4 learning rate gets distinct non-zero
ticks around it; no label reads 0 for a non-zero tick, none repeats, each reads back as its
tick), a hover readout with three significant digits (0.0024 reads 0.0024), units as words and
never the registry's `none`, and a per-chart log y axis kept in the address, which leaves out
values at or below 0 with a note instead of breaking. Every page must leave the console free of
errors and uncaught exceptions (`Page.close`, and `pageerror` collected here too)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page, serving
from installed import installed

import exporter
import registry
from grafana.live import UI, UNITS

installed("playwright.sync_api", "playwright")

RUN = "fmt"
STEPS = 200
HOVER_STEP = 100  # policy_kl is exactly 0.0024 here
SIGNED = "custom/signed"  # sin: zeros and negatives
NONPOSITIVE = "custom/nonpositive"  # never above 0


def _kl(step: int) -> float:
    return 0.0024 if step == HOVER_STEP else 0.0015 + 0.001 * ((step * 37) % 100) / 100


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Path:
    root = tmp_path_factory.mktemp("fmt-store")
    settings = exporter.ExporterSettings(store=root, policy="warn")
    with exporter.init(
        RUN, project="fmt", framework="sb3", registry=builtin, settings=settings
    ) as run:
        for step in range(STEPS):
            run.log(
                step,
                {
                    "train/learning_rate": 3e-4,  # constant
                    "train/approx_kl": _kl(step),
                    "train/value_loss": 20 * math.exp(-step / 20),  # 10 down to ~5e-4
                    "rollout/ep_rew_mean": 12345.6 + step,
                    SIGNED: round(math.sin(step / 10), 6),
                    NONPOSITIVE: -float(step % 5),
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
    thrown: list[str] = []
    page.page.on("pageerror", lambda e: thrown.append(str(e)))
    yield page
    assert thrown == []
    page.close()


def _number(label: str) -> float:
    return float(label.replace(",", ""))


def _y(tab: Page, field: str) -> dict[str, Any]:
    """What the y axis of `field` paints: its ticks, their labels, the step and the scale."""
    return tab.chart(
        field,
        "({splits: u.axes[1]._splits, labels: u.axes[1]._values, incr: u.axes[1]._found[0],"
        " distr: u.scales.y.distr, min: u.scales.y.min, max: u.scales.y.max})",
    )


def test_a_constant_learning_rate_gets_distinct_non_zero_ticks_around_it(tab: Page) -> None:
    tab.open_run(f"run={RUN}")
    y = _y(tab, "learning_rate")
    assert y["min"] < 3e-4 < y["max"] and y["min"] > 0  # a range around it, not from 0
    labels = [t for t in y["labels"] if t]
    assert len(set(labels)) >= 2 and len(set(labels)) == len(labels)
    assert all(_number(t) != 0 for t in labels)
    assert all(2.5e-4 <= _number(t) <= 3.5e-4 for t in labels)
    assert any(re.fullmatch(r"\d(\.\d+)?e-4", t) for t in labels), labels  # 3e-4, 2.8e-4, ...


def test_every_linear_y_tick_reads_back_as_itself(tab: Page) -> None:
    """On every chart: no tick label repeats, none reads 0 unless the tick is 0, and each one
    reads back within half a tick step of the tick it labels (policy KL's 0.0005 steps too)."""
    page = tab.open_run(f"run={RUN}")
    fields = [p.get_attribute("data-field") for p in page.locator(".panel").all()]
    assert {"learning_rate", "policy_kl", "value_loss", "episodic_return", SIGNED} <= set(fields)
    for field in fields:
        y = _y(tab, field)
        assert y["distr"] == 1, field
        labels = [t for t in y["labels"] if t]
        assert len(labels) >= 2 and len(set(labels)) == len(labels), (field, labels)
        for split, label in zip(y["splits"], y["labels"], strict=True):
            if not label:
                continue
            assert (_number(label) == 0) == (split == 0), (field, split, label)
            assert abs(_number(label) - split) <= y["incr"] / 2, (field, split, label)
    kl = [t for t in _y(tab, "policy_kl")["labels"] if t]
    assert all(re.fullmatch(r"0\.00\d+", t) for t in kl), kl  # 0.0015, 0.002, ...: not 0.002, 0.002
    ret = [t for t in _y(tab, "episodic_return")["labels"] if t]
    assert all(re.fullmatch(r"\d{2},\d{3}", t) for t in ret), ret  # 12,350 ...


def _legend(page: Any, field: str) -> dict[str, str]:
    """The legend's visible rows by label: the x row, and one row per run reading "S · raw R"
    (its smoothed and its raw value), also split under the toolbar's words for the two lines."""
    rows = page.locator(f'.panel[data-field="{field}"] .u-legend tr.u-series:not([hidden])').all()
    out = {}
    sep = " · " + UI["en"]["raw"] + " "
    for r in rows:
        label, value = r.locator(".u-label").inner_text(), r.locator(".u-value").inner_text()
        out[label] = value
        if "run-row" in (r.get_attribute("class") or ""):
            smoothed, _, raw = value.partition(sep)
            out[UI["en"]["smoothed"]], out[UI["en"]["raw"]] = smoothed, raw
    return out


def _hover(tab: Page, field: str, step: int) -> dict[str, str]:
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
    return _legend(page, field)


def test_the_hover_readout_has_three_significant_digits(tab: Page) -> None:
    page = tab.open_run(f"run={RUN}")
    raw, smoothed = UI["en"]["raw"], UI["en"]["smoothed"]
    legend = _hover(tab, "policy_kl", HOVER_STEP)
    assert legend[UI["en"]["x_step"]] == str(HOVER_STEP)
    assert legend[raw] == "0.0024"  # uPlot's default said 0.002
    drawn = tab.chart("policy_kl", f"u.data[2][{HOVER_STEP}]")
    assert 0.001 < drawn < 0.01 and drawn != pytest.approx(0.0024)
    assert legend[smoothed] == f"{drawn:.3g}"  # the smoothed line, three digits as well
    lr = _hover(tab, "learning_rate", HOVER_STEP)
    assert lr[raw] == lr[smoothed] == "3e-4"
    ret = _hover(tab, "episodic_return", 0)
    assert ret[raw] == "12,346"  # 12345.6, to the unit, grouped
    # The same formatter, at the values the issue names.
    said = tab.chart(
        "policy_kl",
        "[0.0024, 0.123456, 12345.6, 3e-4, 2.5e-5, 1234567, -0.5, 0, 999.96]"
        ".map(v => u.series[1].value(u, v, 1, 0))",
    )
    assert said == ["0.0024", "0.123", "12,346", "3e-4", "2.5e-5", "1.23e6", "-0.5", "0", "1,000"]
    page.mouse.move(0, 0)


def test_units_are_words_and_never_none(tab: Page, builtin: registry.Registry) -> None:
    page = tab.open_run(f"run={RUN}")
    unit = lambda f: page.locator(f'.panel[data-field="{f}"] .head .unit')  # noqa: E731
    assert builtin.metric("learning_rate").unit == "none"
    assert unit("learning_rate").get_attribute("data-unit") == "none"
    assert unit("learning_rate").inner_text() == ""  # dimensionless: nothing shown
    assert unit("policy_kl").inner_text() == UNITS["en"]["nats"]
    assert unit("episodic_return").inner_text() == UNITS["en"]["reward"]
    assert unit(SIGNED).inner_text() == ""  # unregistered: no unit known
    page.wait_for_function("() => document.querySelector('.cards article.card')")
    bare = page.evaluate(
        "() => Array.from(document.querySelectorAll('body *'))"
        ".filter(e => e.textContent.trim().toLowerCase() === 'none').map(e => e.outerHTML)"
    )
    assert bare == []
    page = tab.open_run(f"run={RUN}&lang=zh")
    assert unit("policy_kl").inner_text() == UNITS["zh"]["nats"]
    assert unit("learning_rate").inner_text() == ""


def test_every_registry_unit_has_words_in_both_languages(builtin: registry.Registry) -> None:
    used = {m.unit for m in builtin.metrics} - {"none"}
    for lang in ("en", "zh"):
        assert used <= set(UNITS[lang]), (lang, used - set(UNITS[lang]))
        assert all(w and w.lower() != "none" for w in UNITS[lang].values())


def test_log_scale_per_chart_is_kept_in_the_address(tab: Page) -> None:
    page = tab.open_run(f"run={RUN}")
    box = page.locator('.panel[data-field="value_loss"] .log-y-box')
    assert not box.is_checked() and _y(tab, "value_loss")["distr"] == 1
    box.check()
    page.wait_for_function("() => rlvitalsDash.charts.get('value_loss').scales.y.distr === 3")
    y = _y(tab, "value_loss")
    labels = [t for t in y["labels"] if t]
    assert len(labels) == len(set(labels)) >= 3
    decades = [t for t in labels if math.log10(_number(t)).is_integer()]
    assert len(decades) >= 3, labels  # e.g. 0.001, 0.01, 0.1, 1, 10
    assert all(_number(t) > 0 for t in labels)
    assert _y(tab, "policy_kl")["distr"] == 1  # the other charts stay linear
    assert "log=value_loss" in page.evaluate("() => window.location.search")
    tab.shot("live-number-format-log.png")
    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.locator('.panel[data-field="value_loss"] .log-y-box').is_checked()
    assert _y(tab, "value_loss")["distr"] == 3
    assert _y(tab, "learning_rate")["distr"] == 1
    # A constant series on a log axis: a decade each way, powers of ten among the ticks.
    page.locator('.panel[data-field="learning_rate"] .log-y-box').check()
    lr = _y(tab, "learning_rate")
    assert lr["distr"] == 3 and lr["min"] < 3e-4 < lr["max"]
    assert {"1e-4", "0.001"} <= set(lr["labels"]), lr["labels"]
    query = page.evaluate("() => window.location.search")
    assert "log=learning_rate" in query and "log=value_loss" in query
    page.locator('.panel[data-field="value_loss"] .log-y-box').uncheck()
    assert _y(tab, "value_loss")["distr"] == 1
    assert "log=value_loss" not in page.evaluate("() => window.location.search")


def test_log_scale_with_zeros_and_negatives_does_not_break(tab: Page) -> None:
    signed = SIGNED.replace("/", "%2F")
    nonpositive = NONPOSITIVE.replace("/", "%2F")
    page = tab.open_run(f"run={RUN}&log={signed}&log={nonpositive}")
    # Some values above 0: drawn on the log axis, the others left out, and the note says so.
    panel = page.locator(f'.panel[data-field="{SIGNED}"]')
    assert panel.get_attribute("data-scale") == "log"
    y = _y(tab, SIGNED)
    assert y["distr"] == 3 and y["min"] > 0
    drawn = tab.chart(SIGNED, "u.data[1]")
    left_out = sum(1 for v in drawn if v is None)
    assert 0 < left_out < STEPS
    assert drawn[0] is None  # sin(0) = 0
    note = panel.locator(".log-note")
    assert note.is_visible() and note.inner_text() == UI["en"]["log_left_out"].format(n=left_out)
    labels = [t for t in y["labels"] if t]
    assert labels and all(_number(t) > 0 for t in labels)
    _hover(tab, SIGNED, 50)  # hovering a gap and its neighbours
    _hover(tab, SIGNED, 0)
    # Nothing above 0: the box is disabled, the chart stays linear, the note says why.
    panel = page.locator(f'.panel[data-field="{NONPOSITIVE}"]')
    assert panel.get_attribute("data-scale") == "linear"
    assert panel.locator(".log-y-box").is_disabled()
    assert _y(tab, NONPOSITIVE)["distr"] == 1
    assert panel.locator(".log-note").inner_text() == UI["en"]["log_needs_positive"]
    assert _y(tab, NONPOSITIVE)["labels"].count("0") == 1
    # Toggling off and on again, by hand.
    box = page.locator(f'.panel[data-field="{SIGNED}"] .log-y-box')
    box.uncheck()
    assert (
        _y(tab, SIGNED)["distr"] == 1
        and page.locator(f'.panel[data-field="{SIGNED}"] .log-note').is_hidden()
    )
    assert tab.chart(SIGNED, "u.data[1][0]") == 0
    box.check()
    assert _y(tab, SIGNED)["distr"] == 3
    # Zoomed into a range where the series is all at or below 0 (steps 32..62 of sin(step/10)).
    page.fill("#range-from", "33")
    page.fill("#range-to", "61")
    page.click("#range-apply")
    page.wait_for_function(f"() => rlvitalsDash.charts.get({SIGNED!r}).data[0][0] === 33")
    assert page.locator(f'.panel[data-field="{SIGNED}"]').get_attribute("data-scale") == "linear"
    assert page.locator(f'.panel[data-field="{SIGNED}"] .log-y-box').is_disabled()


def test_screenshot_of_the_numbers(tab: Page) -> None:
    """docs/live-number-format.png is a copy of this file: the KL readout and the 3e-4 ticks."""
    page = tab.open_run(f"run={RUN}&log=value_loss")
    page.set_viewport_size({"width": 1400, "height": 1400})
    page.evaluate(
        "() => { document.querySelector('.panel[data-field=\"policy_kl\"]').scrollIntoView();"
        " window.scrollBy(0, -120); }"
    )
    _hover(tab, "policy_kl", HOVER_STEP)
    tab.shot("live-number-format.png")
