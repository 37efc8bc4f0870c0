"""Registry metrics and terms as JSON entries, in one language or both."""

from __future__ import annotations

from typing import Any

import registry
from registry.model import STAGES, Band, Formula, Text

__all__ = ["entry", "glossary", "metric_entry", "term_entry", "text_of"]


def text_of(t: Text | None, lang: str | None) -> Any:
    """A text in one language (a string), or both (`{"en": ..., "zh": ...}`) when lang is None."""
    if t is None:
        return None
    return {"en": t.en, "zh": t.zh} if lang is None else t.get(lang)


def _band(band: Band | None) -> dict[str, Any] | None:
    if band is None:
        return None
    return {"low": band.low, "high": band.high, "reason": band.reason}


def _formula(f: Formula, lang: str | None) -> dict[str, Any]:
    return {"expr": f.expr, "over": f.over, "note": text_of(f.note, lang)}


def metric_entry(m: registry.Metric, lang: str | None) -> dict[str, Any]:
    bands: dict[str, Any] | None = None
    if m.bands is not None:
        bands = {"basis": m.bands.basis}
        bands.update({s: _band(m.bands.for_stage(s)) for s in STAGES})
    return {
        "id": m.id,
        "kind": "metric",
        "title": text_of(m.title, lang),
        "short": text_of(m.short, lang),
        "definition": text_of(m.definition, lang),
        "formula": _formula(m.formula, lang),
        "unit": m.unit,
        "group": m.group,
        "layer": m.layer,
        "core": m.core,
        "direction": m.direction,
        "limits": {"min": m.limits.min, "max": m.limits.max, "reason": m.limits.reason},
        "bands": bands,
        "alerts": [
            {
                "severity": a.severity,
                "condition": a.condition,
                "threshold": a.threshold,
                "basis": a.basis,
                "for_steps": a.for_steps,
                "reason": a.reason,
            }
            for a in m.alerts
        ],
        "failure_scenarios": [
            {
                "symptom": text_of(s.symptom, lang),
                "causes": [text_of(c, lang) for c in s.causes],
                "check": [text_of(c, lang) for c in s.check],
                "change": [text_of(c, lang) for c in s.change],
            }
            for s in m.failure_scenarios
        ],
        "confusions": [text_of(c, lang) for c in m.confusions],
        "related": list(m.related),
        "page": f"/terms/{m.id}",
    }


def term_entry(t: registry.Term, lang: str | None) -> dict[str, Any]:
    return {
        "id": t.id,
        "kind": "term",
        "title": text_of(t.title, lang),
        "definition": text_of(t.definition, lang),
        "formula": t.formula,
        "why_it_matters": text_of(t.why_it_matters, lang),
        "confusions": [text_of(c, lang) for c in t.confusions],
        "explains": list(t.explains),
        "related_terms": list(t.related_terms),
        "page": f"/terms/{t.id}",
    }


def entry(reg: registry.Registry, entry_id: str, lang: str | None) -> dict[str, Any] | None:
    """A term, else a metric, with that id (None when neither exists)."""
    if reg.has_term(entry_id):
        return term_entry(reg.term(entry_id), lang)
    if reg.has_metric(entry_id):
        return metric_entry(reg.metric(entry_id), lang)
    return None


def glossary(reg: registry.Registry, lang: str | None) -> list[dict[str, Any]]:
    """Every term, then every metric."""
    return [term_entry(t, lang) for t in reg.terms] + [metric_entry(m, lang) for m in reg.metrics]
