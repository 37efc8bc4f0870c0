"""The report page: one self-contained HTML document (inline CSS, inline SVG, a little inline JS).

Every registry or run string is escaped on its way in. With both languages the page carries
each text twice (`class="l-en"` / `class="l-zh"`) and a toggle shows one; with one language
only that text is written. Nothing on the page loads anything: no fonts, images, scripts or
styles from anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

import registry
from registry.model import STAGES, Metric, Text

from ..datasource.card_words import labelled, word
from ..datasource.history.base import Event
from .data import ChartData, ReportData
from .svg import EventMark, chart_data_json, chart_svg, fmt, series_color
from .template import PAGE, SCRIPT, STYLE

__all__ = ["LANGS", "card_html", "event_marks", "render_html", "tooltip_html"]

LANGS = ("en", "zh")
_MERGE_FRACTION = 1 / 300
_ACTIONS_SHOWN = 4

_UI: dict[str, dict[str, str]] = {
    "en": {
        "title": "rlvitals report",
        "run": "Run",
        "steps": "Steps",
        "stages": "Stages",
        "smoothing": "Smoothed: TensorBoard debiased EMA, weight",
        "points": "at most {n} points per series (bucket means)",
        "generated": "Generated",
        "overview": "Diagnosis at a glance",
        "curves": "Core curves",
        "events": "Events",
        "config": "Run config",
        "step": "step",
        "x": "training step",
        "no_unit": "(no unit)",
        "definition": "Definition",
        "healthy": "Healthy range",
        "alerts": "Alerts",
        "check": "What to check",
        "basis": "basis",
        "no_band": "no band declared",
        "value": "value",
        "mean": "run mean",
        "trend": "trend",
        "band": "band",
        "actions": "What to do",
        "evidence": "Evidence",
        "kind": "kind",
        "text": "what happened",
        "none": "none",
        "raw": "raw",
        "smooth": "smoothed",
        "legend": "thin light line: raw; thick dark line: smoothed; shaded: healthy band of the stage; vertical marks: events",
        "footer": "Self-contained file written by `rlvitals report`: no network access needed to view it.",
        "early": "early",
        "mid": "mid",
        "late": "late",
        "for": "for",
    },
    "zh": {
        "title": "rlvitals 训练报告",
        "run": "运行",
        "steps": "步数",
        "stages": "阶段",
        "smoothing": "平滑：TensorBoard 去偏指数滑动平均，权重",
        "points": "每条序列最多 {n} 个点（分桶均值）",
        "generated": "生成时间",
        "overview": "诊断一览",
        "curves": "核心曲线",
        "events": "事件",
        "config": "运行配置",
        "step": "步",
        "x": "训练步",
        "no_unit": "（无单位）",
        "definition": "定义",
        "healthy": "健康区间",
        "alerts": "告警",
        "check": "检查什么",
        "basis": "基准",
        "no_band": "未声明区间",
        "value": "当前值",
        "mean": "全程均值",
        "trend": "趋势",
        "band": "区间",
        "actions": "怎么做",
        "evidence": "证据",
        "kind": "类型",
        "text": "内容",
        "none": "无",
        "raw": "原始",
        "smooth": "平滑",
        "legend": "细浅线：原始值；粗深线：平滑值；阴影：当前阶段的健康区间；竖线：事件",
        "footer": "由 `rlvitals report` 生成的独立文件：查看时无需联网。",
        "early": "早期",
        "mid": "中期",
        "late": "后期",
        "for": "持续",
    },
}


class _Writer:
    """Text in the languages the page carries."""

    def __init__(self, langs: Sequence[str]) -> None:
        self.langs = tuple(lang for lang in LANGS if lang in langs) or ("en",)

    def ui(self, key: str, tag: str = "span", **fmt_args: object) -> str:
        return self.both({k: _UI[k][key].format(**fmt_args) for k in self.langs}, tag)

    def text(self, t: Text, tag: str = "span") -> str:
        return self.both({k: t.get(k) for k in self.langs}, tag)

    def both(self, texts: Mapping[str, str], tag: str = "span") -> str:
        if len(self.langs) == 1:
            return escape(texts[self.langs[0]])
        return "".join(
            f'<{tag} class="l-{k}" lang="{k}">{escape(texts[k])}</{tag}>' for k in self.langs
        )

    def plain(self, key: str) -> dict[str, str]:
        return {k: _UI[k][key] for k in self.langs}


def _num(v: object) -> str:
    return fmt(float(v)) if isinstance(v, int | float) and not isinstance(v, bool) else "–"


def _unit(metric: Metric, w: _Writer) -> dict[str, str]:
    if metric.unit == "none":
        return w.plain("no_unit")
    return {k: metric.unit.replace("_", " ") for k in w.langs}


def event_marks(events: Sequence[Event], first: int | None, last: int | None) -> list[EventMark]:
    """Events as chart markers: a kind repeating at nearby steps becomes one strip."""
    span = 0 if first is None or last is None else max(0, last - first)
    gap = max(1, int(span * _MERGE_FRACTION))
    by_kind: dict[str, list[Event]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    marks = []
    for kind, items in by_kind.items():
        items.sort(key=lambda e: e.step)
        group = [items[0]]
        for e in items[1:]:
            if e.step - group[-1].step <= gap:
                group.append(e)
                continue
            marks.append(_mark(kind, group))
            group = [e]
        marks.append(_mark(kind, group))
    return sorted(marks, key=lambda m: (m.start, m.kind))


def _mark(kind: str, group: list[Event]) -> EventMark:
    first, last = group[0], group[-1]
    text = first.text[:300]
    if len(group) == 1:
        return EventMark(first.step, first.step, kind, f"{kind} @ {first.step:,}: {text}")
    label = f"{kind} ×{len(group)}, steps {first.step:,}–{last.step:,}: {text}"
    return EventMark(first.step, last.step, kind, label)


def _bands_text(metric: Metric, w: _Writer) -> str:
    if metric.bands is None:
        return w.ui("no_band")
    rows = []
    for stage in STAGES:
        band = metric.bands.for_stage(stage)
        if band is None:
            continue
        lo = "–∞" if band.low is None else fmt(band.low)
        hi = "∞" if band.high is None else fmt(band.high)
        rows.append(f"<li>{w.ui(stage)}: [{lo}, {hi}] — {escape(band.reason)}</li>")
    basis = f"<p>{w.ui('basis')}: {escape(metric.bands.basis)}</p>"
    return basis + (f"<ul>{''.join(rows)}</ul>" if rows else "")


def _alerts_text(metric: Metric, w: _Writer) -> str:
    if not metric.alerts:
        return w.ui("none")
    cond = {"above": ">", "below": "<", "abs_above": "|x| >"}
    items = [
        f"<li>{escape(a.severity)}: {cond[a.condition]} {fmt(a.threshold)}"
        f"{'' if a.basis == 'absolute' else ' × ' + escape(a.basis)}, {w.ui('for')} {a.for_steps}"
        f" {w.ui('step')} — {escape(a.reason)}</li>"
        for a in metric.alerts
    ]
    return f"<ul>{''.join(items)}</ul>"


def _checks(metric: Metric, w: _Writer) -> str:
    items: list[str] = []
    for sc in metric.failure_scenarios:
        items += [f"<li>{w.text(c)}</li>" for c in sc.check]
    return f"<ul>{''.join(dict.fromkeys(items))}</ul>" if items else w.ui("none")


def _tooltip(metric: Metric, w: _Writer) -> str:
    """The registry's explanation of a metric, shown when the chart's title is hovered."""
    return (
        f'<div class="tip" role="tooltip" data-metric="{escape(metric.id, quote=True)}">'
        f"<h4>{w.text(metric.title)} <code>{escape(metric.id)}</code></h4>"
        f"<h5>{w.ui('definition')}</h5><p>{w.text(metric.definition)}</p>"
        f"<h5>{w.ui('healthy')}</h5>{_bands_text(metric, w)}"
        f"<h5>{w.ui('alerts')}</h5>{_alerts_text(metric, w)}"
        f"<h5>{w.ui('check')}</h5>{_checks(metric, w)}"
        "</div>"
    )


def tooltip_html(metric: Metric, lang: str) -> str:
    """The report's tooltip of a metric in one language (the live dashboard shows the same)."""
    return _tooltip(metric, _Writer((lang,)))


