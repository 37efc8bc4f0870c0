"""A run's colour is chosen when the run is created and kept with it in the store
(`exporter.store.run_colors`): runs created one after another spread over the palette (any eight
made in a row are eight colours), a run keeps its colour when renamed or written again, a file
from before colours gets them when opened, and a page showing up to eight runs that share colours
gets eight distinct ones, whatever the order it names them in."""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path

import exporter
from exporter import Outbox
from exporter.store import run_admin
from exporter.store.run_colors import PALETTE, display_colors, fill_colors


def _lum(hex_color: str) -> float:
    """WCAG relative luminance."""
    out = 0.0
    for weight, i in ((0.2126, 1), (0.7152, 3), (0.0722, 5)):
        c = int(hex_color[i : i + 2], 16) / 255
        out += weight * (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return out


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_lum(a), _lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_palette_colour_reads_on_a_light_and_a_dark_page() -> None:
    # WCAG 2.1 SC 1.4.11: graphics need 3:1 against what they sit on; the report's page is white,
    # the dark pages #15181d (live.css) and #181b1f (Grafana's dark panel)
    assert len(set(PALETTE)) == len(PALETTE) >= 8
    for color in PALETTE:
        for background in ("#ffffff", "#15181d", "#181b1f"):
            assert _contrast(color, background) >= 3.0, (color, background)


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
    # any eight made in a row are eight colours; the ninth and tenth reuse the least used
    for start in range(3):
        window = [colors[n] for n in names[start : start + 8]]
        assert len(set(window)) == 8 and set(window) <= set(PALETTE), window
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


def test_a_page_of_up_to_eight_runs_shows_each_in_a_colour_of_its_own() -> None:
    rng = random.Random(38)
    store = [f"run-{i:02d}" for i in range(20)]
    # a store where colours collide: 20 runs, only some colours, several runs per colour
    stored = {r: PALETTE[rng.randrange(3)] for r in store}
    for k in (1, 3, 8):
        for _ in range(50):
            shown = rng.sample(store, k)
            got = display_colors(shown, stored, store)
            assert list(got) == shown
            assert len(set(got.values())) == k, got
            # the same runs named in another order: the same colours
            again = display_colors(list(reversed(shown)), stored, store)
            assert again == got
    # runs whose own colours differ keep them
    own = dict(zip(store[:8], PALETTE, strict=True))
    for shown in itertools.permutations(store[:8], 3):
        assert display_colors(list(shown), own, store) == {r: own[r] for r in shown}
