"""A receiver for Grafana's alert notifications, so the bundle alerts somewhere without one.

- `POST /api/alert-notifications`: a Grafana webhook notification (the JSON body of Grafana's
  webhook contact point: `status`, `alerts[]` with `status`, `labels`, `annotations`), signed
  with `RLVITALS_ALERT_WEBHOOK_SECRET` (`grafana.alert_webhook`: Grafana's HMAC signature and
  its timestamp). Each alert is written to the server log as one line (`docker compose logs
  datasource` shows them) and kept in memory, the newest `KEPT` first. 200 `{"received": N}`;
  400 naming what is malformed; 401 when the signature is missing, wrong, stale or seen
  before; 403 when no secret is set (nothing is taken then).
- `GET /api/alert-notifications`: the kept alerts, newest first (run data: behind the token).

Compose points the provisioned contact point here unless `RLVITALS_ALERT_WEBHOOK_URL` names a
receiver of yours, and gives Grafana and this server the same secret. The POST carries no
datasource token (Grafana's webhook would otherwise carry it to whatever URL a user puts
there); its own secret never travels either, only a signature of each body. Refused posts are
counted (`/api/health`, `alert_notifications`) and logged as the first one's reason and then
one line a minute at most, so whoever posts unsigned notifications cannot flood the log. The
JSON-only body (a cross-site page cannot send one without a CORS preflight, which this server
never grants), the Host allowlist and the bind address guard it too. Grafana sends
`Content-Type: application/json` unless told otherwise (pkg/services/notifications/webhook.go,
`sendWebRequestSync`) and takes any 2xx.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from grafana.alert_webhook import (
    MAX_SKEW_S,
    SECRET_SETTING,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature_problem,
)

from .errors import BadRequest, Forbidden, Unauthorized
from .login_guard import request_client
from .services import services

__all__ = ["KEPT", "PATH", "NotificationLog", "blueprint", "notification_counts"]

PATH = "/api/alert-notifications"
KEPT = 200
_TEXT = 500  # characters kept of a label or annotation
_KEY = "rlvitals.alert_notifications"
_REPORT_EVERY_S = 60.0

blueprint = Blueprint("alert_notifications", __name__)
_log = logging.getLogger("rlvitals.alerts")


class NotificationLog:
    """The alerts this app received, newest first, and the posts it refused (thread-safe; one
    per app)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=kept)
        self._lock = threading.Lock()
        self.received = 0
        self.refused = 0
        self._unreported = 0
        self._last_report = -_REPORT_EVERY_S
        self._seen: OrderedDict[str, float] = OrderedDict()  # signature -> when taken

    def first_use(self, signature: str, now: float) -> bool:
        """Whether `signature` was not taken before (within the window a timestamp is good)."""
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now - 2 * MAX_SKEW_S:
                self._seen.popitem(last=False)
            if signature in self._seen:
                return False
            self._seen[signature] = now
            return True

    def refuse(self, why: str, client: str) -> None:
        """Count a refused post; log it when none was logged in the last minute (with how many
        were refused since), so unsigned posts cannot flood the log."""
        now = time.monotonic()
        with self._lock:
            self.refused += 1
            self._unreported += 1
            if now - self._last_report < _REPORT_EVERY_S:
                return
            count, self._unreported, self._last_report = self._unreported, 0, now
        _log.warning(
            "refused %d alert notification post(s) in the last minute at most; the latest from "
            "%s: %s (counts in /api/health)",
            count,
            client,
            why,
        )

    def add(self, alerts: list[dict[str, Any]]) -> None:
        with self._lock:
            self.received += len(alerts)
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


def notification_counts(app: Flask) -> dict[str, int]:
    """For `/api/health`: notifications taken and posts refused."""
    log = _notification_log(app)
    return {"received": log.received, "refused": log.refused}


def _check_signature(log: NotificationLog) -> None:
    secret = services().config.alert_webhook_secret
    client = request_client()
    if secret is None:
        log.refuse(f"{SECRET_SETTING} is not set", client)
        raise Forbidden(
            f"POST {PATH} takes only notifications signed with {SECRET_SETTING}, and this "
            f"server has none: set it here and as the HMAC secret of Grafana's webhook contact "
            f"point (signature header {SIGNATURE_HEADER}, timestamp header {TIMESTAMP_HEADER}; "
            "compose and provisioning/alerting do both)"
        )
    sent = request.headers.get(SIGNATURE_HEADER)
    now = time.time()
    why = signature_problem(
        secret, request.get_data(cache=True), request.headers.get(TIMESTAMP_HEADER), sent, now
    )
    if why is None and not log.first_use(str(sent).strip().lower(), now):
        why = "this signed notification was taken before (sent again)"
    if why is not None:
        log.refuse(why, client)
        raise Unauthorized(
            f"POST {PATH} takes only notifications signed with {SECRET_SETTING}: {why}. Give "
            f"Grafana's webhook contact point the same secret as its HMAC secret, with signature "
            f"header {SIGNATURE_HEADER} and timestamp header {TIMESTAMP_HEADER}"
        )


@blueprint.post(PATH)
def receive() -> tuple[Response, int]:
    log = _notification_log(current_app)
    _check_signature(log)
    body = request.get_json(silent=True)
    if not isinstance(body, Mapping) or not isinstance(body.get("alerts"), list):
        raise BadRequest(
            f"POST {PATH} takes Grafana's webhook notification: a JSON object with an 'alerts' list"
        )
    alerts = [_alert(a, i) for i, a in enumerate(body["alerts"])]
    for alert in alerts:
        _log.warning("%s", _line(alert))
    log.add(alerts)
    return jsonify({"received": len(alerts)}), 200


@blueprint.get(PATH)
def listed() -> Response:
    return jsonify({"alerts": _notification_log(current_app).items()})
