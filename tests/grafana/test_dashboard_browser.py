"""`rlvitals serve`'s live dashboard in a real headless Chromium (Debian's `chromium`, driven by
PyPI `playwright`; no browser is downloaded), against the real app over HTTP on a free port,
reading an embedded store the real exporter wrote: the run list, the run page (every field,
grouped), search, overlay colours, zoom and step range, smoothing and toggles, x-axis modes, the
config table, CSV/JSON downloads, live refresh and the Chinese view. Every page must leave the
console free of errors and ask nothing of any other host; screenshots go to test-artifacts/."""

from __future__ import annotations

import csv
import io
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page
from installed import installed
from werkzeug.serving import make_server

import exporter
import registry
from exporter.store.run_colors import PALETTE
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig
from grafana.live import UI

pw = installed("playwright.sync_api", "playwright")

STEPS = 400
UNREGISTERED_KEY = "custom/my_probe"
CONFIG = {"clip_epsilon": 0.2, "n_steps": 2048, "policy": "MlpPolicy", "net_arch": [64, 64]}


def _log_run(run: exporter.Run, first: int, last: int, offset: float) -> None:
    for step in range(first, last):
        run.log(
            step,
            {
                "train/approx_kl": 0.01 + 0.005 * math.sin(step / 17) + offset * 1e-3,
                "train/entropy_loss": -(1.0 - step / (4 * STEPS)) - offset * 0.01,
                "train/value_loss": 2.0 / (1 + step / 50) + 0.1 * math.sin(step),
                "rollout/ep_rew_mean": 20 + step * 0.3 + offset,
                "train/explained_variance": min(0.95, step / STEPS),
                UNREGISTERED_KEY: (step % 7) + offset,
            },
        )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Path:
    root = tmp_path_factory.mktemp("dash-store")
    settings = exporter.ExporterSettings(store=root, policy="warn")
    for i, name in enumerate(("ppo-a", "ppo-b")):
        with exporter.init(
            name,
            project="cartpole",
            framework="sb3",
            config={**CONFIG, "seed": i},
            registry=builtin,
            settings=settings,
        ) as run:
            _log_run(run, 0, STEPS, float(i))
            run.event(200, "checkpoint", text=f"saved ckpt-200 of {name}")
    return root


@pytest.fixture(scope="module")
def live_run(store: Path, builtin: registry.Registry) -> Iterator[exporter.Run]:
    """A run left open: the dashboard must call it live and refresh it."""
    settings = exporter.ExporterSettings(store=store, policy="warn")
    run = exporter.init(
        "ppo-live",
        project="cartpole",
        framework="sb3",
        config=CONFIG,
        registry=builtin,
        settings=settings,
    )
    _log_run(run, 0, 100, 0.0)
    assert run.flush()
    yield run
    run.finish()


@pytest.fixture(scope="module")
def base_url(store: Path, live_run: exporter.Run, builtin: registry.Registry) -> Iterator[str]:
    app = create_app(DatasourceConfig(store=store), builtin)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


@pytest.fixture
def tab(browser: Any, base_url: str) -> Iterator[Page]:
    page = Page(browser, base_url)
    yield page
    page.close()


def test_run_list_shows_each_run_with_its_lifecycle_status(tab: Page) -> None:
    page = tab.page
    page.goto(tab.base + "/")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 3
    by_run = {r.get_attribute("data-run"): r for r in rows.all()}
    for name in ("ppo-a", "ppo-b"):
        row = by_run[name]
        assert row.locator(".run-status").get_attribute("data-status") == "finished"
        assert row.locator(".last-step").inner_text() == f"{STEPS - 1:,}"
        cells = row.locator("td").all_inner_texts()
        assert cells[1] == "cartpole" and cells[2] == "sb3"
        assert "UTC" in cells[5]
    assert by_run["ppo-live"].locator(".run-status").get_attribute("data-status") == "live"
    tab.shot("dashboard-runs.png")
    # Ticking runs and comparing opens the run page with both overlaid.
    by_run["ppo-a"].locator("input.pick").check()
    by_run["ppo-b"].locator("input.pick").check()
    page.click("#compare")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert [c.get_attribute("data-run") for c in page.locator(".run-chip").all()] == [
        "ppo-a",
        "ppo-b",
    ]


