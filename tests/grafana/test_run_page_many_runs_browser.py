"""The run page stays readable with 1, 3 and 8 runs (issue 38), in headless Chromium against the
real app on a store the real exporter and a real `rlvitals import` wrote: each run is drawn in one
colour of its own (the colour `/api/runs` gives it, in every chart, the chips, the config table and
the download menu), nothing is cut (no element's text wider than its box: scrollWidth against
clientWidth) or overlapping (the boxes of what sits side by side or one under another), and the
config table shows each run's hyperparameters first (learning rate, clip range, ... as `--config`,
the code or the logs gave them), then its context with what an import inferred marked so, the same
for two runs imported from one log. Screenshots of the three pages are kept in test-artifacts/."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_page import Page, serving
from chromium import ARTIFACTS

import exporter
import registry
from grafana.live import UI
from rlvitals.cli import main

pytest.importorskip("playwright.sync_api", reason="PyPI playwright is in the test extra")

STEPS = 300
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "sb3_ppo_cartpole_healthy"
IMPORTED = ("ppo-cartpole-import-a", "ppo-cartpole-import-b")  # one log imported twice
LOGGED = tuple(f"grpo-qwen2.5-0.5b-lr{lr}-s{s}" for lr in ("1e-6", "3e-6") for s in range(3))
RUNS = (*LOGGED, *IMPORTED)
SHOWN = {1: LOGGED[:1], 3: (LOGGED[0], LOGGED[3], IMPORTED[0]), 8: RUNS}


def _config(name: str) -> dict[str, Any]:
    lr = 1e-6 if "-lr1e-6-" in name else 3e-6
    return {
        "algorithm": "GRPO",
        "learning_rate": lr,
        "clip_epsilon": 0.2,
        "kl_coef": 0.04,
        "group_size": 8,
        "seed": int(name.rsplit("-s", 1)[1]),
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Path:
    root = tmp_path_factory.mktemp("many-runs-store")
    settings = exporter.ExporterSettings(store=root, policy="warn")
    for i, name in enumerate(LOGGED):
        with exporter.init(
            name, project="sweep", framework="trl", config=_config(name), registry=builtin,
            settings=settings,
        ) as run:  # fmt: skip
            for step in range(STEPS):
                run.log(
                    step,
                    {
                        "train/reward": 0.2
                        + step / STEPS * (0.5 + 0.05 * i)
                        + 0.02 * math.sin(step),
                        "train/kl": 0.001 * step / STEPS + 1e-4 * i,
                        "train/entropy": 2.0 - step / STEPS * (0.5 + 0.1 * i),
                        "train/clip_ratio/region_mean": 0.05 + 0.01 * math.sin(step / 7),
                        "train/learning_rate": _config(name)["learning_rate"],
                        "train/completions/mean_length": 200 + step,
                    },
                )
    for name in IMPORTED:
        assert main(["import", str(LOGS), "--run", name, "--store", str(root)]) == 0
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


# Every element whose text must be whole: wider text than its box is cut (an ellipsis, or hidden).
_TEXT = [
    ".run-chip",
    "#toolbar label",
    ".panel .head > *",
    ".panel .tools > *",
    ".uplot .u-legend tr.u-series:not([hidden]) th",
    ".uplot .u-legend tr.u-series:not([hidden]) td",
    ".card-fold > summary",
    ".card-fold > summary > *",
    "#config-table th",
    "#config-table td",
    ".group-toggle",
]

# What is placed beside or under each other: no two boxes of one list may overlap.
_CHECKS = """(texts) => {
  const visible = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  const cut = [];
  for (const sel of texts) {
    for (const e of document.querySelectorAll(sel)) {
      if (!visible(e) || getComputedStyle(e).display === "inline") continue;
      if (e.scrollWidth > e.clientWidth + 1) cut.push([sel, e.textContent.trim().slice(0, 80), e.scrollWidth, e.clientWidth]);
    }
  }
  const overlaps = [];
  const disjoint = (what, els) => {
    const boxes = els.filter(visible).map((e) => [e, e.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, ra] = boxes[i], [b, rb] = boxes[j];
        const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        if (w > 1 && h > 1) overlaps.push([what, a.textContent.trim().slice(0, 40), b.textContent.trim().slice(0, 40)]);
      }
  };
  const all = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  disjoint("run chips", all(".run-chip"));
  disjoint("toolbar", all("#toolbar > *"));
  disjoint("panels", all(".panel"));
  for (const p of all(".panel")) {
    const f = p.dataset.field;
    disjoint(f + " parts", [p.querySelector(".head"), p.querySelector(".tools"), p.querySelector(".chart"), p.querySelector(".cards")]);
    disjoint(f + " head", all(".head > *", p));
    disjoint(f + " tools", all(".tools > *", p));
    disjoint(f + " legend", all(".u-legend tr.u-series:not([hidden])", p));
    disjoint(f + " status lines", all(".card-fold", p));
    disjoint(f + " a status line", all(".card-fold > summary > *", p));
  }
  const page = document.documentElement;
  return { cut, overlaps, wide: page.scrollWidth > window.innerWidth + 1,
           panelsWide: all(".panel").filter((p) => p.scrollWidth > p.clientWidth + 1).map((p) => p.dataset.field) };
}"""

_STROKES = """() => {
  const out = {};
  for (const [field, u] of rlvitalsDash.charts) {
    const runs = u.root.dataset.runs.split("\\n");
    const stroke = (i) => (typeof u.series[i].stroke === "function" ? u.series[i].stroke(u, i) : u.series[i].stroke);
    out[field] = runs.map((run, k) => [run, stroke(1 + 2 * k), stroke(2 + 2 * k)]);
  }
  return out;
}"""


def _open(tab: Page, runs: tuple[str, ...]) -> Any:
    page = tab.open_run("&".join(f"run={r}" for r in runs))
    page.wait_for_function(
        "() => document.querySelectorAll('.panel .card-fold').length > 0 && "
        "Array.from(rlvitalsDash.charts.values()).length > 0"
    )
    return page


@pytest.mark.parametrize("count", sorted(SHOWN))
def test_the_run_page_of_1_3_and_8_runs_is_whole_and_one_colour_per_run(
    tab: Page, count: int
) -> None:
    shown = SHOWN[count]
    listed = json.loads(tab.page.request.get(tab.base + "/api/runs").text())["runs"]
    own = {r["run"]: r["color"] for r in listed}
    assert len({own[r] for r in RUNS}) == len(RUNS)  # eight runs made in a row: eight colours
    page = _open(tab, shown)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"run-page-{count}-runs.png"), full_page=True)
    # one colour per run, its own, everywhere it is drawn
    chips = {
        c.get_attribute("data-run"): c.get_attribute("data-color")
        for c in page.locator(".run-chip").all()
    }
    assert chips == {r: own[r] for r in shown}
    strokes = page.evaluate(_STROKES)
    assert len(strokes) >= 6
    for field, lines in strokes.items():
        for run, raw, smooth in lines:
            assert (raw, smooth) == (own[run] + "59", own[run]), (field, run)
    heads = page.locator("#config-table thead th").all()[1:]
    assert [h.inner_text() for h in heads] == list(shown)
    assert [h.get_attribute("style") for h in heads] == [f"color:{own[r]}" for r in shown]
    # one legend row per run, named after it; one download menu per chart
    field = max(strokes, key=lambda f: len(strokes[f]))
    drawn = [run for run, _, _ in strokes[field]]
    assert len(drawn) == count  # a chart every shown run logged (the learning rate, the entropy)
    panel = page.locator(f'.panel[data-field="{field}"]')
    rows = panel.locator(".u-legend tr.u-series:not([hidden]) .u-label").all_inner_texts()
    assert rows[1:] == drawn
    assert panel.locator(".dl-menu").count() == 1
    assert panel.locator("a.dl").count() == 2 * len(drawn)
    # nothing cut, nothing overlapping
    found = page.evaluate(_CHECKS, _TEXT)
    assert found["cut"] == [], found["cut"][:10]
    assert found["overlaps"] == [], found["overlaps"][:10]
    assert not found["wide"] and found["panelsWide"] == []


def test_the_config_table_shows_hyperparameters_first_and_marks_what_was_inferred(
    tab: Page,
) -> None:
    page = _open(tab, SHOWN[3])
    table = page.locator("#config-table")
    kinds = [r.get_attribute("data-kind") for r in table.locator("tbody tr[data-key]").all()]
    assert kinds == sorted(kinds, key=lambda k: k != "hyperparameter")  # hyperparameters first
    rows = {
        r.get_attribute("data-key"): r.locator("td").all_inner_texts()
        for r in table.locator("tbody tr[data-key]").all()
    }
    hyper = {
        r.get_attribute("data-key")
        for r in table.locator('tbody tr[data-kind="hyperparameter"]').all()
    }
    assert {"learning_rate", "clip_epsilon", "kl_coef", "group_size"} <= hyper
    assert rows["learning_rate"][:2] == ["1e-6", "3e-6"]
    # the imported SB3 run: its learning rate and clip range as it logged them
    said = UI["en"]["source_logged"]
    assert rows["learning_rate"][2] == f"0.0003 ({said})"
    assert rows["clip_epsilon"] == ["0.2", "0.2", f"0.2 ({said})"]
    # its algorithm and action space were inferred by the import from the names it logged
    inferred = UI["en"]["source_inferred"]
    assert rows["algorithm"] == ["GRPO", "GRPO", f"PPO ({inferred})"]
    assert rows["action_space"][2] == f"discrete ({inferred})"


def test_identically_configured_runs_get_identical_config_columns(tab: Page) -> None:
    page = _open(tab, IMPORTED)
    rows = [
        r.locator("td").all_inner_texts()
        for r in page.locator("#config-table tbody tr[data-key]").all()
    ]
    assert rows and all(a == b for a, b in rows), rows
