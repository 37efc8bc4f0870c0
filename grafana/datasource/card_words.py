"""Card fields as words and numbers a person can read, in the card's language.

The engine's card carries codes (`status: "watch"`, `trend.direction: "flat"`) and raw numbers.
This adds, beside them, what every view shows: `status_label`, `trend.direction_label`, each
evidence item's `severity_label`, and `deviation_label` / `trend_label`, written so that numbers
that mean nothing are not shown as if they did:

- a deviation in percent of a mean near zero (a loss or advantage crossing zero) magnifies noise
  into "−142590 %": beyond ±1000 % (the value is more than ten times the mean's size away from
  it) the absolute difference is shown instead, which is what still carries information;
- a trend the card could not fit (fewer than two points in its window: SB3 and CleanRL log one
  point per 512–2048 steps) says so instead of "–".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from registry.diagnosis import ZH_WORDS

__all__ = ["DEVIATION_PCT_SHOWN", "WORDS", "deviation_text", "labelled", "number", "word"]

DEVIATION_PCT_SHOWN = 1000.0
"""Largest |deviation| shown in percent; past it the absolute difference is clearer."""

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "ok": "ok",
        "watch": "watch",
        "warning": "warning",
        "critical": "critical",
        "no_data": "no data",
        "up": "up",
        "down": "down",
        "flat": "flat",
        "vs_mean": "vs the run mean",
        "no_trend": "too few points in the last {steps:,} steps to fit a trend",
        "per_1k": "per 1k steps",
    },
    "zh": {
        **ZH_WORDS,
        "vs_mean": "相对全程均值",
        "no_trend": "最近 {steps:,} 步内点数不足，无法拟合趋势",
        "per_1k": "每千步",
    },
}


def word(code: str, lang: str) -> str:
    """A status, severity or direction code in `lang` (the code itself when unknown)."""
    return WORDS.get(lang, WORDS["en"]).get(code, code.replace("_", " "))


def number(v: object) -> str:
    """A readable number: 4 significant digits, scientific for very large or small."""
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "–"
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}"


def deviation_text(card: Mapping[str, Any], lang: str) -> str:
    """The latest value against the run mean, in percent or (near a zero mean) absolute."""
    dev, value, mean = card.get("deviation_pct"), card.get("value"), card.get("mean")
    if isinstance(dev, int | float) and abs(dev) <= DEVIATION_PCT_SHOWN:
        return f"{dev:+.1f}%"
    if isinstance(value, int | float) and isinstance(mean, int | float):
        diff = value - mean
        sign = "+" if diff >= 0 else ""
        return f"{sign}{number(diff)} {word('vs_mean', lang)}"
    return ""


def _trend_text(card: Mapping[str, Any], lang: str) -> str:
    trend = card.get("trend")
    if not isinstance(trend, Mapping):
        steps = card.get("recent_steps")
        if card.get("status") == "no_data" or not isinstance(steps, int):
            return "–"
        return WORDS.get(lang, WORDS["en"])["no_trend"].format(steps=steps)
    slope = number(trend.get("slope_per_1k"))
    return f"{slope} {word('per_1k', lang)} ({word(str(trend.get('direction', '')), lang)})"


def labelled(card: Mapping[str, Any], lang: str) -> dict[str, Any]:
    """A copy of a card dict with the `*_label` fields added (the parts it adds to are copied,
    the rest is shared with `card`)."""
    out = dict(card)
    if isinstance(out.get("trend"), Mapping):
        out["trend"] = dict(out["trend"])
    if isinstance(out.get("evidence"), list):
        out["evidence"] = [dict(e) if isinstance(e, Mapping) else e for e in out["evidence"]]
    out["status_label"] = word(str(out.get("status", "no_data")), lang)
    out["deviation_label"] = deviation_text(out, lang)
    out["trend_label"] = _trend_text(out, lang)
    trend = out.get("trend")
    if isinstance(trend, dict) and "direction" in trend:
        trend["direction_label"] = word(str(trend["direction"]), lang)
    for e in out.get("evidence") or []:
        if isinstance(e, dict) and "severity" in e:
            e["severity_label"] = word(str(e["severity"]), lang)
    return out
