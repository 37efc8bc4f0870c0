"""The live dashboard's HTTP side: `/` answers a browser with the run list and Grafana with JSON;
run status follows `exporter.lifecycle`; every field a run logged, registered or not, is listed
and served (from the embedded store and from a real InfluxDB alike); bad input is a JSON 4xx."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

import exporter
import registry
from exporter.lease import Lease, this_process
from exporter.lifecycle import Lifecycle, Recorded
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import (
    EmbeddedHistory,
    HistoryStore,
    InfluxHistory,
    MemoryHistory,
    RunInfo,
    open_history,
)
from grafana.datasource.run_summary import run_summary
from grafana.live import STATIC, UI, render_index

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# What Grafana's JSON datasource sends (its backend_srv asks for JSON first).
GRAFANA_ACCEPT = "application/json, text/plain, */*"
N = 300
CUSTOM = ("zz/late_key", "aa/early_key")
# SB3's own counters, which registry/bookkeeping.yaml declares as such
BOOKKEEPING = ("train/n_updates", "time/iterations")


@dataclass(frozen=True)
class Loaded:
    embedded: EmbeddedHistory
    influx: InfluxHistory
    embedded_app: Flask
    influx_app: Flask
    started: float


@pytest.fixture(scope="module")
def loaded(
    builtin: registry.Registry, influxd: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loaded]:
    db = "dash_api"
    influxd.post_query(f'CREATE DATABASE "{db}"')
    store = tmp_path_factory.mktemp("dash-api")
    settings = exporter.ExporterSettings(
        store=store, influx_url=influxd.url, influx_database=db, policy="warn"
    )
    started = time.time()
    with exporter.init(
        "sb3-run",
        project="cartpole",
        framework="sb3",
        config={"clip_epsilon": 0.2, "n_epochs": 10},
        registry=builtin,
        settings=settings,
    ) as run:
        for step in range(N):
            run.log(
                step,
                {
                    "train/approx_kl": 0.01 + step * 1e-5,
                    "train/ent_coef": 0.1,
                    CUSTOM[0]: float(step),
                    CUSTOM[1]: float(-step),
                    BOOKKEEPING[0]: float(step * 10),
                    BOOKKEEPING[1]: float(step),
                },
            )
        assert run.flush(60)
    config = DatasourceConfig(store=store)
    influx_config = DatasourceConfig(store=store, influx_url=influxd.url, influx_database=db)
    embedded, influx = open_history(config, builtin), open_history(influx_config, builtin)
    assert isinstance(embedded, EmbeddedHistory) and isinstance(influx, InfluxHistory)
    yield Loaded(
        embedded,
        influx,
        create_app(config, builtin),
        create_app(influx_config, builtin),
        started,
    )


def _stores(loaded: Loaded) -> list[HistoryStore]:
    return [loaded.embedded, loaded.influx]


# -- `/` --------------------------------------------------------------------------------------


def test_root_is_json_for_grafana_and_the_run_list_for_a_browser(app: Flask) -> None:
    client = app.test_client()
    for headers in ({}, {"Accept": GRAFANA_ACCEPT}, {"Accept": "application/json"}):
        r = client.get("/", headers=headers)
        assert r.status_code == 200 and r.get_json()["protocol"] == "simpod-json-datasource"
    r = client.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert r.status_code == 200 and r.mimetype == "text/html"
    html = r.get_data(as_text=True)
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]
    for run in ("healthy", "collapse", "empty"):
        assert f'data-run="{run}"' in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing from another host
    zh = client.get("/?lang=zh", headers={"Accept": BROWSER_ACCEPT}).get_data(as_text=True)
    assert '<html lang="zh">' in zh and UI["zh"]["project"] in zh


def test_run_list_badge_hover_text_is_the_status_reason_and_the_filter_box_the_address() -> None:
    row = {
        "run": "r1",
        "project": None,
        "framework": "sb3",
        "status": "crashed",
        "status_reason": 'KeyError: "<x>"',
        "last_step": 1234,
        "started": None,
    }
    html = render_index([row], "zh", [("filter", '"><b>')])
    badge = re.search(r'<span class="run-status rs-crashed"[^>]*>([^<]*)</span>', html)
    assert badge is not None and badge.group(1) == UI["zh"]["crashed"]
    assert 'title="KeyError: &quot;&lt;x&gt;&quot;"' in badge.group(0)
    assert 'id="filter" value="&quot;&gt;&lt;b&gt;"' in html
    assert '<td class="last-step">1,234</td>' in html
    plain = render_index([{**row, "status": "ended", "status_reason": None}], "en", [])
    assert 'data-status="ended"' in plain and " title=" not in plain
    # An empty store: the message shows, the table (and filter box) is there for runs.js, hidden.
    empty = render_index([], "en", [])
    assert f'<p class="empty">{UI["en"]["no_runs"]}</p>' in empty
    assert '<table class="runs" hidden>' in empty and '<p class="run-filter" hidden>' in empty


# -- status -----------------------------------------------------------------------------------


def test_status_is_the_lifecycle_of_each_run() -> None:
    now = 1_800_000_000.0
    names = ("done", "crashed", "live", "hung", "quiet", "gone")
    data = {name: {"x": ([0, 1], [1.0, 2.0])} for name in names}
    writer = Lease(this_process(), "log", now - 99, now)  # this process: alive
    info = {
        "done": RunInfo(
            created=now - 99,
            finished=now - 50,
            recorded=Recorded("finished", "finish() called", now - 50, now - 60),
        ),
        "crashed": RunInfo(recorded=Recorded("crashed", "ValueError: nan", now - 5, now - 6)),
        "live": RunInfo(
            project="p",
            framework="sb3",
            created=now - 99,
            recorded=Recorded(arrived=now - 5, lease=writer),
        ),
        "hung": RunInfo(recorded=Recorded(arrived=now - 900, lease=writer)),
        # nobody holds these: quiet history is ended, never stalled
        "quiet": RunInfo(recorded=Recorded(arrived=now - 900)),
        "gone": RunInfo(last_activity=now - 7200),  # a store that records no life (InfluxDB)
    }
    store = MemoryHistory(data, info=info)
    life = Lifecycle()
    got = {r: run_summary(store, life, r, now)["status"] for r in data}
    assert got == {
        "done": "finished",
        "crashed": "crashed",
        "live": "live",
        "hung": "stalled",
        "quiet": "ended",
        "gone": "ended",
    }
    row = run_summary(store, life, "live", now)
    assert (row["project"], row["framework"], row["started"]) == ("p", "sb3", now - 99)
    assert run_summary(store, life, "crashed", now)["status_reason"] == "ValueError: nan"


def test_embedded_status_reads_the_outbox_run_record(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, policy="warn")
    run = exporter.init("r1", project="proj", framework="sb3", registry=builtin, settings=settings)
    run.log(0, {"train/approx_kl": 0.01})
    assert run.flush()
    app = create_app(DatasourceConfig(store=tmp_path), builtin)
    row = app.test_client().get("/api/runs").get_json()["runs"][0]
    assert (row["run"], row["status"], row["project"], row["framework"]) == (
        "r1",
        "live",
        "proj",
        "sb3",
    )
    run.finish()
    row = app.test_client().get("/api/run?run=r1").get_json()
    assert row["status"] == "finished" and row["finished"] is not None


def test_influx_status_comes_from_the_newest_point(loaded: Loaded) -> None:
    info = loaded.influx.run_info("sb3-run")
    assert info.project == "cartpole"
    assert info.last_activity is not None and info.created is not None
    assert loaded.started - 1 <= info.created <= info.last_activity <= time.time()
    row = loaded.influx_app.test_client().get("/api/run?run=sb3-run").get_json()
    assert row["status"] == "live"  # logged seconds ago, no finish record in InfluxDB
    assert row["config"] == {"clip_epsilon": 0.2, "n_epochs": 10}


# -- fields and series ------------------------------------------------------------------------


def test_every_logged_field_is_listed_core_then_registered_then_unknown_by_name(
    loaded: Loaded, builtin: registry.Registry
) -> None:
    for app in (loaded.embedded_app, loaded.influx_app):
        body = app.test_client().get("/api/fields?run=sb3-run").get_json()
        rows = body["fields"]
        names = [r["field"] for r in rows]
        assert names[-2:] == sorted(CUSTOM)  # unregistered last, by name
        assert {"policy_kl", "entropy_coef"} <= set(names)
        groups = [r["group"] for r in rows]
        order = ["core", "registered", "bookkeeping", "unregistered"]
        assert groups == sorted(groups, key=order.index)
        # a framework's counters are its bookkeeping, by name, with what each one is
        kept = [r for r in rows if r["group"] == "bookkeeping"]
        assert [r["field"] for r in kept] == sorted(BOOKKEEPING)
        for r in kept:
            key = builtin.bookkeeping_key(r["field"], "sb3")
            assert key is not None
            assert r["bookkeeping"] == {
                "framework": "sb3",
                "meaning": key.meaning.get("en"),
                "source": key.source,
            }
        # Hyperparameters are the config table's, not fields.
        assert "clip_epsilon" not in names and "config_json" not in names
        kl = next(r for r in rows if r["field"] == "policy_kl")
        assert kl["group"] == "core" and "train/approx_kl" in kl["aliases"]
        assert 'class="tip"' in kl["tooltip"]
        custom = next(r for r in rows if r["field"] == CUSTOM[0])
        assert custom["measurement"] == "unregistered" and custom["tooltip"] is None


def test_unregistered_series_are_served_with_wall_times(
    loaded: Loaded, builtin: registry.Registry
) -> None:
    bands = builtin.metric("policy_kl").bands
    assert bands is not None
    early = bands.for_stage("early")
    assert early is not None
    for app in (loaded.embedded_app, loaded.influx_app):
        client = app.test_client()
        body = client.get(f"/api/field_series?run=sb3-run&field={CUSTOM[0]}").get_json()
        assert body["steps"] == list(range(N)) and body["values"] == [float(s) for s in range(N)]
        walls = body["wall_times"]
        assert walls == sorted(walls) and loaded.started - 1 <= walls[0] <= time.time()
        part = client.get(
            f"/api/field_series?run=sb3-run&field={CUSTOM[1]}&from=10&to=19"
        ).get_json()
        assert part["steps"] == list(range(10, 20)) and part["values"][0] == -10.0
        assert body["band_low"] is None and body["band_high"] is None
        kl = client.get("/api/field_series?run=sb3-run&field=policy_kl&to=9").get_json()
        assert kl["band_high"] == [early.high] * 10  # the registry's early-stage band
        few = client.get("/api/field_series?run=sb3-run&field=policy_kl&points=10").get_json()
        assert few["points"] <= 10 and few["bucket_steps"] > 1 and few["source_points"] == N


def test_embedded_and_influx_clocks_agree(loaded: Loaded) -> None:
    a, b = (s.clock("sb3-run", "policy_kl", 16) for s in _stores(loaded))
    assert len(a) >= 2 and len(b) >= 2
    assert a.steps[0] == b.steps[0] == 0
    assert abs(float(a.values[0]) - float(b.values[0])) < 1e-3


def test_csv_download_is_a_named_attachment(loaded: Loaded) -> None:
    r = loaded.embedded_app.test_client().get(
        f"/api/field_series?run=sb3-run&field={CUSTOM[0]}&format=csv&download=1&to=4"
    )
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert r.headers["Content-Disposition"] == 'attachment; filename="sb3-run__zz_late_key.csv"'
    lines = r.get_data(as_text=True).splitlines()
    assert lines[0] == "step,wall_time,value"
    assert [ln.split(",")[2] for ln in lines[1:]] == ["0.0", "1.0", "2.0", "3.0", "4.0"]


def test_card_html_is_the_reports_card_for_each_registered_metric(loaded: Loaded) -> None:
    body = loaded.embedded_app.test_client().get("/api/card_html?run=sb3-run&lang=zh").get_json()
    assert {"policy_kl", "entropy_coef"} <= set(body["cards"])
    assert not set(CUSTOM) & set(body["cards"])
    html = body["cards"]["policy_kl"]
    assert html.startswith('<article class="card')
    # The card's own words are Chinese too: status badge, trend direction.
    assert re.search(r'class="status st-\w+">(正常|关注|警告|严重|无数据)<', html)
    assert re.search(r"<dd>[^<]*(上升|下降|持平)\)?</dd>", html)
    assert not re.search(r"<dd>[^<]*\b(up|down|flat)\b[^<]*</dd>", html)


def test_run_page_is_a_shell_with_its_boot_data(loaded: Loaded) -> None:
    r = loaded.embedded_app.test_client().get("/run?run=sb3-run&lang=zh&refresh=2")
    assert r.status_code == 200 and "script-src 'self'" in r.headers["Content-Security-Policy"]
    html = r.get_data(as_text=True)
    boot = json.loads(re.search(r'id="boot">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert boot["runs"] == ["sb3-run"] and boot["lang"] == "zh" and boot["refresh_ms"] == 2000
    assert boot["strings"] == UI["zh"]


# -- bad input --------------------------------------------------------------------------------

BAD = [
    ("/api/run", 400, "missing parameter 'run'"),
    ("/api/run?run=nope", 404, "unknown run 'nope'"),
    ("/api/fields?run=nope", 404, "unknown run"),
    ("/api/fields?run=sb3-run&lang=fr", 400, "parameter 'lang'"),
    ("/api/field_series?run=sb3-run", 400, "missing parameter 'field'"),
    ("/api/field_series?run=sb3-run&field=nope", 404, "logged no field 'nope'"),
    ("/api/field_series?run=sb3-run&field=clip_epsilon", 404, "logged no field"),
    ("/api/field_series?run=nope&field=policy_kl", 404, "unknown run"),
    ("/api/field_series?run=sb3-run&field=policy_kl&points=1", 400, "parameter 'points'"),
    ("/api/field_series?run=sb3-run&field=policy_kl&points=x", 400, "must be an integer"),
    ("/api/field_series?run=sb3-run&field=policy_kl&from=9&to=3", 400, "is after 'to'"),
    ("/api/field_series?run=sb3-run&field=policy_kl&from=-1", 400, "parameter 'from'"),
    ("/api/field_series?run=sb3-run&field=policy_kl&format=xml", 400, "parameter 'format'"),
    ("/api/field_series?run=sb3-run&field=policy_kl&download=yes", 400, "parameter 'download'"),
    ("/api/card_html?run=nope", 404, "unknown run"),
    ("/api/card_html?run=sb3-run&lang=de", 400, "parameter 'lang'"),
    ("/run", 400, "missing parameter 'run'"),
    ("/run?run=nope", 404, "unknown run 'nope'"),
    ("/run?run=sb3-run&refresh=0", 400, "parameter 'refresh'"),
    ("/run?run=sb3-run&lang=xx", 400, "parameter 'lang'"),
    ("/run?" + "&".join(["run=sb3-run"] * 9), 400, "at most 8 runs"),
    ("/live/static/../pages.py", 404, "no such dashboard file"),
    ("/live/static/nope.js", 404, "no such dashboard file"),
    ("/?lang=xx", 400, "parameter 'lang'"),
    ("/?refresh=0", 400, "parameter 'refresh'"),
]


@pytest.mark.parametrize(("url", "status", "message"), BAD)
def test_bad_requests_are_json_4xx_naming_the_problem(
    loaded: Loaded, url: str, status: int, message: str
) -> None:
    headers = {"Accept": BROWSER_ACCEPT} if url.startswith("/?") else {}
    for app in (loaded.embedded_app, loaded.influx_app):
        r = app.test_client().get(url, headers=headers)
        assert r.status_code == status, (url, r.get_data(as_text=True))
        assert message in r.get_json()["error"]


# -- what the pages are made of ---------------------------------------------------------------


def test_vendored_uplot_is_the_pinned_release_with_its_licence() -> None:
    vendor = STATIC / "vendor"
    pinned = json.loads((vendor / "package.json").read_text())["dependencies"]["uplot"]
    locked = json.loads((vendor / "package-lock.json").read_text())["packages"]
    assert locked["node_modules/uplot"]["version"] == pinned
    banner = (vendor / "uplot" / "uPlot.iife.min.js").read_text().splitlines()[0]
    assert f"(v{pinned})" in banner
    assert "MIT License" in (vendor / "uplot" / "LICENSE").read_text()


def test_every_ui_string_exists_in_both_languages() -> None:
    assert set(UI["en"]) == set(UI["zh"])
    assert all(UI["zh"][k] and UI["zh"][k] != UI["en"][k] for k in UI["en"] if k != "other_lang")


def test_static_files_are_served_with_their_types(app: Flask) -> None:
    from grafana.live import STATIC

    client = app.test_client()
    shipped = sorted(p.name for p in STATIC.iterdir() if p.suffix in (".js", ".css"))
    assert {"run.js", "runs.js", "theme.js", "login.js", "live.css"} <= set(shipped)
    mimes = {".js": "text/javascript", ".css": "text/css"}
    for name in [*shipped, "vendor/uplot/uPlot.iife.min.js"]:
        r = client.get(f"/live/static/{name}")
        assert r.status_code == 200 and r.mimetype == mimes[Path(name).suffix], name
    assert client.get("/live/report.css").mimetype == "text/css"
