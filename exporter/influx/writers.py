"""InfluxDB writers: the same line-protocol bytes go to 1.x `/write` or to 2.x/3.x `/api/v2/write`."""

from __future__ import annotations

import base64
import http.client
import logging
import urllib.parse
from typing import Any, Protocol

from ..config import ExporterSettings, redact_url
from ..errors import ConfigError, WriteError

__all__ = ["InfluxV1Writer", "InfluxV2Writer", "Writer", "make_writer"]

_log = logging.getLogger(__name__)


class Writer(Protocol):
    """Something that stores a line-protocol body (precision: seconds) or raises WriteError."""

    def write(self, body: bytes) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


def _status_error(where: str, status: int, detail: str) -> WriteError:
    detail = detail.strip()[:1000]
    if status == 400:
        return WriteError(
            f"{where} refused the data (HTTP 400: {detail})",
            status=status,
            retryable=False,
            detail=detail,
        )
    if status in (401, 403):
        hint = "check RLVITALS_INFLUX_USERNAME/PASSWORD or RLVITALS_INFLUX_TOKEN"
    elif status == 404:
        hint = "check the database/bucket exists (RLVITALS_INFLUX_DATABASE or _BUCKET)"
    else:
        hint = "will retry"
    return WriteError(f"{where} answered HTTP {status}: {detail} ({hint})", status=status)


class InfluxV1Writer:
    """InfluxDB 1.x: `POST /write?db=D[&rp=R]&precision=s` over one keep-alive connection.

    Credentials, when given, travel in an HTTP Basic `Authorization` header (1.x accepts it like
    the `u`/`p` query parameters) so they never appear in a URL or a server access log.
    """

    def __init__(
        self,
        url: str,
        database: str,
        *,
        retention_policy: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"RLVITALS_INFLUX_URL={redact_url(url)!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._timeout = timeout
        query = {"db": database, "precision": "s"}
        if retention_policy:
            query["rp"] = retention_policy
        self._path = f"{self._base}/write?{urllib.parse.urlencode(query)}"
        self._headers = {"Content-Type": "text/plain; charset=utf-8", "Connection": "keep-alive"}
        if username:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._conn: http.client.HTTPConnection | None = None
        self._where = f"InfluxDB at {redact_url(url)} (database {database!r})"

    def describe(self) -> str:
        return self._where

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def write(self, body: bytes) -> None:
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request("POST", self._path, body=body, headers=self._headers)
                response = conn.getresponse()
                detail = response.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                # A keep-alive connection the server closed: one immediate retry on a new one.
                if attempt == 0 and isinstance(
                    exc, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError
                ):
                    continue
                raise WriteError(f"{self._where} is unreachable: {exc}") from exc
            if 200 <= response.status < 300:
                return
            if response.getheader("Connection", "").lower() == "close":
                self.close()
            raise _status_error(self._where, response.status, detail)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class InfluxV2Writer:
    """InfluxDB 2.x/3.x through `influxdb-client`'s synchronous write API (precision s)."""

    def __init__(
        self, url: str, *, org: str, bucket: str, token: str, timeout: float = 10.0
    ) -> None:
        from influxdb_client.client.influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS

        self._org = org
        self._bucket = bucket
        self._client: Any = InfluxDBClient(
            url=url, token=token, org=org, timeout=int(timeout * 1000), retries=0
        )
        self._api: Any = self._client.write_api(write_options=SYNCHRONOUS)
        self._where = f"InfluxDB at {redact_url(url)} (org {org!r}, bucket {bucket!r})"

    def describe(self) -> str:
        return self._where

    def write(self, body: bytes) -> None:
        from influxdb_client.domain.write_precision import WritePrecision
        from influxdb_client.rest import ApiException

        try:
            self._api.write(
                bucket=self._bucket, org=self._org, record=body, write_precision=WritePrecision.S
            )
        except ApiException as exc:
            detail = (
                exc.body.decode("utf-8", "replace")
                if isinstance(exc.body, bytes)
                else str(exc.body)
            )
            raise _status_error(self._where, int(exc.status or 0), detail) from exc
        except (TimeoutError, OSError) as exc:
            raise WriteError(f"{self._where} is unreachable: {exc}") from exc
        except Exception as exc:  # urllib3 wraps connection failures in its own types
            raise WriteError(f"{self._where} is unreachable: {exc}") from exc

    def close(self) -> None:
        self._api.close()
        self._client.close()


def make_writer(settings: ExporterSettings) -> Writer | None:
    """The writer the settings ask for; None when RLVITALS_INFLUX_URL is unset."""
    if not settings.influx_url:
        return None
    if settings.influx_api == "v2":
        assert settings.influx_org and settings.influx_bucket and settings.influx_token
        return InfluxV2Writer(
            settings.influx_url,
            org=settings.influx_org,
            bucket=settings.influx_bucket,
            token=settings.influx_token,
            timeout=settings.flush_timeout,
        )
    return InfluxV1Writer(
        settings.influx_url,
        settings.influx_database,
        retention_policy=settings.influx_retention_policy,
        username=settings.influx_username,
        password=settings.influx_password,
        timeout=settings.flush_timeout,
    )
