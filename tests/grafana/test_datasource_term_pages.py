"""Term pages render for every term and metric, in both languages, with everything escaped."""

from __future__ import annotations

import dataclasses
import re

from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import MemoryHistory
from grafana.datasource.pages import render_page


def _ids(reg: registry.Registry) -> list[str]:
    return [t.id for t in reg.terms] + [m.id for m in reg.metrics]


def test_every_term_and_metric_has_a_page_in_both_languages(
    app: Flask, reg: registry.Registry
) -> None:
    client = app.test_client()
    for entry_id in _ids(reg):
        r = client.get(f"/terms/{entry_id}")
        assert r.status_code == 200, entry_id
        assert r.mimetype == "text/html"
        html = r.get_data(as_text=True)
        assert '<section lang="en">' in html and '<section lang="zh">' in html


def test_metric_page_shows_definition_formula_bands_alerts_and_links(
    app: Flask, reg: registry.Registry
) -> None:
    html = app.test_client().get("/terms/policy_entropy").get_data(as_text=True)
    m = reg.metric("policy_entropy")
    for needle in (
        "Definition",
        "定义",
        "Healthy range by stage",
        "Alerts",
        "When it goes wrong",
        "Often confused with",
        "nats",
    ):
        assert needle in html
    for related in m.related:
        assert f'href="{related}"' in html


def test_pages_load_nothing_from_outside(app: Flask, reg: registry.Registry) -> None:
    for entry_id in _ids(reg):
        html = app.test_client().get(f"/terms/{entry_id}").get_data(as_text=True)
        assert not re.search(r"(src|href)=\"(https?:)?//", html)
        assert "<script" not in html


def test_hostile_registry_text_is_escaped(reg: registry.Registry) -> None:
    m = reg.metric("policy_entropy")
    evil = registry.Text('<script>alert("x")</script>', "<img src=x onerror=alert(1)>")
    hostile = dataclasses.replace(m, title=evil, definition=evil, unit="<b>nats</b>")
    metrics = tuple(hostile if x.id == m.id else x for x in reg.metrics)
    reg2 = registry.Registry(metrics, reg.terms, reg.rules, reg.stages)
    html = render_page(reg2, "policy_entropy")
    assert html is not None
    assert "<script>" not in html and "<img" not in html and "<b>nats" not in html
    assert "&lt;script&gt;" in html


def test_index_links_every_page(reg: registry.Registry, memory_history: MemoryHistory) -> None:
    app = create_app(DatasourceConfig(), reg, history=memory_history)
    html = app.test_client().get("/terms/").get_data(as_text=True)
    for entry_id in _ids(reg):
        assert f'href="{entry_id}"' in html


def test_term_page_honours_lang_and_keeps_it_on_its_links(
    app: Flask, reg: registry.Registry
) -> None:
    client = app.test_client()
    zh = client.get("/terms/policy_entropy?lang=zh").get_data(as_text=True)
    assert '<html lang="zh">' in zh
    assert '<section lang="zh">' in zh and '<section lang="en">' not in zh
    assert "定义" in zh and "Definition" not in zh
    assert reg.metric("policy_entropy").title.zh in zh
    hrefs = re.findall(r'href="([^"]+)"', zh)
    assert len(hrefs) > 3 and all(h.endswith("?lang=zh") or h == "?lang=en" for h in hrefs)
    en = client.get("/terms/?lang=en").get_data(as_text=True)
    assert '<section lang="en">' in en and '<section lang="zh">' not in en
    bad = client.get("/terms/policy_entropy?lang=fr")
    assert bad.status_code == 400 and "lang" in bad.get_json()["error"]
