"""Gather and render in one call, from a history store or from a datasource config."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import registry

from ..datasource.config import DatasourceConfig
from ..datasource.history import HistoryStore, open_history
from .data import DEFAULT_POINTS, DEFAULT_SMOOTHING, gather
from .render import LANGS, render_html

__all__ = ["langs_for", "render_report", "write_report"]


def langs_for(lang: str) -> tuple[str, ...]:
    """`en`, `zh` or `both` as the languages the page carries."""
    if lang == "both":
        return LANGS
    if lang in LANGS:
        return (lang,)
    raise ValueError(f"language {lang!r} must be en, zh or both")


def render_report(
    store: HistoryStore,
    reg: registry.Registry,
    run: str,
    *,
    lang: str = "both",
    points: int = DEFAULT_POINTS,
    smoothing: float = DEFAULT_SMOOTHING,
    card_window: int = 2000,
) -> str:
    langs = langs_for(lang)
    runs = store.runs()
    if run not in runs:
        known = ", ".join(runs[:20]) or "none"
        raise LookupError(f"no run {run!r} in the {store.kind} store (runs: {known})")
    data = gather(
        reg, store, run, langs=langs, points=points, smoothing=smoothing, card_window=card_window
    )
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return render_html(reg, data, langs=langs, generated=stamp)


def write_report(
    config: DatasourceConfig,
    reg: registry.Registry,
    run: str,
    out: Path,
    *,
    lang: str = "both",
    points: int = DEFAULT_POINTS,
    smoothing: float = DEFAULT_SMOOTHING,
) -> Path:
    """Write the report of `run` from the store `config` names; returns the path written."""
    store = open_history(config, reg)
    html = render_report(
        store,
        reg,
        run,
        lang=lang,
        points=points,
        smoothing=smoothing,
        card_window=config.card_window,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