def test_run_page_shows_every_logged_field_grouped_by_the_registry(
    tab: Page, builtin: registry.Registry
) -> None:
    page = tab.open_run("run=ppo-a")
    groups = [g.get_attribute("data-group") for g in page.locator(".group").all()]
    assert groups == ["core", "registered", "unregistered"]
    fields = [p.get_attribute("data-field") for p in page.locator(".panel").all()]
    logged = {
        "policy_kl",
        "policy_entropy",
        "value_loss",
        "episodic_return",
        "explained_variance",
        UNREGISTERED_KEY,
    }
    # What was logged, plus what the exporter derives from it (e.g. kl_clip_ratio).
    assert logged <= set(fields)
    assert all(builtin.has_metric(f) for f in set(fields) - {UNREGISTERED_KEY})
    core = [f for f in fields if builtin.has_metric(f) and builtin.metric(f).core]
    assert fields[: len(core)] == core  # core first
    assert fields[-1] == UNREGISTERED_KEY
    for field in logged:
        assert tab.chart(field, "u.data[0].length") == STEPS, field
        assert page.locator(f'.panel[data-field="{field}"] canvas').count() >= 1
    # The registry's healthy band is shaded where one is declared, and nowhere else.
    assert int(page.locator('.panel[data-field="policy_kl"]').get_attribute("data-bands")) > 100
    assert (
        page.locator(f'.panel[data-field="{UNREGISTERED_KEY}"]').get_attribute("data-bands") == "0"
    )
    # The unregistered series holds what was logged.
    assert tab.chart(UNREGISTERED_KEY, "u.data[1].slice(0, 8)") == [0, 1, 2, 3, 4, 5, 6, 0]
    # Registry tooltips on hover, and the report's diagnosis cards beside each metric.
    kl = page.locator('.panel[data-field="policy_kl"]')
    kl.locator(".info").hover()
    tip = kl.locator(".tip")
    assert tip.is_visible()
    assert builtin.metric("policy_kl").definition.en[:40] in tip.inner_text()
    assert kl.locator("article.card").count() == 1
    note = page.locator('.panel[data-field="value_loss"] .note').inner_text()
    assert "sb3 train/value_loss × 0.5" in note and "rllib" not in note
    # Hovering the plot reads the values out in the legend.
    page.mouse.move(0, 0)
    kl.locator(".u-over").scroll_into_view_if_needed()  # in the grid's second row
    box = kl.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5, steps=4)
    page.wait_for_function(
        "() => /\\d/.test(document.querySelector('.panel[data-field=\"policy_kl\"] .u-legend')"
        ".innerText.split(' raw ')[1])"
    )
    tab.shot("dashboard-run.png")


def test_search_finds_metrics_by_name_and_by_framework_alias(tab: Page) -> None:
    page = tab.open_run("run=ppo-a")
    visible = lambda: [  # noqa: E731
        p.get_attribute("data-field") for p in page.locator(".panel").all() if p.is_visible()
    ]
    page.fill("#search", "train/approx_kl")  # SB3's spelling of policy_kl
    assert visible() == ["policy_kl"]
    page.fill("#search", "explained")
    assert visible() == ["explained_variance"]
    page.fill("#search", "my_probe")
    assert visible() == [UNREGISTERED_KEY]
    assert page.locator('.group[data-group="core"]').is_hidden()
    page.fill("#search", "no-such-metric-anywhere")
    assert visible() == []
    assert UI["en"]["no_match"] in page.locator("#shown").inner_text()
    page.fill("#search", "")
    assert len(visible()) == page.locator(".panel").count() > 6


def test_overlaid_runs_get_one_colour_each(tab: Page) -> None:
    # each run's colour is the one /api/runs gives it (chosen when the run was created), in any
    # order of opening: the page does not colour runs by their position on it
    listed = json.loads(tab.page.request.get(tab.base + "/api/runs").text())["runs"]
    own = {r["run"]: r["color"] for r in listed}
    assert own["ppo-a"] != own["ppo-b"] and {own["ppo-a"], own["ppo-b"]} <= set(PALETTE)
    for order in (("ppo-a", "ppo-b"), ("ppo-b", "ppo-a")):
        page = tab.open_run("&".join(f"run={r}" for r in order))
        chips = page.locator(".run-chip").all()
        assert [c.get_attribute("data-color") for c in chips] == [own[r] for r in order]
        strokes = tab.chart(
            "episodic_return",
            "u.series.slice(1).map((s, i) => typeof s.stroke === 'function' ? s.stroke(u, i + 1) : s.stroke)",
        )
        # raw (translucent) and smoothed per run, in the page's run order.
        assert strokes == [c for r in order for c in (own[r] + "59", own[r])]
    # Both runs' values are drawn: ppo-b was logged 1.0 higher at every step.
    a, b = tab.chart("episodic_return", "[u.data[3][10], u.data[1][10]]")
    assert b - a == pytest.approx(1.0)
    tab.shot("dashboard-overlay.png")