def _status(status: str, w: _Writer | str) -> str:
    """A status badge in the page's language(s) (`w` a writer, or one language)."""
    s = escape(status, quote=True)
    if isinstance(w, str):
        text = escape(word(status, w))
    else:
        text = w.both({k: word(status, k) for k in w.langs})
    return f'<span class="status st-{s}">{text}</span>'


def _card_one(card: Mapping[str, Any], lang: str) -> str:
    ui = _UI[lang]
    band = card.get("band") or {}
    band_txt = ui["no_band"]
    if band.get("low") is not None or band.get("high") is not None:
        stage = str(band.get("stage", ""))
        band_txt = f"{ui.get(stage, stage)} [{_num(band.get('low'))}, {_num(band.get('high'))}]"
    dev = str(card.get("deviation_label") or "")
    dev_txt = f" ({escape(dev)})" if dev else ""
    facts = (
        f"<dl><dt>{ui['value']}</dt><dd>{_num(card.get('value'))} @ {ui['step']} "
        f"{_num(card.get('step'))}</dd><dt>{ui['mean']}</dt><dd>{_num(card.get('mean'))}{dev_txt}</dd>"
        f"<dt>{ui['trend']}</dt><dd>{escape(str(card.get('trend_label') or '–'))}</dd>"
        f"<dt>{ui['band']}</dt><dd>{escape(band_txt)}</dd></dl>"
    )
    actions = [escape(str(a)) for a in card.get("actions", [])][:_ACTIONS_SHOWN]
    acts = (
        f"<h5>{ui['actions']}</h5><ul>{''.join(f'<li>{a}</li>' for a in actions)}</ul>"
        if actions
        else ""
    )
    evidence = [
        f"<li>{_status(str(e.get('severity', 'ok')), lang)} {escape(str(e.get('text', '')))}</li>"
        for e in card.get("evidence", [])
    ]
    ev = (
        f"<details><summary>{ui['evidence']} ({len(evidence)})</summary><ul>{''.join(evidence)}</ul></details>"
        if evidence
        else ""
    )
    return (
        f'<div class="card-body l-{lang}" lang="{lang}"><div class="card-head">{_status(str(card.get("status", "no_data")), lang)}'
        f" <b>{escape(str(card.get('title', card.get('metric', ''))))}</b></div>{facts}"
        f'<p class="reading">{escape(str(card.get("reading", "")))}</p>{acts}{ev}</div>'
    )


