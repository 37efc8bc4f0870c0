"""Only critical alerts page (issue 35: "the alert rules page on critical only").

The notification policy `rlvitals build` provisions (provisioning/alerting/
rlvitals-notifications.yaml) is loaded into a real Alertmanager (Debian's
`prometheus-alertmanager`; Grafana's own Alertmanager is built on its routing, matchers and time
intervals): its route tree, matchers and mute timing as provisioned, the contact point replaced by
a webhook this test listens on, and the waits scaled down. Alerts of each severity the rules
carry are posted to it: a critical one reaches the webhook, a warning and a watch never do, and
all three stay listed as active (muting stops notifications, not the alerts)."""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from influx_server import free_port, spawn_until_ready, stop_process

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "provisioning" / "alerting" / "rlvitals-notifications.yaml"
RULES = REPO / "provisioning" / "alerting" / "rlvitals-rules.yaml"
BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")

pytestmark = pytest.mark.skipif(BINARY is None, reason="needs Debian's prometheus-alertmanager")


def _route(policy: dict[str, Any], receiver: str) -> dict[str, Any]:
    """A Grafana policy as an Alertmanager route: the same matchers and mute timings, the
    contact point replaced by the test's receiver, group waits of a second."""
    out: dict[str, Any] = {"receiver": receiver}
    if "group_by" in policy:
        out["group_by"] = policy["group_by"]
    matchers = [f'{k}{op}"{v}"' for k, op, v in policy.get("object_matchers", [])]
    if matchers:
        out["matchers"] = matchers
    if "mute_time_intervals" in policy:
        out["mute_time_intervals"] = policy["mute_time_intervals"]
    out |= {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"}
    if policy.get("routes"):
        out["routes"] = [_route(r, receiver) for r in policy["routes"]]
    return out


class _Hook(BaseHTTPRequestHandler):
    got: ClassVar[list[dict[str, Any]]] = []  # what the webhook was sent, this test's

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Hook.got.extend(json.loads(body)["alerts"])
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    _Hook.got = []
    doc = yaml.safe_load(POLICY.read_text())
    (policy,) = doc["policies"]
    config = {
        "route": _route(policy, "hook"),
        "receivers": [
            {
                "name": "hook",
                "webhook_configs": [{"url": f"http://127.0.0.1:{hook.server_port}/"}],
            }
        ],
        "time_intervals": [
            {"name": m["name"], "time_intervals": m["time_intervals"]} for m in doc["muteTimes"]
        ],
    }
    (tmp_path / "am.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    cmd = [
        str(BINARY),
        f"--config.file={tmp_path / 'am.yml'}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    proc = spawn_until_ready(cmd, tmp_path / "am.log", f"http://127.0.0.1:{port}/-/ready", 200, 60)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)
        hook.shutdown()


def _post(url: str, alerts: list[dict[str, Any]]) -> None:
    req = urllib.request.Request(
        f"{url}/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def test_a_critical_alert_pages_a_warning_and_a_watch_do_not(alertmanager: str) -> None:
    # one real rule of each severity the provisioned rules carry, as Grafana labels them
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    by_severity = {r["labels"]["severity"]: r for r in rules}
    assert set(by_severity) == {"critical", "warning", "watch"}
    alerts = [
        {"labels": {**r["labels"], "alertname": r["title"], "run": "ppo-1"}}
        for r in by_severity.values()
    ]
    _post(alertmanager, alerts)

    deadline = time.monotonic() + 30
    while not _Hook.got and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(5)  # every group's wait (1 s) several times over: what is muted stays unsent
    paged = {a["labels"]["severity"] for a in _Hook.got}
    assert paged == {"critical"}, _Hook.got
    with urllib.request.urlopen(f"{alertmanager}/api/v2/alerts", timeout=10) as r:
        active = {a["labels"]["severity"] for a in json.loads(r.read())}
    assert active == {"critical", "warning", "watch"}


def test_every_provisioned_rule_carries_a_severity_the_policy_routes() -> None:
    # `severity != critical` also matches an alert with no severity label: every rule must
    # carry one, or a rule meant to page would be muted
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert rules
    assert {r["labels"].get("severity") for r in rules} <= {"critical", "warning", "watch"}