def test_drag_zoom_and_step_range_refetch_that_range(tab: Page) -> None:
    page = tab.open_run("run=ppo-a")
    over = page.locator('.panel[data-field="policy_kl"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.25, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    page.mouse.up()
    page.wait_for_function("() => document.getElementById('range-from').value !== ''")
    lo = int(page.input_value("#range-from"))
    hi = int(page.input_value("#range-to"))
    assert 0 < lo < hi < STEPS - 1
    page.wait_for_function(
        f"() => rlvitalsDash.charts.get('policy_kl').data[0][0] >= {lo} && "
        f"rlvitalsDash.charts.get('value_loss').data[0].length === {hi - lo + 1}"
    )
    xs = tab.chart("policy_kl", "u.data[0]")
    assert xs[0] == lo and xs[-1] == hi  # every chart shows exactly that step range
    # Typed range, then reset.
    page.fill("#range-from", "100")
    page.fill("#range-to", "149")
    page.click("#range-apply")
    page.wait_for_function("() => rlvitalsDash.charts.get('policy_kl').data[0].length === 50")
    assert tab.chart("episodic_return", "[u.data[0][0], u.data[0].at(-1)]") == [100, 149]
    href = page.locator('.panel[data-field="policy_kl"] a.dl[data-format="csv"]').get_attribute(
        "href"
    )
    assert "from=100" in href and "to=149" in href
    page.click("#zoom-reset")
    page.wait_for_function(f"() => rlvitalsDash.charts.get('policy_kl').data[0].length === {STEPS}")


def test_events_are_listed_and_marked_on_the_charts(tab: Page) -> None:
    page = tab.open_run("run=ppo-a&run=ppo-b")
    rows = page.locator('#events-table tbody tr[data-step="200"]')
    assert rows.count() == 2
    assert "saved ckpt-200 of ppo-a" in rows.first.inner_text()
    panel = page.locator('.panel[data-field="policy_kl"]')
    assert panel.get_attribute("data-events") == "2"  # one dashed line per run
    page.select_option("#x-mode", "wall")
    assert panel.get_attribute("data-events") == "2"  # placed by wall time too
    page.select_option("#x-mode", "step")
    page.fill("#range-from", "0")
    page.fill("#range-to", "99")
    page.click("#range-apply")
    page.wait_for_function("() => rlvitalsDash.charts.get('policy_kl').data[0].length === 100")
    assert panel.get_attribute("data-events") == "0"  # outside the range: not drawn


def _ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's debiased EMA, as registry.diagnosis.stats.ema."""
    out, acc = [], 0.0
    for n, v in enumerate(values, start=1):
        acc = weight * acc + (1 - weight) * v
        out.append(acc / (1 - weight**n))
    return out


def test_smoothing_slider_and_raw_smoothed_toggles(tab: Page) -> None:
    page = tab.open_run("run=ppo-a")
    raw = tab.chart("value_loss", "u.data[1]")
    assert tab.chart("value_loss", "u.data[2]") == pytest.approx(_ema(raw, 0.6))
    page.locator("#smoothing").fill("0.95")
    page.wait_for_function("() => document.body.dataset.smoothingDrawn === '0.95'")
    assert page.locator("#smoothing-value").inner_text() == "0.950"
    assert tab.chart("value_loss", "u.data[2]") == pytest.approx(_ema(raw, 0.95))
    page.locator("#smoothing").fill("0")
    page.wait_for_function("() => document.body.dataset.smoothingDrawn === '0'")
    assert tab.chart("value_loss", "u.data[2]") == raw
    page.uncheck("#show-raw")
    assert tab.chart("value_loss", "u.series.map(s => s.show)") == [True, False, True]
    page.check("#show-raw")
    page.uncheck("#show-smooth")
    assert tab.chart("value_loss", "u.series.map(s => s.show)") == [True, True, False]


def test_x_axis_step_wall_time_and_relative_time(tab: Page, store: Path) -> None:
    page = tab.open_run("run=ppo-a")
    assert tab.chart("policy_kl", "u.data[0].slice(0, 3)") == [0, 1, 2]
    started = time.time() - 3600
    page.select_option("#x-mode", "wall")
    assert tab.chart("policy_kl", "u.scales.x.time") is True
    first_wall = tab.chart("policy_kl", "u.data[0][0]")
    assert started < first_wall < time.time()
    page.select_option("#x-mode", "relative")
    rel = tab.chart("policy_kl", "u.data[0]")
    assert 0 <= rel[0] < 60 and rel == sorted(rel)
    ticks = tab.chart("policy_kl", "u.axes[0].values(u, [5, 125, 3725], 0, 0, 0)")
    assert ticks == ["5s", "2m05s", "1h02m"]  # durations, not step numbers
    tab.shot("dashboard-relative-time.png")


def test_the_view_is_kept_in_the_address(tab: Page) -> None:
    page = tab.open_run("run=ppo-a&smoothing=0.9&x=relative&from=10&to=59&q=kl")
    assert page.locator("#smoothing-value").inner_text() == "0.900"
    assert page.input_value("#x-mode") == "relative"
    assert tab.chart("policy_kl", "u.data[0].length") == 50
    assert page.locator('.panel[data-field="episodic_return"]').is_hidden()
    page.select_option("#x-mode", "wall")
    page.fill("#search", "")
    query = page.evaluate("() => window.location.search")
    assert "x=wall" in query and "from=10" in query and "q=" not in query
    assert "x=wall" in page.locator(".lang-switch").get_attribute("href")


def test_config_table_lists_each_runs_hyperparameters(tab: Page) -> None:
    page = tab.open_run("run=ppo-a&run=ppo-b")
    table = page.locator("#config-table")
    head = table.locator("thead th").all_inner_texts()
    assert head[1:] == ["ppo-a", "ppo-b"]
    rows = {
        r.get_attribute("data-key"): r.locator("td").all_inner_texts()
        for r in table.locator("tbody tr").all()
    }
    assert rows["clip_epsilon"] == ["0.2", "0.2"]
    assert rows["seed"] == ["0", "1"]
    assert rows["policy"] == ["MlpPolicy", "MlpPolicy"]
    assert rows["net_arch"] == ["[64,64]", "[64,64]"]


def test_csv_and_json_downloads_of_a_series(tab: Page, tmp_path: Path) -> None:
    page = tab.open_run("run=ppo-a")
    panel = page.locator(f'.panel[data-field="{UNREGISTERED_KEY}"]')
    panel.locator(".dl-menu > summary").click()  # the chart's downloads are one menu
    with page.expect_download() as dl:
        panel.locator('a.dl[data-format="csv"]').click()
    path = tmp_path / "series.csv"
    dl.value.save_as(path)
    assert dl.value.suggested_filename.endswith(".csv")
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0] == ["step", "wall_time", "value"]
    assert len(rows) == STEPS + 1
    assert [float(r[2]) for r in rows[1:9]] == [0, 1, 2, 3, 4, 5, 6, 0]
    page.locator('.panel[data-field="policy_kl"] .dl-menu > summary').click()
    with page.expect_download() as dl:
        page.locator('.panel[data-field="policy_kl"] a.dl[data-format="json"]').click()
    body = json.loads(Path(dl.value.path()).read_text())
    assert body["field"] == "policy_kl" and len(body["steps"]) == STEPS
    assert all(isinstance(w, float) for w in body["wall_times"])


