"""The bundle alerts somewhere even with no webhook of the user's: Grafana's contact point
defaults to the datasource's receiver, which logs each alert and lists the latest. The receiver
takes only notifications signed with its own secret, as Grafana's webhook signs them (issue 39:
it took anyone's posts and logged each); refused posts are counted and logged a line a minute at
most. A malformed notification is a 400 naming what is wrong; only a JSON body is read (the CSRF
defence); the list is run data, behind the token."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
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
SECRET = "webhook-secret-0123456789abcdef"
NOTIFICATIONS = ROOT / "provisioning/alerting/rlvitals-notifications.yaml"


def _hmac_settings() -> dict[str, str]:
    """The contact point's HMAC settings, as provisioned for Grafana."""
    points = yaml.safe_load(NOTIFICATIONS.read_text())
    settings: dict[str, str] = points["contactPoints"][0]["receivers"][0]["settings"]["hmacConfig"]
    return settings


def _signed(body: object, secret: str = SECRET, at: float | None = None) -> dict[str, Any]:
    """A POST as Grafana's webhook sends it with an HMAC config (grafana/alerting
    http/hmac.go, `HMACRoundTripper.sign`): HMAC-SHA256 of `<unix seconds>:<body>`, hex, in the
    configured header, the timestamp in the configured timestamp header."""
    settings = _hmac_settings()
    data = json.dumps(body).encode()
    stamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), stamp.encode() + b":" + data, hashlib.sha256).hexdigest()
    headers = {settings["header"]: digest, settings["timestampHeader"]: stamp}
    return {"data": data, "headers": headers, "content_type": "application/json"}


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
    config = DatasourceConfig(token=TOKEN, alert_webhook_secret=SECRET)
    return create_app(config, reg, history=memory_history)


def test_a_notification_is_logged_and_listed_newest_first(
    app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    client = app.test_client()  # Grafana's webhook sends no token
    with caplog.at_level(logging.WARNING, logger="rlvitals.alerts"):
        r = client.post(PATH, **_signed(_notification()))
        client.post(PATH, **_signed(_notification("resolved")))
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
    client.post(PATH, **_signed(_notification(n=KEPT + 5)))
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
    r = app.test_client().post(PATH, **_signed(body))
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
    # Grafana and the datasource are given the same webhook secret, and Grafana signs with it
    secret = "${RLVITALS_ALERT_WEBHOOK_SECRET:?set RLVITALS_ALERT_WEBHOOK_SECRET in .env}"
    assert services["grafana"]["environment"]["RLVITALS_ALERT_WEBHOOK_SECRET"] == secret
    assert services[parts.hostname]["environment"]["RLVITALS_ALERT_WEBHOOK_SECRET"] == secret
    assert settings["hmacConfig"]["secret"] == "${RLVITALS_ALERT_WEBHOOK_SECRET}"


# -- the webhook's own secret ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "offset", "why"),
    [
        (None, 0, "no "),
        ("another-secret-0123456789", 0, "does not match"),
        (SECRET, -330, "more than 300 s"),
        (SECRET, 330, "more than 300 s"),
    ],
    ids=["unsigned", "wrong secret", "too old", "from the future"],
)
def test_a_post_not_signed_with_the_secret_now_is_refused_saying_how_to_sign(
    app: Flask, secret: str | None, offset: float, why: str
) -> None:
    if secret is None:
        how = {"data": json.dumps(_notification()), "content_type": "application/json"}
    else:
        how = _signed(_notification(), secret=secret, at=time.time() + offset)
    r = app.test_client().post(PATH, **how)
    assert r.status_code == 401
    error = r.get_json()["error"]
    assert why in error and "RLVITALS_ALERT_WEBHOOK_SECRET" in error
    assert _hmac_settings()["header"] in error and _hmac_settings()["timestampHeader"] in error
    listed = app.test_client().get(PATH, headers={"Authorization": f"Bearer {TOKEN}"})
    assert listed.get_json()["alerts"] == []


def test_a_signed_notification_sent_again_is_refused(app: Flask) -> None:
    post = _signed(_notification())
    assert app.test_client().post(PATH, **post).status_code == 200
    again = app.test_client().post(PATH, **post)
    assert again.status_code == 401 and "taken before" in again.get_json()["error"]


def test_without_a_secret_the_receiver_takes_nothing_and_says_what_to_set(
    reg: registry.Registry, memory_history: MemoryHistory
) -> None:
    app = create_app(DatasourceConfig(token=TOKEN), reg, history=memory_history)
    r = app.test_client().post(PATH, **_signed(_notification()))
    assert r.status_code == 403
    assert "RLVITALS_ALERT_WEBHOOK_SECRET" in r.get_json()["error"]


def test_refused_posts_are_counted_and_logged_a_line_a_minute_at_most(
    app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    client = app.test_client()
    with caplog.at_level(logging.INFO, logger="rlvitals.alerts"):
        for i in range(50):
            client.post(PATH, **_signed(_notification(run=f"fake-{i}"), secret="x" * 20))
        client.post(PATH, **_signed(_notification()))
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "rlvitals.alerts"]
    assert len(lines) == 2  # one for the refused posts, one for the alert taken
    assert lines[0].startswith("refused 1 alert notification post") and "does not match" in lines[0]
    assert "fake-" not in " ".join(lines)  # what a refused post says is never logged
    health = client.get("/api/health", headers={"Authorization": f"Bearer {TOKEN}"}).get_json()
    assert health["alert_notifications"] == {"received": 1, "refused": 50}


def test_serve_given_the_secret_as_compose_gives_it_takes_a_notification_signed_as_grafana_does(
    tmp_path: Path,
) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    datasource_env = compose["services"]["datasource"]["environment"]
    assert "RLVITALS_ALERT_WEBHOOK_SECRET" in datasource_env
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_DATASOURCE_TOKEN": TOKEN,
        "RLVITALS_ALERT_WEBHOOK_SECRET": SECRET,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvitals.cli", "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        statuses = []
        for post in (_signed(_notification()), _signed(_notification(), secret="y" * 24)):
            deadline = time.monotonic() + 30
            while True:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    headers = {**post["headers"], "Content-Type": post["content_type"]}
                    conn.request("POST", PATH, body=post["data"], headers=headers)
                    statuses.append(conn.getresponse().status)
                    break
                except OSError:
                    assert proc.poll() is None and time.monotonic() < deadline
                    time.sleep(0.2)
                finally:
                    conn.close()
    finally:
        proc.terminate()
        err = proc.communicate(timeout=10)[1]
    assert statuses == [200, 401]
    assert "alert firing: Policy KL too high run=ppo-1" in err
    assert "refused 1 alert notification post" in err
