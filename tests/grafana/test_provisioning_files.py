"""Provisioning YAML has the fields Grafana requires (alerting, datasources, dashboard providers),
and `rlvitals build` leaves the tree unchanged."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

import registry
from grafana.dashboards_gen.alerts import alert_rule_groups
from grafana.dashboards_gen.sources import EXPR, INFINITY, INFLUX, PROMETHEUS, PUBLIC_API_URL
from rlvitals.build import build_all

ROOT = Path(__file__).parents[2]
_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def _yaml(rel: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / rel).read_text(encoding="utf-8"))
    return data


def _rules() -> list[dict[str, Any]]:
    doc = _yaml("provisioning/alerting/rlvitals-rules.yaml")
    assert doc["apiVersion"] == 1
    out = []
    for group in doc["groups"]:
        assert group["name"] and group["folder"] and _DURATION.match(group["interval"])
        assert group.get("orgId", 1) >= 1
        out += group["rules"]
    return out


def test_alert_rules_have_every_required_field() -> None:
    rules = _rules()
    uids = [r["uid"] for r in rules]
    assert len(uids) == len(set(uids))
    for r in rules:
        assert _UID.match(r["uid"]), r["uid"]
        assert r["title"] and r["condition"] and r["data"]
        refs = {q["refId"] for q in r["data"]}
        assert r["condition"] in refs
        for q in r["data"]:
            if q["datasourceUid"] != EXPR.uid:
                rel = q["relativeTimeRange"]
                assert rel["from"] > rel["to"] >= 0, r["uid"]
                assert q["datasourceUid"] == PROMETHEUS.uid
            else:
                assert q["model"]["expression"] in refs
        assert r["noDataState"] in ("NoData", "Alerting", "OK", "KeepLast")
        assert r["execErrState"] in ("Alerting", "Error", "OK", "KeepLast")
        assert _DURATION.match(r["for"])
        assert {"severity", "metric", "layer"} <= set(r["labels"])
        assert {"summary", "description", "runbook_url"} <= set(r["annotations"])
        # the one variable Grafana is meant to expand here: the public address, which compose
        # gives Grafana's environment (provisioning/values/values.go expands ${VAR})
        assert r["annotations"]["runbook_url"].startswith(PUBLIC_API_URL + "/terms/")
        for text in r["annotations"].values():
            rest = text.replace(PUBLIC_API_URL, "").replace("$$", "")
            assert not re.search(r"(?<!\$)\$(?!\$)", rest), text


def test_one_rule_per_registry_alert_and_rule_plus_the_pipeline_rules(
    builtin: registry.Registry,
) -> None:
    rules = _rules()
    # one Grafana rule per (metric, severity, condition): the exporter serves one alert-state
    # series per triple, active when any of that triple's alerts is (entropy's are scoped by
    # action space, KL has a relative and an absolute critical one)
    metric_alerts = sum(len({(a.severity, a.condition) for a in m.alerts}) for m in builtin.metrics)
    pipeline = {"Training stalled", "Run crashed", "rlvitals exporter unhealthy"}
    assert len(rules) == metric_alerts + len(builtin.rules) + len(pipeline)
    titles = {r["title"] for r in rules}
    assert pipeline <= titles
    by_metric = {(r["labels"]["metric"], r["labels"]["severity"]) for r in rules}
    for m in builtin.metrics:
        for a in m.alerts:
            assert (m.id, a.severity) in by_metric
            assert any(
                m.definition.en[:40] in r["annotations"]["description"].replace("$$", "$")
                for r in rules
            )


def test_the_file_matches_the_generator(builtin: registry.Registry) -> None:
    assert _yaml("provisioning/alerting/rlvitals-rules.yaml") == alert_rule_groups(builtin)


def test_contact_point_and_policy() -> None:
    doc = _yaml("provisioning/alerting/rlvitals-notifications.yaml")
    points = doc["contactPoints"]
    names = {p["name"] for p in points}
    for p in points:
        for rec in p["receivers"]:
            assert _UID.match(rec["uid"]) and rec["type"] and rec["settings"]["url"]
    (policy,) = doc["policies"]
    assert policy["receiver"] in names
    assert all(r["receiver"] in names for r in policy["routes"])


def test_datasources_declare_the_uids_the_dashboards_use() -> None:
    doc = _yaml("provisioning/datasources/rlvitals.yaml")
    by_uid = {d["uid"]: d for d in doc["datasources"]}
    assert set(by_uid) == {INFLUX.uid, PROMETHEUS.uid, INFINITY.uid}
    for d in doc["datasources"]:
        assert d["name"] and d["type"] and d["access"] == "proxy" and d["url"].startswith("http")
    influx = by_uid[INFLUX.uid]
    assert influx["jsonData"]["version"] == "InfluxQL" and influx["jsonData"]["dbName"]
    # InfluxDB 1.x's InfluxQL with a user and password, as Grafana's InfluxDB provisioning
    # takes them: `user` beside the URL, the password in `secureJsonData`
    assert influx["user"].startswith("${") and influx["secureJsonData"]["password"].startswith("${")
    infinity = by_uid[INFINITY.uid]
    assert infinity["url"] in infinity["jsonData"]["allowedHosts"]


def test_dashboard_providers_point_at_the_generated_folders() -> None:
    doc = _yaml("provisioning/dashboards/rlvitals.yaml")
    assert doc["apiVersion"] == 1
    names = [p["name"] for p in doc["providers"]]
    assert len(names) == len(set(names))
    compose = (ROOT / "docker-compose.yml").read_text()
    for p in doc["providers"]:
        assert p["type"] == "file" and p["options"]["path"].startswith(
            "/var/lib/grafana/dashboards/rlvitals/"
        )
        lang = p["options"]["path"].rsplit("/", 1)[1]
        assert (ROOT / "grafana" / "dashboards" / lang).is_dir()
        assert p["folder"] and not p["options"].get("foldersFromFilesStructure")
    # the dashboards are mounted read-only where compose's Grafana entrypoint copies them from,
    # into the providers' folder (with the public address filled in)
    script = (ROOT / "provisioning" / "grafana" / "entrypoint.sh").read_text()
    source = re.search(r'src="\$\{RLVITALS_DASHBOARDS_SRC:-([^}]+)\}"', script)
    target = re.search(r'dst="\$\{RLVITALS_DASHBOARDS_DIR:-([^}]+)\}"', script)
    assert source and target, "entrypoint.sh names no dashboards source or destination"
    assert f"./grafana/dashboards:{source.group(1)}:ro" in compose
    assert target.group(1) == "/var/lib/grafana/dashboards/rlvitals"
    assert "RLVITALS_PUBLIC_URL: ${RLVITALS_PUBLIC_URL:?" in compose


def test_alert_rules_and_english_dashboards_share_one_folder() -> None:
    """Alert-rule groups name their folder by title only (rules_types.go `AlertRuleGroupV1`); a
    dashboard provider with a folderUid looks its folder up by uid only and would make a second
    folder of the same title (pkg/services/provisioning/dashboards/file_reader.go
    `getOrCreateFolder`). So providers name folders by title, and the rules use the English one."""
    providers = _yaml("provisioning/dashboards/rlvitals.yaml")["providers"]
    assert all("folderUid" not in p for p in providers)
    titles = {p["options"]["path"].rsplit("/", 1)[1]: p["folder"] for p in providers}
    rules = _yaml("provisioning/alerting/rlvitals-rules.yaml")["groups"]
    assert {g["folder"] for g in rules} == {titles["en"]}
    assert len(set(titles.values())) == len(titles)


def test_build_check_is_clean(builtin: registry.Registry) -> None:
    assert build_all(builtin, ROOT, check=True) == []
