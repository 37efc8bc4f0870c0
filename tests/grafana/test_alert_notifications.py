"""The bundle alerts somewhere even with no webhook of the user's: Grafana's contact point
defaults to the datasource's receiver, which logs each alert and lists the latest. A malformed
notification is a 400 naming what is wrong; only a JSON body is read (the CSRF defence); the list
is run data, behind the token."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from flask import Flask

import registry
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.api_alert_notifications import KEPT, PATH
from grafana.datasource.history import MemoryHistory

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-0123456789"


def _notification(status: str = "firing", run: str = "ppo-1", n: int = 1) -> dict[str, Any]:
    """The shape of Grafana's webhook body (its webhook-notifier documentation's example)."""
    return {
        "receiver": "rlvitals-default",
        "status": status,
        "orgId": 1,
        "alerts": [
            {
                "status": status,
                "labels": {
                    "alertname": "Policy KL too high",
                    "run": f"{run}-{i}" if n > 1 else run,
                    "severity": "critical",
                    "metric": "policy_kl",
                },
                "annotations": {"summary": "policy KL above its critical threshold"},
                "startsAt": "2026-12-02T07:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": "c6eadffa33fcdf37",
            }
            for i in range(n)
        ],
        "groupLabels": {"alertname": "Policy KL too high"},
        "commonLabels": {"severity": "critical"},
        "externalURL": "http://localhost:3000/",
        "version": "1",
        "groupKey": '{}:{alertname="Policy KL too high"}',
        "truncatedAlerts": 0,
        "title": "[FIRING:1] Policy KL too high",
        "state": "alerting",
        "message": "**Firing** ...",
    }


@pytest.fixture
def app(reg: registry.Registry, memory_history: MemoryHistory) -> Flask:
    return create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)


def test_a_notification_is_logged_and_listed_newest_first(
    app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    client = app.test_client()  # Grafana's webhook sends no token
    with caplog.at_level(logging.WARNING, logger="rlvitals.alerts"):
        r = client.post(PATH, json=_notification())
        client.post(PATH, json=_notification("resolved"))
    assert r.status_code == 200 and r.get_json() == {"received": 1}
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "rlvitals.alerts"]
    assert lines[0] == (
        "alert firing: Policy KL too high run=ppo-1 severity=critical metric=policy_kl: "
        "policy KL above its critical threshold"
    )
    assert lines[1].startswith("alert resolved: Policy KL too high")
    listed = client.get(PATH, headers={"Authorization": f"Bearer {TOKEN}"}).get_json()["alerts"]
    assert [a["status"] for a in listed] == ["resolved", "firing"]
    assert listed[1]["labels"]["run"] == "ppo-1"


def test_the_list_is_run_data_behind_the_token(app: Flask) -> None:
    assert app.test_client().get(PATH).status_code == 401


def test_only_the_latest_notifications_are_kept(app: Flask) -> None:
    client = app.test_client()
    client.post(PATH, json=_notification(n=KEPT + 5))
    listed = client.get(PATH, headers={"Authorization": f"Bearer {TOKEN}"}).get_json()["alerts"]
    assert len(listed) == KEPT
    assert listed[0]["labels"]["run"] == f"ppo-1-{KEPT + 4}"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"status": "firing"}, "'alerts' list"),
        ([], "'alerts' list"),
        ({"alerts": ["x"]}, "alerts[0] must be an object"),
        ({"alerts": [{"status": "on fire"}]}, "alerts[0].status"),
        ({"alerts": [{"status": "firing", "labels": {"run": 3}}]}, "alerts[0].labels"),
        ({"alerts": [{"status": "firing", "annotations": []}]}, "alerts[0].annotations"),
    ],
)
def test_a_malformed_notification_is_a_400_naming_what(
    app: Flask, body: object, named: str
) -> None:
    r = app.test_client().post(PATH, json=body)
    assert r.status_code == 400
    assert named in r.get_json()["error"]


def test_a_body_that_is_not_json_is_refused_as_a_cross_site_page_would_send_it(app: Flask) -> None:
    r = app.test_client().post(PATH, data='{"alerts": []}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415


def test_compose_sends_alerts_here_unless_the_user_names_a_receiver() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    url = services["grafana"]["environment"]["RLVITALS_ALERT_WEBHOOK_URL"]
    m = re.fullmatch(r"\$\{RLVITALS_ALERT_WEBHOOK_URL:-(.+)\}", url)
    assert m, url
    parts = urlsplit(m.group(1))
    assert parts.path == PATH
    assert parts.hostname in services  # a service of the bundle: the datasource
    command = services[parts.hostname]["command"]
    assert command[0] == "serve" and command[command.index("--port") + 1] == str(parts.port)
    # its Host header is one the datasource answers
    hosts = services[parts.hostname]["environment"]["RLVITALS_DATASOURCE_HOSTS"].split(",")
    assert parts.hostname in hosts
    # and the provisioned contact point posts to that setting
    points = yaml.safe_load(
        (ROOT / "provisioning/alerting/rlvitals-notifications.yaml").read_text()
    )
    settings = points["contactPoints"][0]["receivers"][0]["settings"]
    assert settings["url"] == "${RLVITALS_ALERT_WEBHOOK_URL}"
    assert "authorization_credentials" not in settings  # no token travels to a user's URL
