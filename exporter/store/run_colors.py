"""A run's colour: chosen once, when the run is created, and kept with it in the store.

Every chart of every page draws a run in its colour (the live dashboard, and the Grafana
dashboards through the `color` of `/api/runs`), so a run is the same colour whichever page shows
it, in whatever order runs were opened, on a light or a dark background.

`PALETTE` is eight colours chosen to be told apart: the smallest CIEDE2000 difference between any
two is 29 (Okabe–Ito's eight: 22, with a black and a yellow that vanish on a dark and a light
page), and each has a contrast of at least 3:1 (WCAG's level for graphics) against both the
report's white page and a dark page (#181b1f, Grafana's dark panel). A new run gets the colour
least used by the runs already in the store (the first of the palette on a tie), so the runs of a
store spread over all eight. Where a page shows runs that still share one (a store of more than
eight runs), `display_colors` picks again for the page, deterministically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["PALETTE", "display_colors", "fill_colors", "least_used"]

PALETTE: tuple[str, ...] = (
    "#0088ee",  # blue
    "#ee6611",  # orange
    "#11aa33",  # green
    "#cc0044",  # crimson
    "#8822ff",  # violet
    "#007777",  # teal
    "#776600",  # olive
    "#aa88aa",  # mauve
)


def least_used(used: Iterable[str | None]) -> str:
    """The palette colour fewest of `used` have; the first in palette order on a tie."""
    counts = Counter(c for c in used if c in PALETTE)
    return min(PALETTE, key=lambda c: (counts[c], PALETTE.index(c)))


def fill_colors(stored: Sequence[str | None]) -> list[str]:
    """Colours for runs in creation order (oldest first), `stored` where a run has one (a colour
    outside the palette is kept: someone chose it), else what creation would have given it: the
    least used of those before and of the stored ones. What a store from before run colours gets
    when opened for writing, and what a reader of such a file shows meanwhile."""
    out: list[str] = []
    known = [c for c in stored if c is not None]
    for i, color in enumerate(stored):
        out.append(color if color is not None else least_used([*known, *out[:i]]))
        if color is None:
            known.append(out[-1])
    return out


def display_colors(
    shown: Sequence[str], colors: Mapping[str, str], order: Sequence[str]
) -> dict[str, str]:
    """The colours of the runs `shown` together on one page: each its own (`colors`), except
    where two share one; then the run created first (`order`: the store's runs, oldest first)
    keeps it and the others take, in creation order, the palette colour least used on the page
    (runs with a colour of their own keep it).
    Up to eight runs always get eight colours; the answer does not depend on the order of
    `shown`."""
    rank = {run: i for i, run in enumerate(order)}
    ordered = sorted(dict.fromkeys(shown), key=lambda r: (rank.get(r, len(rank)), r))
    kept: dict[str, str] = {}
    for run in ordered:
        own = colors.get(run)
        if own is not None and own not in kept.values():
            kept[run] = own
    for run in ordered:
        if run not in kept:
            kept[run] = least_used(kept.values())
    return {run: kept[run] for run in shown}