def test_live_run_refreshes_without_reload_and_stops_when_finished(
    tab: Page, live_run: exporter.Run, browser: Any, base_url: str
) -> None:
    listing = Page(browser, base_url)  # the run list, open meanwhile, refreshes its rows too
    listing.page.goto(base_url + "/")
    live_row = listing.page.locator('tr[data-run="ppo-live"]')
    assert live_row.locator(".last-step").inner_text() == "99"
    page = tab.open_run("run=ppo-live&refresh=1")
    assert page.locator("#live-state").get_attribute("data-live") == "1"
    assert page.locator('.panel[data-field="policy_kl"]').get_attribute("data-last-step") == "99"
    page.evaluate("window.__notReloaded = true")
    _log_run(live_run, 100, 250, 0.0)
    assert live_run.flush()
    page.wait_for_function(
        "() => document.querySelector('.panel[data-field=\"policy_kl\"]').dataset.lastStep === '249'",
        timeout=20_000,
    )
    assert tab.chart("policy_kl", "u.data[0].length") == 250
    assert page.evaluate("window.__notReloaded") is True
    tab.shot("dashboard-live.png")
    listing.page.wait_for_function(
        "() => document.querySelector('tr[data-run=\"ppo-live\"] .last-step').textContent === '249'",
        timeout=20_000,
    )
    live_run.finish()
    page.wait_for_function(
        "() => document.getElementById('live-state').dataset.live === '0'", timeout=20_000
    )
    assert page.locator(".run-chip .run-status").get_attribute("data-status") == "finished"
    # what set the status, on hover (the run called finish())
    assert page.locator(".run-chip .run-status").get_attribute("title") == "finish() called"
    refreshes = page.evaluate("document.body.dataset.refreshes")
    page.wait_for_timeout(2500)
    assert page.evaluate("document.body.dataset.refreshes") == refreshes  # stopped
    listing.page.wait_for_function(
        "() => document.querySelector('tr[data-run=\"ppo-live\"] .run-status').dataset.status"
        " === 'finished'",
        timeout=20_000,
    )
    listing.close()


