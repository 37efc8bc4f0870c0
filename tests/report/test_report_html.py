"""The report file: self-contained, escaped, registry-driven, downsampled; `rlvitals report` and
the datasource's `/report` route."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.cards import cards_for
from grafana.datasource.history.base import Event
from grafana.datasource.history.embedded import EmbeddedHistory
from grafana.datasource.history.memory import MemoryHistory
from grafana.report import gather, render_report
from grafana.report.data import DEFAULT_CARD_WINDOW
from grafana.report.svg import nice_ticks
from rlvitals.cli import main

EXTERNAL = re.compile(
    r"""(?:src|href)\s*=\s*["']?(?:https?:|//)|@import|url\(\s*["']?(?:https?:|//)""", re.I
)


def _html(store: Path, reg: registry.Registry, run: str, lang: str = "both") -> str:
    return render_report(EmbeddedHistory(store / "outbox.sqlite"), reg, run, lang=lang)


def test_report_is_self_contained(report_store: Path, builtin_registry: registry.Registry) -> None:
    html = _html(report_store, builtin_registry, "r-kl_blowup")
    assert not EXTERNAL.search(html)
    assert "default-src 'none'" in html
    assert html.count("<svg") >= 10


def test_charts_follow_the_registry(
    report_store: Path, builtin_registry: registry.Registry
) -> None:
    store = EmbeddedHistory(report_store / "outbox.sqlite")
    data = gather(builtin_registry, store, "r-healthy")
    ids = [[s.metric.id for s in c.series] for c in data.charts]
    core = {m.id for m in builtin_registry.core_metrics()}
    assert all(i in core for group in ids for i in group)
    raw = builtin_registry.metric("raw_reward")
    together = next(g for g in ids if raw.id in g)
    assert set(raw.display.panel_with) <= set(together)
    for group in ids:  # metrics on different axes never share a chart
        axes = {builtin_registry.metric(i).display.axis for i in group}
        assert len(axes) == 1


def test_series_are_downsampled(report_store: Path, builtin_registry: registry.Registry) -> None:
    store = EmbeddedHistory(report_store / "outbox.sqlite")
    data = gather(builtin_registry, store, "r-healthy", points=300)
    for chart in data.charts:
        for s in chart.series:
            assert 0 < s.steps.size <= 300
            assert s.smooth.size == s.raw.size


def test_both_languages_and_one(report_store: Path, builtin_registry: registry.Registry) -> None:
    entropy = builtin_registry.metric("policy_entropy")
    both = _html(report_store, builtin_registry, "r-healthy")
    assert entropy.title.en in both and entropy.title.zh in both and 'data-set-lang="zh"' in both
    zh = _html(report_store, builtin_registry, "r-healthy", "zh")
    assert entropy.title.zh in zh and 'class="l-en"' not in zh and 'data-set-lang="zh"' not in zh
    en = _html(report_store, builtin_registry, "r-healthy", "en")
    assert entropy.definition.en.split(".")[0].replace("'", "&#x27;") in en


def test_names_are_escaped(builtin_registry: registry.Registry) -> None:
    run = '<script>alert("x")</script>'
    steps = list(range(50))
    store = MemoryHistory(
        {run: {"raw_reward": (steps, np.linspace(0, 1, 50).tolist())}},
        {run: {"note": "<b>bold</b>"}},
        {run: [Event(10, "checkpoint", "</script><img src=x>")]},
    )
    html = render_report(store, builtin_registry, run)
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "<img src=x>" not in html


def test_unknown_run_is_refused(report_store: Path, builtin_registry: registry.Registry) -> None:
    with pytest.raises(LookupError, match="no run"):
        _html(report_store, builtin_registry, "nope")


def test_nice_ticks() -> None:
    assert nice_ticks(0, 1) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ticks = nice_ticks(0.013, 0.047)
    assert all(0.013 <= t <= 0.047 for t in ticks) and len(ticks) >= 3


def test_report_command(
    report_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    out = tmp_path / "r.html"
    args = ["report", "--run", "r-resume", "--out", str(out), "--store", str(report_store)]
    assert main([*args, "--lang", "en"]) == 0
    assert out.is_file() and "resume" in out.read_text(encoding="utf-8")
    assert main(["report", "--run", "missing", "--store", str(report_store)]) == 2
    assert "no run 'missing'" in capsys.readouterr().err


def test_datasource_serves_the_report(
    report_store: Path, builtin_registry: registry.Registry
) -> None:
    app = create_app(DatasourceConfig(store=report_store), builtin_registry)
    client = app.test_client()
    ok = client.get("/report?run=r-healthy&lang=zh")
    assert ok.status_code == 200 and ok.mimetype == "text/html"
    assert builtin_registry.metric("policy_entropy").title.zh in ok.get_data(as_text=True)
    assert client.get("/report?run=nope").status_code == 404
    assert client.get("/report?run=r-healthy&lang=fr").status_code == 400


@pytest.mark.parametrize("run", ["r-kl_blowup", "r-nan_loss"])
def test_the_reports_cards_are_the_cards_api_cards_answers_in_each_language(
    report_store: Path, builtin_registry: registry.Registry, run: str
) -> None:
    """The report reads a run's cards once for both its languages (`cards_in`): each is the card
    `/api/cards` builds in that language (`cards_for`), word for word."""
    store = EmbeddedHistory(report_store / "outbox.sqlite")
    data = gather(builtin_registry, store, run)
    ids = list(data.cards["en"])
    assert ids and any(c["status"] in ("warning", "critical") for c in data.cards["en"].values())
    for lang in ("en", "zh"):
        want = cards_for(builtin_registry, store, run, ids, lang, DEFAULT_CARD_WINDOW)
        assert list(data.cards[lang].values()) == want, lang