def card_html(card: Mapping[str, Any], lang: str) -> str:
    """The report's diagnosis card (`build_card(...).to_dict()`) in one language."""
    card = labelled(card, lang)  # the words and numbers every view shows (card_words)
    status = escape(str(card.get("status", "no_data")), quote=True)
    metric = escape(str(card.get("metric", "")), quote=True)
    return (
        f'<article class="card st-border-{status}" data-metric="{metric}">'
        f"{_card_one(card, lang)}</article>"
    )


def _card(metric_id: str, data: ReportData, w: _Writer) -> str:
    bodies = [
        _card_one(data.cards[lang][metric_id], lang)
        for lang in w.langs
        if metric_id in data.cards.get(lang, {})
    ]
    status = next(
        (
            str(data.cards[k][metric_id].get("status"))
            for k in w.langs
            if metric_id in data.cards.get(k, {})
        ),
        "no_data",
    )
    return f'<article class="card st-border-{escape(status, quote=True)}" data-metric="{escape(metric_id, quote=True)}">{"".join(bodies)}</article>'


def _legend(chart: ChartData, w: _Writer) -> str:
    items = []
    for i, s in enumerate(chart.series):
        color = series_color(s, i)
        items.append(
            f'<span class="legend-item"><i style="background:{escape(color, quote=True)}"></i>'
            f'<span class="info" tabindex="0">{w.text(s.metric.title)} <sup>?</sup>{_tooltip(s.metric, w)}</span></span>'
        )
    return "".join(items)


def _chart_section(
    chart: ChartData, data: ReportData, marks: Sequence[EventMark], w: _Writer
) -> str:
    boundaries = [
        (data.stages.early_end, w.plain("mid")),
        (data.stages.mid_end, w.plain("late")),
    ]
    svg = chart_svg(
        chart,
        x_label=w.plain("x"),
        y_label=_unit(chart.metric, w),
        boundaries=boundaries,
        events=marks,
    )
    cards = "".join(_card(s.metric.id, data, w) for s in chart.series)
    return (
        f'<section class="row" id="chart-{escape(chart.id, quote=True)}">'
        f'<figure class="chart-box"><figcaption>{_legend(chart, w)}</figcaption>{svg}'
        f'<div class="readout" aria-live="polite"></div>'
        f'<script type="application/json" class="series-data">{chart_data_json(chart)}</script>'
        f'</figure><div class="cards">{cards}</div></section>'
    )


