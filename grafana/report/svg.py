"""Inline SVG line charts in step space, drawn by hand: no chart library, no external resource.

A chart has a linear x axis (training step) and a linear or log y axis, healthy bands shaded by
stage, stage boundaries, events as vertical markers (a dense run of one kind as a strip), and
per series a thin light raw line under a thick dark smoothed line. Every string is escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

from .data import ChartData, FloatArray, IntArray, SeriesData

__all__ = [
    "EMPHASIS_WIDTH",
    "EventMark",
    "Frame",
    "Scale",
    "chart_data_json",
    "chart_svg",
    "fmt",
    "nice_ticks",
    "path_d",
    "series_color",
    "tick_labels",
]

EMPHASIS_WIDTH = {"primary": 2.6, "secondary": 1.6, "thin": 1.1}
_PALETTE = ("#1f5fa8", "#c2571a", "#2e7d32", "#7b3fa0", "#a3323a", "#00796b")
_LIGHT = 0.28


@dataclass(frozen=True)
class Frame:
    width: int = 640
    height: int = 250
    left: int = 64
    right: int = 16
    top: int = 14
    bottom: int = 42

    @property
    def x0(self) -> float:
        return float(self.left)

    @property
    def x1(self) -> float:
        return float(self.width - self.right)

    @property
    def y0(self) -> float:
        return float(self.height - self.bottom)

    @property
    def y1(self) -> float:
        return float(self.top)


@dataclass(frozen=True)
class Scale:
    """Maps a data interval onto a pixel interval, linearly or in log10."""

    lo: float
    hi: float
    p0: float
    p1: float
    log: bool = False

    def _t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def __call__(self, v: float) -> float:
        a, b = self._t(self.lo), self._t(self.hi)
        if b == a:
            return (self.p0 + self.p1) / 2.0
        return self.p0 + (self._t(v) - a) / (b - a) * (self.p1 - self.p0)


@dataclass(frozen=True)
class EventMark:
    """A vertical marker at `start` (a strip to `end` when a kind repeats densely)."""

    start: int
    end: int
    kind: str
    label: str


def series_color(s: SeriesData, index: int) -> str:
    """The registry's display colour of the series, else one of the palette by position."""
    return s.metric.display.color or _PALETTE[index % len(_PALETTE)]


def fmt(v: float) -> str:
    """Compact tick / readout number."""
    if not math.isfinite(v):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def tick_labels(values: Sequence[float]) -> list[str]:
    """`fmt` of each tick, with more significant digits where that would print two ticks alike
    (a narrow range far from zero: 3.7851, 3.7852 are not both "3.79")."""
    labels = [fmt(v) for v in values]
    digits = 3
    while len(set(labels)) < len(labels) and digits < 15:
        digits += 1
        labels = [_precise(v, digits) for v in values]
    return labels


def _precise(v: float, digits: int) -> str:
    if v == 0 or not math.isfinite(v):
        return fmt(v)
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:.{digits}g}"
    if abs(v) >= 1e5 and v == round(v):  # steps: 1,050,000
        return f"{v:,.0f}"
    return f"{v:.{digits - 1}e}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return ticks


def _log_ticks(lo: float, hi: float) -> list[float]:
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5) if math.log10(hi / lo) < 2 else (1,):
            v = m * 10.0**e
            if lo <= v <= hi:
                out.append(v)
    return out or [lo, hi]


def path_d(x: Scale, y: Scale, steps: IntArray, values: FloatArray) -> str:
    """SVG path data; a non-finite value (or a non-positive one on a log axis) breaks the line."""
    parts: list[str] = []
    pen_down = False
    run = 0  # points in the current piece of line
    for s, v in zip(steps.tolist(), values.tolist(), strict=True):
        if not math.isfinite(v) or (y.log and v <= 0):
            if run == 1:
                parts.append(_DOT)
            pen_down = False
            run = 0
            continue
        parts.append(f"{'L' if pen_down else 'M'}{x(s):.1f},{y(v):.1f}")
        pen_down = True
        run += 1
    if run == 1:
        parts.append(_DOT)
    return " ".join(parts)


