"""The alert webhook's shared secret: how Grafana signs a notification and how the datasource's
receiver checks it. Spelled here once for both sides: the provisioned contact point
(`grafana.dashboards_gen.alerts`) and `POST /api/alert-notifications`
(`grafana.datasource.api_alert_notifications`).

Grafana's webhook contact point signs its request when its `hmacConfig` has a secret
(grafana/alerting, http/hmac.go, `HMACRoundTripper.sign`, used by http/client.go when the
webhook has an HMAC config): HMAC-SHA256 keyed with the secret over `<timestamp>:<body>`, the
timestamp (Unix seconds) in the configured timestamp header, the lower-case hex digest in the
configured signature header. Both header names are set in the provisioning file, so the
receiver does not depend on Grafana's default name (which changed between versions of that
file). The secret itself never travels: a webhook URL pointed elsewhere learns a signature of
one body, and the receiver takes each signature once and only within `MAX_SKEW_S` of its
timestamp. Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = [
    "MAX_SKEW_S",
    "SECRET_SETTING",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "signature",
    "signature_problem",
]

SECRET_SETTING = "RLVITALS_ALERT_WEBHOOK_SECRET"
SIGNATURE_HEADER = "X-Grafana-Alerting-Signature"
TIMESTAMP_HEADER = "X-Grafana-Alerting-Timestamp"
MAX_SKEW_S = 300


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The signature Grafana sends for `body` at `timestamp` (Unix seconds, as text)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b":", hashlib.sha256)
    mac.update(body)
    return mac.hexdigest()


def signature_problem(
    secret: str, body: bytes, timestamp: str | None, sent: str | None, now: float
) -> str | None:
    """Why a request with these headers is not a notification signed with `secret` now, or
    None when it is."""
    if not sent or not timestamp:
        missing = [h for h, v in ((SIGNATURE_HEADER, sent), (TIMESTAMP_HEADER, timestamp)) if not v]
        return f"no {' and no '.join(missing)} header"
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        return f"{TIMESTAMP_HEADER} is not Unix seconds"
    if abs(now - int(timestamp)) > MAX_SKEW_S:
        return (
            f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_S} s from this server's clock "
            "(an old notification sent again, or a clock that is off)"
        )
    expected = signature(secret, timestamp, body)
    if not hmac.compare_digest(sent.strip().lower().encode(), expected.encode()):
        return f"{SIGNATURE_HEADER} does not match the body signed with the secret"
    return None
