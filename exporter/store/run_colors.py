"""A run's colour: chosen once, when the run is created, and kept with it in the store.

Every chart of every page draws a run in its colour (the live dashboard, and the Grafana
dashboards through the `color` of `/api/runs`), so a run is the same colour whichever page shows
it, in whatever order runs were opened, on a light or a dark background.

`PALETTE` is 24 colours, so up to 24 runs shown together are 24 colours (a 20-run sweep has no
two alike). Each has a contrast of at least 3:1 (WCAG 2.1's level for graphics) against the
charts' three backgrounds: white (the report, the light embedded page and Grafana's light panel),
#15181d (the dark embedded page) and #181b1f (Grafana's dark panel). The first eight are the
palette's first version, in its order (a store keeps the colours it gave): the smallest CIEDE2000
difference between two of them is 29 (Okabe-Ito's eight: 22, with a black and a yellow that vanish
on a dark and a light page). The other sixteen were added one at a time, each the colour of the
4,096 `#rgb` ones (with those contrasts and a CIELAB chroma of at least 20, so no grey like the
raw lines' #8e8e8e) farthest by CIEDE2000 from all before it and from that grey: the smallest
difference of any two of the 24 is 14.0, of the first 12 19.4, of the first 16 17.8 (measured
in tests/exporter/store/test_run_colors.py, formulas in tests/colour_science.py).

A new run gets the colour least used by the runs already in the store (the first of the palette
on a tie), so the runs of a store spread over all of them. Where a page shows runs that still
share one (a store of more runs than colours, or one coloured before the palette grew),
`display_colors` picks again for the page, deterministically: each shown run its own colour
while the palette lasts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["PALETTE", "display_colors", "fill_colors", "least_used"]

PALETTE: tuple[str, ...] = (
    # the first version's eight, in its order
    "#0088ee",  # blue
    "#ee6611",  # orange
    "#11aa33",  # green
    "#cc0044",  # crimson
    "#8822ff",  # violet
    "#007777",  # teal
    "#776600",  # olive
    "#aa88aa",  # mauve
    # added for issue 37 (20 runs on one page), farthest-first
    "#ff22ee",  # magenta
    "#dd7777",  # salmon
    "#666699",  # slate blue
    "#995533",  # brown
    "#999944",  # khaki
    "#447744",  # forest green
    "#aa4488",  # plum
    "#9977ff",  # lavender
    "#bb8844",  # ochre
    "#5599aa",  # steel blue
    "#ff2288",  # pink
    "#ff0022",  # red
    "#009977",  # jade
    "#996666",  # rosewood
    "#117799",  # ocean blue
    "#4466ee",  # royal blue
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
    Up to `len(PALETTE)` runs always get as many colours; the answer does not depend on the order
    of `shown`."""
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