# A lone point (a one-point series, or one between gaps) is a move with nothing to stroke: a
# zero-width step drawn with the paths' round caps makes it a dot the size of the line width.
_DOT = "h0.01"


def _y_domain(chart: ChartData, log: bool) -> tuple[float, float]:
    vals = np.concatenate([np.concatenate([s.raw, s.smooth]) for s in chart.series])
    vals = vals[np.isfinite(vals)]
    if log:
        vals = vals[vals > 0]
    if vals.size == 0:
        return (0.1, 10.0) if log else (0.0, 1.0)
    lo, hi = float(vals.min()), float(vals.max())
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    # Band edges widen the axis only when they lie near the data, so a far band does not flatten it.
    for edge in (*chart.series[0].band_low, *chart.series[0].band_high):
        if edge is not None and lo - span <= edge <= hi + span and (not log or edge > 0):
            lo, hi = min(lo, edge), max(hi, edge)
    if log:
        return lo / 1.3, hi * 1.3
    if hi == lo:
        return lo - 1.0, hi + 1.0
    pad = 0.06 * (hi - lo)
    return lo - pad, hi + pad


def _bands(x: Scale, y: Scale, frame: Frame, s: SeriesData) -> list[str]:
    out = []
    steps = s.steps.tolist()
    i = 0
    while i < len(steps):
        lo, hi = s.band_low[i], s.band_high[i]
        j = i
        while j + 1 < len(steps) and s.band_low[j + 1] == lo and s.band_high[j + 1] == hi:
            j += 1
        if lo is not None or hi is not None:
            end = steps[j + 1] if j + 1 < len(steps) else steps[j]
            xa, xb = x(steps[i]), x(end)
            top = frame.y1 if hi is None else min(frame.y0, max(frame.y1, y(hi)))
            bottom = frame.y0 if lo is None or (y.log and lo <= 0) else y(lo)
            bottom = min(frame.y0, max(frame.y1, bottom))
            if bottom > top and xb >= xa:
                out.append(
                    f'<rect class="band" x="{xa:.1f}" y="{top:.1f}" width="{max(xb - xa, 1):.1f}"'
                    f' height="{bottom - top:.1f}"/>'
                )
        i = j + 1
    return out


def _labels(texts: Mapping[str, str], cls: str, x: float, y: float, extra: str = "") -> str:
    spans = "".join(f'<tspan class="l-{k}">{escape(v)}</tspan>' for k, v in texts.items())
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}"{extra}>{spans}</text>'


def _round(values: FloatArray) -> list[float | None]:
    return [float(f"{v:.5g}") if math.isfinite(v) else None for v in values.tolist()]


