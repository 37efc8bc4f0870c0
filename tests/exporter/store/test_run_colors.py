"""A run's colour is chosen when the run is created and kept with it in the store
(`exporter.store.run_colors`): the palette reads on every chart background and its colours are
told apart (issue 37: 20 runs on one page, at most 2 sharing a colour), runs created one after
another spread over the palette, a run keeps its colour when renamed or written again, a file
from before colours gets them when opened, and a page showing runs that share colours gets
distinct ones while the palette lasts, whatever the order it names them in."""

from __future__ import annotations

import itertools
import math
import random
import sqlite3
from collections import Counter
from pathlib import Path

from colour_science import ciede2000, contrast, lab

import exporter
from exporter import Outbox
from exporter.store import run_admin
from exporter.store.run_colors import PALETTE, display_colors, fill_colors
from grafana.dashboards_gen.panels import RAW_COLOUR

BACKGROUNDS = ("#ffffff", "#15181d", "#181b1f")
"""What charts are drawn on: white (the report, the light embedded page, Grafana's light panel),
the dark embedded page (live.css) and Grafana's dark panel."""
FIRST_PALETTE = (
    "#0088ee",
    "#ee6611",
    "#11aa33",
    "#cc0044",
    "#8822ff",
    "#007777",
    "#776600",
    "#aa88aa",
)
"""The palette before issue 37's 20-run pages: stores keep the colours it gave, screenshots too."""
MIN_CONTRAST = 3.0
"""WCAG 2.1 SC 1.4.11: graphics need 3:1 against what they sit on."""
MIN_DIFFERENCE = 13.9
"""The smallest CIEDE2000 difference between any two palette colours (measured: 14.0); the first
eight keep theirs, 29."""