def _overview(data: ReportData, w: _Writer) -> str:
    cells = []
    for chart in data.charts:
        for s in chart.series:
            card = next((data.cards[k].get(s.metric.id) for k in w.langs if k in data.cards), None)
            status = str(card.get("status", "no_data")) if card else "no_data"
            cells.append(
                f'<a class="ov" href="#chart-{escape(chart.id, quote=True)}">{_status(status, w)} '
                f"{w.text(s.metric.title)}</a>"
            )
    return "".join(cells)


def _events_table(marks: Sequence[EventMark], w: _Writer) -> str:
    if not marks:
        return f"<p>{w.ui('none')}</p>"
    rows = "".join(
        f"<tr><td>{m.start:,}{'' if m.end == m.start else f'–{m.end:,}'}</td>"
        f"<td>{escape(m.kind)}</td><td>{escape(m.label)}</td></tr>"
        for m in marks
    )
    return (
        f"<table><thead><tr><th>{w.ui('step')}</th><th>{w.ui('kind')}</th><th>{w.ui('text')}</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


def _config(config: Mapping[str, Any]) -> str:
    items = "".join(
        f"<span><code>{escape(str(k))}</code>={escape(str(v))[:80]}</span>"
        for k, v in sorted(config.items(), key=lambda kv: str(kv[0]))
    )
    return f'<p class="config">{items}</p>'


def _toggle(w: _Writer) -> str:
    if len(w.langs) < 2:
        return ""
    return (
        '<div class="toggle" role="group">'
        '<button type="button" data-set-lang="en">English</button>'
        '<button type="button" data-set-lang="zh">中文</button></div>'
    )


def _context_line(data: ReportData, w: _Writer) -> str:
    """How the diagnosis read the run (the run context every card carries), once for the page,
    in the page's language(s); already escaped."""
    for per_metric in data.cards.values():
        for card in per_metric.values():
            ctx = card.get("context")
            if isinstance(ctx, dict) and isinstance(ctx.get("text"), str):
                en = str(ctx["text"])
                texts = {"en": en, "zh": str(ctx.get("text_zh") or en)}
                return w.both({k: texts.get(k, en) for k in w.langs})
    return ""


def render_html(
    reg: registry.Registry,
    data: ReportData,
    *,
    langs: Iterable[str] = LANGS,
    generated: str = "",
) -> str:
    """The report as one HTML document."""
    del reg  # everything the page needs is in `data` (metrics carry their registry entries)
    w = _Writer(tuple(langs))
    marks = event_marks(data.events, data.first_step, data.last_step)
    steps = "–" if data.first_step is None else f"{data.first_step:,} – {data.last_step or 0:,}"
    meta = (
        f"<p>{w.ui('run')}: <b>{escape(data.run)}</b> · {w.ui('steps')}: {steps} · "
        f"{w.ui('stages')}: {w.ui('early')} &lt; {data.stages.early_end:,} ≤ {w.ui('mid')} &lt; "
        f"{data.stages.mid_end:,} ≤ {w.ui('late')}</p>"
        f"<p>{w.ui('smoothing')} {data.smoothing:g}; {w.ui('points', n=data.points)}. "
        f"{w.ui('legend')}.</p>"
        + (f"<p>{w.ui('generated')}: {escape(generated)}</p>" if generated else "")
    )
    charts = "".join(_chart_section(c, data, marks, w) for c in data.charts)
    context = _context_line(data, w)
    if context:
        meta = f'<p class="context">{context}</p>' + meta
    body = (
        f"<header><h1>{w.ui('title')}: {escape(data.run)}</h1>{_toggle(w)}{meta}</header>"
        f'<h2>{w.ui("overview")}</h2><nav class="overview">{_overview(data, w)}</nav>'
        f"<h2>{w.ui('curves')}</h2>{charts}"
        f"<h2>{w.ui('events')}</h2>{_events_table(marks, w)}"
        f"<h2>{w.ui('config')}</h2>{_config(data.config)}"
        f"<footer>{w.ui('footer')}</footer>"
    )
    lang = w.langs[0]
    return PAGE.format(
        lang=lang,
        title=escape(f"rlvitals report: {data.run}"),
        style=STYLE,
        script=SCRIPT,
        body=body,
    )