def chart_svg(
    chart: ChartData,
    *,
    x_label: Mapping[str, str],
    y_label: Mapping[str, str],
    boundaries: Sequence[tuple[int, Mapping[str, str]]] = (),
    events: Sequence[EventMark] = (),
    frame: Frame | None = None,
) -> str:
    """The chart as an `<svg>` element (its points for the hover readout: `chart_data_json`)."""
    f = frame or Frame()
    all_steps = np.concatenate([s.steps for s in chart.series])
    if all_steps.size == 0:
        first, last = 0, 1
    else:
        first, last = int(all_steps.min()), int(all_steps.max())
    if last == first:
        last = first + 1
    log = chart.metric.display.log_scale
    lo, hi = _y_domain(chart, log)
    x = Scale(first, last, f.x0, f.x1)
    y = Scale(lo, hi, f.y0, f.y1, log)
    parts = [
        f'<svg class="chart" viewBox="0 0 {f.width} {f.height}" role="img" '
        f'data-chart="{escape(chart.id)}" data-x0="{first}" data-x1="{last}" '
        f'data-px0="{f.x0}" data-px1="{f.x1}" preserveAspectRatio="xMidYMid meet">'
    ]
    parts.append(
        f'<rect class="plot" x="{f.x0}" y="{f.y1}" width="{f.x1 - f.x0}" height="{f.y0 - f.y1}"/>'
    )
    parts += _bands(x, y, f, chart.series[0])
    yticks = _log_ticks(lo, hi) if log else nice_ticks(lo, hi)
    for v, label in zip(yticks, tick_labels(yticks), strict=True):
        py = y(v)
        parts.append(f'<line class="grid" x1="{f.x0}" x2="{f.x1}" y1="{py:.1f}" y2="{py:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{f.x0 - 6}" y="{py + 4:.1f}" text-anchor="end">{escape(label)}</text>'
        )
    xticks = nice_ticks(first, last, 6)
    for v, label in zip(xticks, tick_labels(xticks), strict=True):
        px = x(v)
        parts.append(f'<line class="grid" x1="{px:.1f}" x2="{px:.1f}" y1="{f.y1}" y2="{f.y0}"/>')
        parts.append(
            f'<text class="tick" x="{px:.1f}" y="{f.y0 + 15}" text-anchor="middle">{escape(label)}</text>'
        )
    for step, names in boundaries:
        if first < step < last:
            px = x(step)
            parts.append(
                f'<line class="stage" x1="{px:.1f}" x2="{px:.1f}" y1="{f.y1}" y2="{f.y0}"/>'
            )
            parts.append(_labels(names, "stage-label", px + 3, f.y1 + 10))
    for e in events:
        if e.end < first or e.start > last:
            continue
        xa, xb = x(max(e.start, first)), x(min(e.end, last))
        title = f"<title>{escape(e.label)}</title>"
        kind = escape(e.kind, quote=True)
        if xb - xa >= 2:
            parts.append(
                f'<rect class="event-span ev-{kind}" x="{xa:.1f}" y="{f.y1}" width="{xb - xa:.1f}"'
                f' height="{f.y0 - f.y1}">{title}</rect>'
            )
        else:
            parts.append(
                f'<line class="event ev-{kind}" x1="{xa:.1f}" x2="{xa:.1f}" y1="{f.y1}" y2="{f.y0}">{title}</line>'
            )
    for i, s in enumerate(chart.series):
        color = series_color(s, i)
        width = EMPHASIS_WIDTH.get(s.metric.display.emphasis, 1.6)
        mid = escape(s.metric.id, quote=True)
        parts.append(
            f'<path class="raw" data-metric="{mid}" stroke="{escape(color)}" stroke-opacity="{_LIGHT}"'
            f' stroke-width="{max(0.8, width * 0.4):.2f}" d="{path_d(x, y, s.steps, s.raw)}"/>'
        )
        parts.append(
            f'<path class="smooth" data-metric="{mid}" stroke="{escape(color)}"'
            f' stroke-width="{width:.2f}" d="{path_d(x, y, s.steps, s.smooth)}"/>'
        )
    parts.append(
        f'<line class="cursor" x1="0" x2="0" y1="{f.y1}" y2="{f.y0}" visibility="hidden"/>'
    )
    parts.append(
        _labels(x_label, "axis-label", (f.x0 + f.x1) / 2, f.height - 6, ' text-anchor="middle"')
    )
    cy = (f.y0 + f.y1) / 2
    parts.append(
        _labels(
            y_label,
            "axis-label",
            14,
            cy,
            f' text-anchor="middle" transform="rotate(-90 14 {cy:.1f})"',
        )
    )
    parts.append("</svg>")
    return "".join(parts)


def chart_data_json(chart: ChartData) -> str:
    """The plotted points as JSON for the hover readout, safe inside a `<script>` element."""
    data = [
        {
            "metric": s.metric.id,
            "color": series_color(s, i),
            "steps": s.steps.tolist(),
            "raw": _round(s.raw),
            "smooth": _round(s.smooth),
        }
        for i, s in enumerate(chart.series)
    ]
    return _json_for_script(data)


def _json_for_script(obj: object) -> str:
    """JSON safe inside a <script> element: no '</' sequence and no HTML-significant '<', '>', '&'."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
