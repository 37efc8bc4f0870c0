"""Panel descriptions and healthy bands, read from the registry.

A description is the registry's tooltip for the metric: its short meaning and definition, the
healthy range by stage, its alerts, what to check when it goes wrong, and a link to the
datasource's term page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from registry import Band, Metric
from registry.families import ANY_FAMILY, FAMILY_NAMES, FRAMEWORK_NAMES, families, frameworks

from .i18n import words
from .sources import PUBLIC_API_URL

__all__ = ["BandSteps", "band_steps", "description", "not_logged", "term_url"]

_OUTSIDE = "rgba(242, 73, 92, 0.10)"
_INSIDE = "rgba(115, 191, 105, 0.12)"
_STAGE_ORDER = ("mid", "early", "late")


@dataclass(frozen=True)
class BandSteps:
    """Threshold steps drawing a healthy band as areas: (value or None for -inf, colour)."""

    stage: str
    steps: tuple[tuple[float | None, str], ...]
    low: float | None = None
    high: float | None = None
    """The band's edges (None: open on that side)."""


def not_logged(metrics: Sequence[Metric], lang: str) -> str:
    """What a chart says when no selected run logs its metrics: that, and who logs them, from the
    registry: the algorithm families they apply to (`applies_to`) and the frameworks that spell
    them (their aliases), `registry.families`."""
    w = words(lang)
    fams = families(metrics)
    who = (
        w.any_family
        if fams == (ANY_FAMILY,)
        else w.family_runs.format(names=w.list_sep.join(FAMILY_NAMES[f][lang] for f in fams))
    )
    fws = frameworks(metrics)
    by = (
        w.by_frameworks.format(names=w.list_sep.join(FRAMEWORK_NAMES[f] for f in fws))
        if fws
        else ""
    )
    return w.not_logged.format(families=who, frameworks=by)


def term_url(entry_id: str, lang: str) -> str:
    return f"{PUBLIC_API_URL}/terms/{entry_id}?lang={lang}"


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:g}"


def _band_text(band: Band | None) -> str:
    return "—" if band is None else f"[{_num(band.low)}, {_num(band.high)}]"


def band_steps(metric: Metric) -> BandSteps | None:
    """The absolute healthy band as threshold areas (mid stage first), or None when the band is
    relative to the run (early value, clip epsilon, max entropy) and cannot be drawn in advance."""
    if metric.bands is None or metric.bands.basis != "absolute":
        return None
    for stage in _STAGE_ORDER:
        band = metric.bands.for_stage(stage)  # type: ignore[arg-type]
        if band is None or (band.low is None and band.high is None):
            continue
        steps: list[tuple[float | None, str]] = []
        if band.low is None:
            steps.append((None, _INSIDE))
        else:
            steps += [(None, _OUTSIDE), (band.low, _INSIDE)]
        if band.high is not None:
            steps.append((band.high, _OUTSIDE))
        return BandSteps(stage, tuple(steps), band.low, band.high)
    return None


def _metric_block(metric: Metric, lang: str) -> list[str]:
    w = words(lang)
    out = [f"**{metric.title.get(lang)}** (`{metric.id}`)"]
    if metric.short is not None:
        out.append(f"*{metric.short.get(lang)}*")
    out.append(metric.definition.get(lang))
    if metric.bands is not None:
        basis = "" if metric.bands.basis == "absolute" else f" × {metric.bands.basis}"
        ranges = ", ".join(
            f"{stage} {_band_text(metric.bands.for_stage(stage))}"
            for stage in ("early", "mid", "late")
        )
        drawn = band_steps(metric)
        note = (
            w.stage_note.format(stage=drawn.stage)
            if drawn is not None
            else w.relative_band.format(basis=metric.bands.basis)
        )
        out.append(f"{w.healthy_range}{basis}: {ranges} ({note}).")
    if metric.alerts:
        items = [
            f"{a.severity}: {a.condition} {a.threshold:g}"
            + ("" if a.basis == "absolute" else f" × {a.basis}")
            + f", {a.for_steps} {w.consecutive}"
            for a in metric.alerts
        ]
        out.append(f"{w.alerts}: " + "; ".join(items) + ".")
    checks = [c.get(lang) for s in metric.failure_scenarios[:2] for c in s.check[:2]]
    if checks:
        out.append(f"{w.what_to_check}: " + " ".join(checks))
    out.append(f"[{w.term_page}]({term_url(metric.id, lang)})")
    return out


def description(
    metrics: Sequence[Metric],
    lang: str,
    kinds: Sequence[Sequence[str]] | None = None,
    events: bool = False,
) -> str:
    """The panel tooltip (Markdown): one block per metric drawn, how to read the lines, and every
    line the chart draws named (`kinds[i]`: the series kinds of metric i, `Series.kinds()`;
    `events`: the chart marks the runs' events)."""
    w = words(lang)
    blocks = ["\n\n".join(_metric_block(m, lang)) for m in metrics]
    styles = ", ".join(
        f"{w.line_styles[i % len(w.line_styles)]} {m.title.get(lang)}"
        for i, m in enumerate(metrics)
    )
    text = "\n\n---\n\n".join(blocks) + "\n\n" + w.raw_vs_smoothed.format(styles=styles)
    if kinds is None:
        return text
    templates = {
        "raw": w.line_raw,
        "smoothed": w.line_smoothed,
        "max": w.line_max,
        "slope": w.line_slope,
    }
    lines = [
        templates[kind].format(
            metric=m.title.get(lang), style=w.line_styles[i % len(w.line_styles)]
        )
        for i, (m, ks) in enumerate(zip(metrics, kinds, strict=True))
        for kind in ks
    ]
    if events:
        lines.append(w.line_events)
    return text + f"\n\n**{w.lines_drawn}**\n\n" + "\n".join(f"- {line}" for line in lines)
