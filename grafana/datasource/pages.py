"""HTML term pages (`/terms/<id>`), the link target of every dashboard tooltip, and an index.

Pages are self-contained (inline style, no scripts, no external resources), show both languages
(or only the one `?lang=en|zh` asks for, and then link on in it), and escape every registry string. Links between pages are relative, so they work behind any
path prefix a proxy adds.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from urllib.parse import quote

from flask import Blueprint, Response, request

import registry
from registry.model import STAGES, Text

from . import params
from .errors import NotFound
from .services import services

__all__ = ["blueprint", "render_index", "render_page"]

blueprint = Blueprint("pages", __name__)

_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "definition": "Definition",
        "formula": "Formula",
        "over": "computed",
        "unit": "Unit",
        "bands": "Healthy range by stage",
        "basis": "basis",
        "stage": "Stage",
        "low": "Low",
        "high": "High",
        "why": "Why",
        "alerts": "Alerts",
        "severity": "Severity",
        "condition": "Condition",
        "for": "For (steps)",
        "scenarios": "When it goes wrong",
        "causes": "Likely causes",
        "check": "Check",
        "change": "Change",
        "confusions": "Often confused with",
        "related": "Related metrics",
        "terms": "Glossary",
        "explains": "Explains",
        "related_terms": "Related terms",
        "why_it_matters": "Why it matters",
        "index": "All terms and metrics",
        "metrics": "Metrics",
        "early": "early",
        "mid": "mid",
        "late": "late",
        "none": "none declared",
    },
    "zh": {
        "definition": "定义",
        "formula": "公式",
        "over": "计算范围",
        "unit": "单位",
        "bands": "各训练阶段的健康区间",
        "basis": "基准",
        "stage": "阶段",
        "low": "下限",
        "high": "上限",
        "why": "依据",
        "alerts": "告警",
        "severity": "级别",
        "condition": "条件",
        "for": "持续（步）",
        "scenarios": "出问题时",
        "causes": "可能原因",
        "check": "检查",
        "change": "调整",
        "confusions": "常被混淆为",
        "related": "相关指标",
        "terms": "术语",
        "explains": "解释的指标",
        "related_terms": "相关术语",
        "why_it_matters": "为什么重要",
        "index": "全部术语与指标",
        "metrics": "指标",
        "early": "早期",
        "mid": "中期",
        "late": "后期",
        "none": "未声明",
    },
}
_CONDITIONS = {"above": ">", "below": "<", "abs_above": "|x| >"}
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.5;color:#1f2328}section{border-top:1px solid #d0d7de;margin-top:2rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.25rem .5rem;"
    "text-align:left;vertical-align:top}code{background:#f6f8fa;padding:.1rem .3rem}"
)


def _e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def _link(target: str, label: str, lang: str | None = None) -> str:
    query = "" if lang is None else f"?lang={lang}"
    return f'<a href="{_e(quote(target, safe=""))}{query}">{_e(label)}</a>'


def _list(items: Iterable[str]) -> str:
    body = "".join(f"<li>{i}</li>" for i in items)
    return f"<ul>{body}</ul>" if body else ""


def _texts(items: Iterable[Text], lang: str) -> str:
    return _list(_e(t.get(lang)) for t in items)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _metric_section(
    reg: registry.Registry, m: registry.Metric, lang: str, keep: str | None = None
) -> str:
    lab = _LABELS[lang]
    out = [f'<section lang="{lang}"><h1>{_e(m.title.get(lang))} <code>{_e(m.id)}</code></h1>']
    if m.short is not None:
        out.append(f"<p><em>{_e(m.short.get(lang))}</em></p>")
    out.append(f"<h2>{lab['definition']}</h2><p>{_e(m.definition.get(lang))}</p>")
    out.append(
        f"<h2>{lab['formula']}</h2><p><code>{_e(m.formula.expr)}</code> "
        f"({lab['over']}: {_e(m.formula.over)})</p>"
    )
    if m.formula.note is not None:
        out.append(f"<p>{_e(m.formula.note.get(lang))}</p>")
    out.append(f"<h2>{lab['unit']}</h2><p>{_e(m.unit)}</p>")
    out.append(f"<h2>{lab['bands']}</h2>")
    if m.bands is None:
        out.append(f"<p>{lab['none']}</p>")
    else:
        rows = []
        for stage in STAGES:
            band = m.bands.for_stage(stage)
            if band is not None:
                rows.append(
                    f"<tr><td>{lab[stage]}</td><td>{_num(band.low)}</td><td>{_num(band.high)}</td>"
                    f"<td>{_e(band.reason)}</td></tr>"
                )
        out.append(
            f"<p>{lab['basis']}: <code>{_e(m.bands.basis)}</code></p><table><tr><th>{lab['stage']}"
            f"</th><th>{lab['low']}</th><th>{lab['high']}</th><th>{lab['why']}</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    if m.alerts:
        rows = [
            f"<tr><td>{_e(a.severity)}</td><td>{_e(_CONDITIONS.get(a.condition, a.condition))} "
            f"{_num(a.threshold)} ({_e(a.basis)})</td><td>{a.for_steps}</td><td>{_e(a.reason)}</td></tr>"
            for a in m.alerts
        ]
        out.append(
            f"<h2>{lab['alerts']}</h2><table><tr><th>{lab['severity']}</th><th>{lab['condition']}"
            f"</th><th>{lab['for']}</th><th>{lab['why']}</th></tr>" + "".join(rows) + "</table>"
        )
    if m.failure_scenarios:
        out.append(f"<h2>{lab['scenarios']}</h2>")
        for s in m.failure_scenarios:
            out.append(f"<h3>{_e(s.symptom.get(lang))}</h3>")
            for key, texts in (("causes", s.causes), ("check", s.check), ("change", s.change)):
                if texts:
                    out.append(f"<p>{lab[key]}:</p>{_texts(texts, lang)}")
    if m.confusions:
        out.append(f"<h2>{lab['confusions']}</h2>{_texts(m.confusions, lang)}")
    related = [r for r in m.related if reg.has_metric(r)]
    if related:
        links = (_link(r, f"{reg.metric(r).title.get(lang)} ({r})", keep) for r in related)
        out.append(f"<h2>{lab['related']}</h2>{_list(links)}")
    terms = reg.terms_explaining(m.id)
    if terms:
        items = _list(_link(t.id, t.title.get(lang), keep) for t in terms)
        out.append(f"<h2>{lab['terms']}</h2>{items}")
    out.append("</section>")
    return "".join(out)


def _term_section(
    reg: registry.Registry, t: registry.Term, lang: str, keep: str | None = None
) -> str:
    lab = _LABELS[lang]
    out = [f'<section lang="{lang}"><h1>{_e(t.title.get(lang))} <code>{_e(t.id)}</code></h1>']
    out.append(f"<h2>{lab['definition']}</h2><p>{_e(t.definition.get(lang))}</p>")
    if t.formula:
        out.append(f"<h2>{lab['formula']}</h2><p><code>{_e(t.formula)}</code></p>")
    if t.why_it_matters is not None:
        out.append(f"<h2>{lab['why_it_matters']}</h2><p>{_e(t.why_it_matters.get(lang))}</p>")
    if t.confusions:
        out.append(f"<h2>{lab['confusions']}</h2>{_texts(t.confusions, lang)}")
    explains = [m for m in t.explains if reg.has_metric(m)]
    if explains:
        links = (_link(m, f"{reg.metric(m).title.get(lang)} ({m})", keep) for m in explains)
        out.append(f"<h2>{lab['explains']}</h2>{_list(links)}")
    related = [r for r in t.related_terms if reg.has_term(r)]
    if related:
        links = (_link(r, reg.term(r).title.get(lang), keep) for r in related)
        out.append(f"<h2>{lab['related_terms']}</h2>{_list(links)}")
    out.append("</section>")
    return "".join(out)


def _document(title: str, body: str, lang: str | None = None) -> str:
    if lang is None:
        nav = f'<a href="./">{_LABELS["en"]["index"]} / {_LABELS["zh"]["index"]}</a>'
    else:
        other = "zh" if lang == "en" else "en"
        nav = (
            f'<a href="./?lang={lang}">{_LABELS[lang]["index"]}</a> · '
            f'<a href="?lang={other}">{"中文" if other == "zh" else "English"}</a>'
        )
    return (
        f'<!doctype html><html lang="{lang or "en"}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<nav>{nav}</nav>{body}</body></html>"
    )


def _langs(lang: str | None) -> tuple[str, ...]:
    return ("en", "zh") if lang is None else (lang,)


def render_page(reg: registry.Registry, entry_id: str, lang: str | None = None) -> str | None:
    """The page of a term and/or metric with that id, in English then Chinese, or only in
    `lang` (None if unknown)."""
    sections: list[str] = []
    title = entry_id
    for shown in _langs(lang):
        if reg.has_term(entry_id):
            term = reg.term(entry_id)
            title = term.title.get(lang or "en")
            sections.append(_term_section(reg, term, shown, lang))
        if reg.has_metric(entry_id):
            metric = reg.metric(entry_id)
            title = metric.title.get(lang or "en")
            sections.append(_metric_section(reg, metric, shown, lang))
    if not sections:
        return None
    return _document(f"{title} — rlvitals", "".join(sections), lang)


def render_index(reg: registry.Registry, lang: str | None = None) -> str:
    parts = []
    for shown in _langs(lang):
        lab = _LABELS[shown]
        terms = _list(_link(t.id, t.title.get(shown), lang) for t in reg.terms)
        metrics = _list(_link(m.id, f"{m.title.get(shown)} ({m.id})", lang) for m in reg.metrics)
        parts.append(
            f'<section lang="{shown}"><h1>{lab["index"]}</h1><h2>{lab["terms"]}</h2>{terms}'
            f"<h2>{lab['metrics']}</h2>{metrics}</section>"
        )
    return _document("rlvitals glossary", "".join(parts), lang)


def _html(text: str) -> Response:
    return Response(
        text,
        mimetype="text/html",
        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"},
    )


@blueprint.get("/terms/")
def index() -> Response:
    return _html(render_index(services().registry, params.lang(request.args, default=None)))


@blueprint.get("/terms/<entry_id>")
def page(entry_id: str) -> Response:
    lang = params.lang(request.args, default=None)
    text = render_page(services().registry, entry_id, lang)
    if text is None:
        raise NotFound(f"no term or metric with id {entry_id[:100]!r}; GET /api/terms lists them")
    return _html(text)
