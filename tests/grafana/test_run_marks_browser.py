"""Marks stay marks (issue 36): the NaN demo run (`rlvitals demo --scenario nan_loss`, 2000 steps, a
health event at every step from 70 %) on the run page of `rlvitals serve`, measured in headless
Chromium against the healthy demo run: its page is no taller (the diagnosis status lines aside),
each chart draws a handful of marks
(its checkpoints, the warm-up end and the exception as lines, the 600 health events as one strip
with their count) rather than hundreds of lines, the key beside the chart says what they are, and
the events table gives the run of health events one row that folds them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_page import Page, serving

import exporter
import registry
from rlvitals.demo import DemoOptions, run_demo, scenario_named

STEPS = 2000  # the demo's default


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Iterator[str]:
    store = tmp_path_factory.mktemp("marks-store")
    settings = exporter.ExporterSettings(store=store, policy="warn")
    scenarios = [scenario_named(n) for n in ("healthy", "nan_loss")]
    run_demo(builtin, scenarios, DemoOptions(steps=STEPS), settings)
    with serving(store, builtin) as url:
        yield url


@pytest.fixture
def tab(browser: Any, base_url: str) -> Iterator[Page]:
    page = Page(browser, base_url)
    yield page
    page.close()


def _measure(tab: Page, run: str) -> dict[str, Any]:
    page = tab.open_run(f"run={run}")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.panel .chart canvas')).length > 0"
    )
    return page.evaluate(
        """() => {
          const panels = Array.from(document.querySelectorAll('.panel')).filter((p) => p.dataset.events !== undefined);
          // the diagnosis status lines say different things for the two runs, each whole (a
          // NaN run's evidence is longer): the pages are compared without them
          for (const c of document.querySelectorAll('.panel .cards')) c.hidden = true;
          return {
            height: document.documentElement.scrollHeight,
            charts: panels.length,
            lines: panels.map((p) => Number(p.dataset.eventLines)),
            strips: panels.map((p) => Number(p.dataset.eventStrips)),
            shown: panels.map((p) => Number(p.dataset.events)),
            keys: panels.map((p) => p.querySelector('.event-key').textContent),
            rows: document.querySelectorAll('#events-table tbody tr').length,
          };
        }"""
    )


def test_the_nan_runs_page_is_no_taller_than_the_healthy_ones_and_its_events_a_strip(
    tab: Page,
) -> None:
    healthy = _measure(tab, "demo-healthy")
    nan = _measure(tab, "demo-nan_loss")
    print("healthy page", healthy["height"], "px; NaN page", nan["height"], "px")
    print("NaN charts", nan["charts"], "lines", max(nan["lines"]), "strips", max(nan["strips"]))
    assert nan["height"] <= healthy["height"], (nan["height"], healthy["height"])
    assert nan["charts"] >= 6
    # 7 checkpoints, the warm-up end and the exception at step 1,400 are lines at most; the 600
    # health events (steps 1,400-1,999) are one strip that counts them, on every chart whose
    # steps reach past 1,400 (a metric that turned NaN there has no x axis beyond it)
    assert max(nan["lines"]) <= 9, nan["lines"]
    assert set(nan["strips"]) <= {0, 1}, nan["strips"]
    crossing = [i for i, n in enumerate(nan["shown"]) if n >= 600]
    assert len(crossing) >= 5, nan["shown"]
    for i in crossing:
        assert nan["strips"][i] == 1 and "600 × health" in nan["keys"][i], (i, nan["keys"][i])
    assert all(s == 0 for s in healthy["strips"]) and max(healthy["lines"]) == 8
    # the table: one row for the run of health events, the other events one row each
    assert nan["rows"] <= healthy["rows"] + 3, (nan["rows"], healthy["rows"])
    row = tab.page.locator('#events-table tbody tr[data-count="600"]')
    assert row.count() == 1 and "1,400–1,999" in row.inner_text()
    tab.shot("run-marks-nan.png")
