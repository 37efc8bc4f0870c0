"""A receiver for Grafana's alert notifications, so the bundle alerts somewhere without one.

- `POST /api/alert-notifications`: a Grafana webhook notification (the JSON body of Grafana's
  webhook contact point: `status`, `alerts[]` with `status`, `labels`, `annotations`). Each alert
  is written to the server log as one line (`docker compose logs datasource` shows them) and kept
  in memory, the newest `KEPT` first. 200 `{"received": N}`; 400 naming what is malformed.
- `GET /api/alert-notifications`: the kept alerts, newest first (run data: behind the token).

Compose points the provisioned contact point here unless `RLVITALS_ALERT_WEBHOOK_URL` names a
receiver of yours. The POST needs no token (Grafana's webhook would otherwise carry the
datasource token to whatever URL a user puts there); what guards it is the JSON-only body (a
cross-site page cannot send one without a CORS preflight, which this server never grants), the
Host allowlist and the bind address. Grafana sends `Content-Type: application/json` unless told
otherwise (pkg/services/notifications/webhook.go, `sendWebRequestSync`) and takes any 2xx.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from .errors import BadRequest

__all__ = ["KEPT", "PATH", "NotificationLog", "blueprint"]

PATH = "/api/alert-notifications"
KEPT = 200
_TEXT = 500  # characters kept of a label or annotation
_KEY = "rlvitals.alert_notifications"

blueprint = Blueprint("alert_notifications", __name__)
_log = logging.getLogger("rlvitals.alerts")


class NotificationLog:
    """The alerts this app received, newest first (thread-safe; one per app)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=kept)
        self._lock = threading.Lock()

    def add(self, alerts: list[dict[str, Any]]) -> None:
        with self._lock:
            for alert in alerts:
                self._items.appendleft(alert)

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items)


def _notification_log(app: Flask) -> NotificationLog:
    got = app.extensions.get(_KEY)
    if got is None:
        got = app.extensions[_KEY] = NotificationLog()
    assert isinstance(got, NotificationLog)
    return got


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadRequest(f"{where} must be an object of strings (label or annotation -> text)")
    return {k[:_TEXT]: v[:_TEXT] for k, v in value.items()}


def _alert(raw: Any, i: int) -> dict[str, Any]:
    where = f"alerts[{i}]"
    if not isinstance(raw, Mapping):
        raise BadRequest(f"{where} must be an object (Grafana's webhook alert)")
    status = raw.get("status")
    if status not in ("firing", "resolved"):
        raise BadRequest(f"{where}.status must be 'firing' or 'resolved', got {status!r:.100}")
    starts = raw.get("startsAt")
    return {
        "status": status,
        "labels": _strings(raw.get("labels"), f"{where}.labels"),
        "annotations": _strings(raw.get("annotations"), f"{where}.annotations"),
        "startsAt": starts[:40] if isinstance(starts, str) else None,
    }


def _line(alert: Mapping[str, Any]) -> str:
    labels = alert["labels"]
    name = labels.get("alertname", "(no alertname)")
    where = " ".join(f"{k}={labels[k]}" for k in ("run", "severity", "metric") if k in labels)
    summary = alert["annotations"].get("summary", "")
    return f"alert {alert['status']}: {name} {where}".rstrip() + (f": {summary}" if summary else "")


@blueprint.post(PATH)
def receive() -> tuple[Response, int]:
    body = request.get_json(silent=True)
    if not isinstance(body, Mapping) or not isinstance(body.get("alerts"), list):
        raise BadRequest(
            f"POST {PATH} takes Grafana's webhook notification: a JSON object with an 'alerts' list"
        )
    alerts = [_alert(a, i) for i, a in enumerate(body["alerts"])]
    for alert in alerts:
        _log.warning("%s", _line(alert))
    _notification_log(current_app).add(alerts)
    return jsonify({"received": len(alerts)}), 200


@blueprint.get(PATH)
def listed() -> Response:
    return jsonify({"alerts": _notification_log(current_app).items()})
