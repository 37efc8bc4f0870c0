"""`rlvitals doctor`: check configuration and connectivity, and say what is wrong and how to fix it.

Each check returns a `Finding`; nothing here raises for a bad setting, because reporting every
problem at once is the point. Network checks are bounded by a short timeout.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import registry
from exporter.config import ExporterSettings, redact_url
from exporter.errors import ExporterError
from exporter.store.outbox import Outbox

__all__ = ["Finding", "describe_settings", "diagnose"]

_TIMEOUT = 3.0


@dataclass(frozen=True)
class Finding:
    """One check: what was checked, whether it is fine, and what to do when it is not."""

    check: str
    ok: bool
    detail: str
    fix: str = ""

    def __str__(self) -> str:
        mark = "ok " if self.ok else "FAIL"
        line = f"[{mark}] {self.check}: {self.detail}"
        return line + (f"\n       fix: {self.fix}" if self.fix and not self.ok else "")


def diagnose(environ: Mapping[str, str], registry_paths: tuple[str, ...] = ()) -> list[Finding]:
    """Every finding, in the order a user would fix them."""
    findings = [_registry(registry_paths)]
    try:
        settings = ExporterSettings.from_env(environ)
    except ExporterError as exc:
        findings.append(
            Finding(
                "exporter settings", False, str(exc), "correct the RLVITALS_* variable named above"
            )
        )
        return findings
    findings.append(Finding("exporter settings", True, describe_settings(settings)))
    findings.append(_store(settings))
    findings.append(influx := _influx(settings))
    from .doctor_rollups import rollup_findings  # it builds on the findings here

    if findings[-2].ok:
        rollups = rollup_findings(settings if influx.ok else settings.replace(influx_url=None))
        findings += rollups
    findings.append(_prometheus(settings))
    return findings


def describe_settings(settings: ExporterSettings) -> str:
    """The settings in plain words, one per line (secrets left out), for people to read."""
    if settings.influx_url is None:
        influx = "none: the embedded store is the database (set RLVITALS_INFLUX_URL to send)"
    elif settings.influx_api == "v2":
        influx = (
            f"{settings.influx_url} (API v2, org {settings.influx_org or '-'}, bucket "
            f"{settings.influx_bucket or '-'}, token {'set' if settings.influx_token else 'not set'})"
        )
    else:
        user = settings.influx_username or "no user"
        influx = f"{settings.influx_url} (API v1, database {settings.influx_database}, {user})"
    prometheus = (
        "off (set RLVITALS_PROMETHEUS_PORT to serve /metrics)"
        if settings.prometheus_port is None
        else f"/metrics on {settings.prometheus_host}:{settings.prometheus_port}"
    )
    lines = [
        f"store: {settings.store}",
        f"InfluxDB: {influx}",
        f"Prometheus: {prometheus}",
        f"bad-input policy: {settings.policy}",
        f"disk budget: {settings.disk_budget_mb:g} MB; queue: {settings.queue_size:,} calls; "
        f"batch: {settings.batch_size:,} rows; flush timeout: {settings.flush_timeout:g} s",
    ]
    return "\n       ".join(lines)


def _registry(paths: tuple[str, ...]) -> Finding:
    try:
        reg = registry.load_paths(paths)
    except registry.RegistryInvalid as exc:
        return Finding(
            "registry",
            False,
            f"{len(exc.problems)} problem(s), first: {exc.problems[0]}",
            "run `rlvitals validate` for the full list",
        )
    return Finding(
        "registry",
        True,
        f"{len(reg.metrics)} metrics, {len(reg.terms)} terms, {len(reg.rules)} rules",
    )


def _store(settings: ExporterSettings) -> Finding:
    path = settings.outbox_path
    if not path.exists():
        existing = next(p for p in (path, *path.parents) if p.exists())
        if not os.access(existing, os.W_OK):
            return Finding(
                "embedded store",
                False,
                f"{existing} is not writable",
                "set RLVITALS_STORE to a writable folder",
            )
        return Finding(
            "embedded store", True, f"{path} does not exist yet; it will be created on first use"
        )
    try:
        outbox = Outbox(path, budget_bytes=settings.disk_budget_bytes)
    except ExporterError as exc:
        return Finding(
            "embedded store", False, str(exc), "set RLVITALS_STORE to a writable local folder"
        )
    try:
        backlog = outbox.backlog()
        size = outbox.size_bytes()
        runs = len(outbox.runs())
    finally:
        outbox.close()
    if not os.access(path.parent, os.W_OK):
        return Finding(
            "embedded store",
            False,
            f"{path.parent} is not writable",
            "set RLVITALS_STORE to a writable folder",
        )
    used = f"{size / 2**20:.1f} of {settings.disk_budget_mb:.0f} MB"
    if size >= settings.disk_budget_bytes:
        return Finding(
            "embedded store",
            False,
            f"{path}: {used}, at the disk budget; new samples are refused",
            "raise RLVITALS_DISK_BUDGET_MB or move the file away",
        )
    unsent = f", {backlog} rows not yet sent to InfluxDB" if settings.influx_url and backlog else ""
    return Finding("embedded store", True, f"{path}: {runs} run(s), {used}{unsent}")


def _get(url: str, headers: Mapping[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def _influx(settings: ExporterSettings) -> Finding:
    if not settings.influx_url:
        return Finding(
            "InfluxDB",
            True,
            "not configured (RLVITALS_INFLUX_URL unset): the embedded store is used",
        )
    base = settings.influx_url.rstrip("/")
    name = f"InfluxDB {settings.influx_api} at {redact_url(base)}"
    headers: dict[str, str] = {}
    if settings.influx_api == "v2":
        headers["Authorization"] = f"Token {settings.influx_token or ''}"
    elif settings.influx_username:
        pair = f"{settings.influx_username}:{settings.influx_password or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    try:
        status, _ = _get(f"{base}/ping", headers)
    except (OSError, ValueError) as exc:
        return Finding(
            name, False, f"unreachable ({exc})", "start InfluxDB or correct RLVITALS_INFLUX_URL"
        )
    if status not in (200, 204):
        return Finding(
            name, False, f"/ping answered {status}", "check that the URL points at InfluxDB"
        )
    check: Callable[[str, Mapping[str, str], ExporterSettings], Finding] = (
        _influx_v2_bucket if settings.influx_api == "v2" else _influx_v1_database
    )
    return check(base, headers, settings)


def _influx_v1_database(
    base: str, headers: Mapping[str, str], settings: ExporterSettings
) -> Finding:
    name = f"InfluxDB v1 at {base}"
    query = urllib.parse.urlencode({"q": "SHOW DATABASES"})
    status, body = _get(f"{base}/query?{query}", headers)
    if status == 401:
        return Finding(
            name,
            False,
            "authentication failed",
            "set RLVITALS_INFLUX_USERNAME / RLVITALS_INFLUX_PASSWORD",
        )
    try:
        series = json.loads(body)["results"][0].get("series", [])
        names = {row[0] for s in series for row in s.get("values", [])}
    except (ValueError, KeyError, IndexError, TypeError):
        return Finding(
            name,
            False,
            f"SHOW DATABASES answered {status} with an unexpected body",
            "check the URL",
        )
    if settings.influx_database not in names:
        return Finding(
            name,
            False,
            f"database {settings.influx_database!r} does not exist",
            f'CREATE DATABASE "{settings.influx_database}" or set RLVITALS_INFLUX_DATABASE',
        )
    return Finding(name, True, f"reachable; database {settings.influx_database!r} exists")


def _influx_v2_bucket(base: str, headers: Mapping[str, str], settings: ExporterSettings) -> Finding:
    name = f"InfluxDB v2 at {base}"
    query = urllib.parse.urlencode(
        {"name": settings.influx_bucket or "", "org": settings.influx_org or ""}
    )
    status, body = _get(f"{base}/api/v2/buckets?{query}", headers)
    if status == 401:
        return Finding(
            name,
            False,
            "the token was refused",
            "set RLVITALS_INFLUX_TOKEN to a token with write access",
        )
    if status == 404:
        return Finding(
            name, False, "no /api/v2 (this is InfluxDB 1.x?)", "set RLVITALS_INFLUX_API=v1"
        )
    try:
        found = bool(json.loads(body).get("buckets"))
    except (ValueError, AttributeError):
        found = False
    if status != 200 or not found:
        return Finding(
            name,
            False,
            f"bucket {settings.influx_bucket!r} not found in org {settings.influx_org!r}",
            "create the bucket or correct RLVITALS_INFLUX_ORG / RLVITALS_INFLUX_BUCKET",
        )
    return Finding(name, True, f"reachable; bucket {settings.influx_bucket!r} exists")


def _prometheus(settings: ExporterSettings) -> Finding:
    if settings.prometheus_port is None:
        return Finding("Prometheus endpoint", True, "off (RLVITALS_PROMETHEUS_PORT unset)")
    where = f"{settings.prometheus_host}:{settings.prometheus_port}"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((settings.prometheus_host, settings.prometheus_port))
        except OSError:
            try:
                status, body = _get(f"http://{where}/metrics", {})
            except OSError:
                status, body = 0, b""
            if status == 200 and b"rlvitals_" in body:
                return Finding(
                    "Prometheus endpoint", True, f"{where} is already serving rlvitals metrics"
                )
            return Finding(
                "Prometheus endpoint",
                False,
                f"{where} is in use by something else",
                "choose a free port with RLVITALS_PROMETHEUS_PORT",
            )
    return Finding(
        "Prometheus endpoint", True, f"{where} is free; the exporter will serve /metrics there"
    )