def test_the_colour_formulas_give_their_published_values() -> None:
    # Sharma, Wu, Dalal (2005), Table 1: pairs 1, 7, 13, 17, 25
    for lab1, lab2, expected in (
        ((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
        ((50, 0, 0), (50, -1, 2), 2.3669),
        ((50, 2.49, -0.001), (50, -2.49, 0.0011), 7.2195),
        ((50, 2.5, 0), (73, 25, -18), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ):
        assert round(ciede2000(lab1, lab2), 4) == expected
    assert [round(x, 2) for x in lab("#ffffff")] == [100.0, 0.0, 0.0]
    assert round(contrast("#000000", "#ffffff"), 2) == 21.0
    assert round(contrast("#767676", "#ffffff"), 2) == 4.54  # WCAG's smallest AA grey on white


def test_twenty_runs_can_have_twenty_colours_and_eight_keep_theirs() -> None:
    assert len(set(PALETTE)) == len(PALETTE) >= 20
    assert PALETTE[:8] == FIRST_PALETTE


def test_every_palette_colour_reads_on_a_light_and_a_dark_page() -> None:
    for color in PALETTE:
        for background in BACKGROUNDS:
            assert contrast(color, background) >= MIN_CONTRAST, (color, background)


def test_any_two_palette_colours_are_told_apart_and_none_is_the_raw_grey() -> None:
    labs = {c: lab(c) for c in PALETTE}

    def smallest(colors: tuple[str, ...]) -> float:
        return min(ciede2000(labs[a], labs[b]) for a, b in itertools.combinations(colors, 2))

    assert smallest(PALETTE) >= MIN_DIFFERENCE
    assert smallest(PALETTE[:8]) >= 29  # eight runs still get the eight best told apart
    # each colour added is no closer to those before it than the one after it (farthest-first):
    # fewer runs on a page get better-separated colours
    steps = [
        min(ciede2000(labs[c], labs[p]) for p in PALETTE[:i])
        for i, c in enumerate(PALETTE)
        if i >= 8
    ]
    assert steps == sorted(steps, reverse=True)
    grey = lab(RAW_COLOUR)
    for color in PALETTE:
        assert ciede2000(labs[color], grey) >= 15, color  # raw lines are grey
        assert math.hypot(*labs[color][1:]) >= 20, color  # no grey at all


def _colors(path: Path) -> dict[str, str | None]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT run, color FROM runs ORDER BY created, run").fetchall())


def test_runs_created_one_after_another_get_the_least_used_colour(tmp_path: Path) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    names = [f"sweep-lr{i}-s{i % 3}" for i in range(10)]
    for name in names:
        with exporter.init(name, project="p", settings=settings) as run:
            run.log(0, {"policy_kl": 0.01})
    colors = _colors(tmp_path / "outbox.sqlite")
    assert list(colors) == names
    # none used yet: each takes the first of the palette no run has
    assert [colors[n] for n in names] == list(PALETTE[:10])
    # the colour stays with the run: renamed, written again, reopened
    with Outbox(tmp_path / "outbox.sqlite") as box:
        run_admin.rename_run(box, names[0], "renamed")
        assert box.run("renamed").color == colors[names[0]]  # type: ignore[union-attr]
    with exporter.init("renamed", resume=True, settings=settings) as run:
        run.log(1, {"policy_kl": 0.02})
    assert _colors(tmp_path / "outbox.sqlite")["renamed"] == colors[names[0]]


def test_a_store_from_before_colours_gets_them_when_opened(tmp_path: Path) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    for name in ("old-a", "old-b", "old-c"):
        with exporter.init(name, settings=settings) as run:
            run.log(0, {"policy_kl": 0.01})
    path = tmp_path / "outbox.sqlite"
    with sqlite3.connect(path) as db:  # the file as an older rlvitals left it
        db.execute("ALTER TABLE runs DROP COLUMN color")
    with Outbox(path) as box:
        got = [box.run(n).color for n in ("old-a", "old-b", "old-c")]  # type: ignore[union-attr]
    assert len(set(got)) == 3 and set(got) <= set(PALETTE)
    # what a reader shows for a file nobody has opened for writing yet is the same
    assert fill_colors([None, None, None]) == got


def test_a_page_shows_each_run_in_a_colour_of_its_own_while_the_palette_lasts() -> None:
    rng = random.Random(38)
    store = [f"run-{i:02d}" for i in range(30)]
    # a store where colours collide: 30 runs, only some colours, several runs per colour
    stored = {r: PALETTE[rng.randrange(3)] for r in store}
    for k in (1, 3, 8, 20, len(PALETTE)):
        for _ in range(50):
            shown = rng.sample(store, k)
            got = display_colors(shown, stored, store)
            assert list(got) == shown
            assert len(set(got.values())) == k, got
            # the same runs named in another order: the same colours
            again = display_colors(list(reversed(shown)), stored, store)
            assert again == got
    # more runs than colours: every colour used, none more than needed
    got = display_colors(store, stored, store)
    assert set(got.values()) == set(PALETTE)
    assert max(Counter(got.values()).values()) == -(-len(store) // len(PALETTE))
    # runs whose own colours differ keep them
    own = dict(zip(store[:8], PALETTE[:8], strict=True))
    for shown in itertools.permutations(store[:8], 3):
        assert display_colors(list(shown), own, store) == {r: own[r] for r in shown}


def test_a_store_coloured_by_the_eight_colour_palette_shows_twenty_runs_in_twenty() -> None:
    """Issue 37: 20 sweep runs a store coloured when the palette had 8 colours (each colour
    three times at most): shown together, 20 colours; the run created first with a colour keeps
    it, and a run shown with no other of its colour keeps its own."""
    sweep = [f"grpo-qwen-lr{lr}-s{s}" for lr in ("1e-6", "3e-6", "1e-5", "3e-5") for s in range(5)]
    stored = {r: FIRST_PALETTE[i % 8] for i, r in enumerate(sweep)}
    got = display_colors(sweep, stored, sweep)
    assert len(set(got.values())) == 20
    assert all(got[r] == stored[r] for r in sweep[:8])
    alone = sweep[8:16]  # colours 1..8 of the first palette, once each
    assert display_colors(alone, stored, sweep) == {r: stored[r] for r in alone}


def test_the_added_colours_are_the_farthest_first_choice_the_palette_states() -> None:
    """The rule `exporter.store.run_colors` states, run again: of the `#rgb` colours reading on
    every background with a chroma of at least 20, each added colour is the farthest (CIEDE2000)
    from those before it and from the raw grey; a tie goes to the larger hex."""
    digits = "0123456789abcdef"
    labs = {
        c: lab(c)
        for c in (f"#{r}{r}{g}{g}{b}{b}" for r in digits for g in digits for b in digits)
        if all(contrast(c, bg) >= MIN_CONTRAST for bg in BACKGROUNDS)
    }
    labs = {c: v for c, v in labs.items() if math.hypot(*v[1:]) >= 20}
    far = {c: ciede2000(v, lab(RAW_COLOUR)) for c, v in labs.items()}
    for p in PALETTE[:8]:
        far = {c: min(d, ciede2000(labs[c], lab(p))) for c, d in far.items()}
    chosen = list(PALETTE[:8])
    while len(chosen) < len(PALETTE):
        best = max(far, key=lambda c: (far[c], c))
        chosen.append(best)
        far = {c: min(d, ciede2000(labs[c], labs[best])) for c, d in far.items()}
    assert tuple(chosen) == PALETTE