def test_chinese_view(tab: Page, builtin: registry.Registry) -> None:
    zh = UI["zh"]
    page = tab.page
    page.goto(tab.base + "/?lang=zh")
    assert page.locator("html").get_attribute("lang") == "zh"
    assert zh["project"] in page.locator("table.runs thead").inner_text()
    assert page.locator('tr[data-run="ppo-a"] .run-status').inner_text() == zh["finished"]
    page = tab.open_run("run=ppo-a&lang=zh")
    assert page.locator('.group[data-group="core"] .group-title').inner_text() == zh["group_core"]
    kl = builtin.metric("policy_kl")
    panel = page.locator('.panel[data-field="policy_kl"]')
    assert kl.title.zh in panel.locator(".info").inner_text()
    panel.locator(".info").hover()
    assert kl.definition.zh[:20] in panel.locator(".tip").inner_text()
    assert page.locator("#search").get_attribute("placeholder") == zh["search"]
    assert zh["config"] in page.locator("h2").all_inner_texts()
    note = page.locator('.panel[data-field="policy_entropy"] .note').inner_text()
    assert zh["transform"] in note and zh["t_negate"] in note
    assert page.locator(".run-chip .hint").first.inner_text() == f"第 {STEPS - 1} 步"
    # None of the page's own English words is left in the Chinese view (cards are the report's).
    # (the run selector's options are run names, not the page's words)
    chrome = page.evaluate(
        "() => { const h = document.querySelector('header').cloneNode(true);"
        " h.querySelectorAll('#add-run option:not(:first-child)').forEach((o) => o.remove());"
        " return h.innerText; }"
    )
    chrome += " " + page.locator("#toolbar").inner_text()
    assert zh["add_run"] in chrome
    chrome += " ".join(
        t
        for sel in (
            "#config thead th",
            ".group h2",
            ".panel .head .note",
            ".panel .tools",
            ".group-toggle",
        )
        for t in page.locator(sel).all_inner_texts()
    )
    english = [v for k, v in UI["en"].items() if "{" not in v and k != "other_lang" and len(v) > 3]
    assert [w for w in english if w in chrome] == []
    page.fill("#search", "策略")  # Chinese titles are searchable too
    assert page.locator('.panel[data-field="policy_kl"]').is_visible()
    tab.shot("dashboard-zh.png")


def test_screenshot_for_the_readme(tab: Page) -> None:
    """The overlay page as the README and docs/serve.md show it (docs/serve.png is a copy of this file)."""
    page = tab.open_run("run=ppo-a&run=ppo-b")
    page.set_viewport_size({"width": 1400, "height": 1300})
    path = tab.shot("serve.png")
    assert path.stat().st_size > 50_000
