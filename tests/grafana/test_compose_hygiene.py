"""The compose bundle gives each service the least InfluxDB privilege, keeps `.env` out of git,
sets Grafana's secret key, the datasource bounds the work of one request, and it answers the
Host names Grafana and the healthcheck reach it by (and no others)."""

from __future__ import annotations

import itertools
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask

import exporter
from grafana.datasource import DatasourceConfig
from grafana.datasource.config import HOSTS_SETTING

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data["services"]


def test_dot_env_is_ignored_by_git() -> None:
    done = subprocess.run(
        ["git", "check-ignore", "-q", ".env"], cwd=ROOT, capture_output=True, check=False
    )
    assert done.returncode == 0


def test_only_influxdb_sees_the_admin_password(services: dict[str, Any]) -> None:
    for name, service in services.items():
        text = yaml.safe_dump(service.get("environment", {}))
        assert ("INFLUXDB_ADMIN_PASSWORD" in text) == (name == "influxdb"), name


def test_each_service_queries_influxdb_as_its_least_privilege_user(
    services: dict[str, Any],
) -> None:
    """The exporter as the user 10-exporter-user.sh makes (ALL on the database: it writes and
    rolls up), the datasource and Grafana as the image's read-only user (GRANT READ); what each
    can do is tried on a real InfluxDB in test_compose_influx_users.py."""
    influx = services["influxdb"]["environment"]
    assert influx["INFLUXDB_HTTP_AUTH_ENABLED"] == "true"
    script = (ROOT / "provisioning" / "influxdb" / "10-exporter-user.sh").read_text()
    assert 'GRANT ALL ON \\"$INFLUXDB_DB\\" TO \\"$RLVITALS_EXPORTER_USER\\"' in script
    assert influx["RLVITALS_EXPORTER_USER"].startswith("${INFLUXDB_EXPORTER_USER:?")
    assert influx["INFLUXDB_READ_USER"].startswith("${INFLUXDB_READ_USER:?")
    exporter_env = services["exporter"]["environment"]
    assert exporter_env["RLVITALS_INFLUX_USERNAME"].startswith("${INFLUXDB_EXPORTER_USER:?")
    assert exporter_env["RLVITALS_INFLUX_PASSWORD"].startswith("${INFLUXDB_EXPORTER_PASSWORD:?")
    datasource_env = services["datasource"]["environment"]
    assert datasource_env["RLVITALS_INFLUX_USERNAME"].startswith("${INFLUXDB_READ_USER:?")
    assert datasource_env["RLVITALS_INFLUX_PASSWORD"].startswith("${INFLUXDB_READ_PASSWORD:?")
    grafana_env = services["grafana"]["environment"]
    assert grafana_env["INFLUXDB_READ_USER"].startswith("${INFLUXDB_READ_USER:?")
    provisioned = yaml.safe_load(
        (ROOT / "provisioning" / "datasources" / "rlvitals.yaml").read_text()
    )
    influxql = next(d for d in provisioned["datasources"] if d["type"] == "influxdb")
    assert influxql["user"] == "${INFLUXDB_READ_USER}"
    assert influxql["secureJsonData"] == {"password": "${INFLUXDB_READ_PASSWORD}"}
    for name in ("exporter", "datasource"):
        assert services[name]["environment"]["RLVITALS_INFLUX_API"] == "v1", name


def test_grafana_secret_key_comes_from_env(services: dict[str, Any]) -> None:
    key = services["grafana"]["environment"]["GF_SECURITY_SECRET_KEY"]
    assert key.startswith("${GRAFANA_SECRET_KEY:?")
    assert "GRAFANA_SECRET_KEY=" in (ROOT / ".env.example").read_text()


def test_readme_never_tells_host_jobs_to_bind_all_interfaces() -> None:
    for doc in ("README.md", "docs/compose.md"):
        assert "RLVITALS_PROMETHEUS_HOST=0.0.0.0" not in (ROOT / doc).read_text()


def test_the_token_can_come_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc123\n")
    env = {
        "RLVITALS_INFLUX_URL": "http://influxdb:8086",
        "RLVITALS_INFLUX_API": "v2",
        "RLVITALS_INFLUX_ORG": "o",
        "RLVITALS_INFLUX_BUCKET": "b",
        "RLVITALS_INFLUX_TOKEN_FILE": str(tmp_path / "token"),
    }
    assert exporter.ExporterSettings.from_env(env).influx_token == "abc123"
    assert DatasourceConfig.from_env(env).influx_token == "abc123"
    env["RLVITALS_INFLUX_TOKEN_FILE"] = str(tmp_path / "missing")
    with pytest.raises(exporter.ConfigError, match="RLVITALS_INFLUX_TOKEN_FILE"):
        exporter.ExporterSettings.from_env(env)


def test_one_query_request_is_bounded_in_targets(app: Flask) -> None:
    targets = [{"refId": f"A{i}", "target": "series", "payload": {}} for i in range(17)]
    r = app.test_client().post("/query", json={"targets": targets})
    assert r.status_code == 400
    assert "at most 16" in r.get_json()["error"]


def _served_hosts(services: dict[str, Any]) -> dict[str, DatasourceConfig]:
    """Each service that runs `rlvitals serve`, with the Host allowlist its environment sets."""
    out = {}
    for name, service in services.items():
        command = service.get("command") or []
        if command[:1] == ["serve"]:
            env = service.get("environment", {})
            flags = [v for k, v in itertools.pairwise(command) if k == "--allow-host"]
            public = _env_example()["RLVITALS_PUBLIC_URL"]
            assert env.get("RLVITALS_PUBLIC_URL", "").startswith("${RLVITALS_PUBLIC_URL"), name
            config = DatasourceConfig.from_env(
                {HOSTS_SETTING: str(env.get(HOSTS_SETTING, "")), "RLVITALS_PUBLIC_URL": public}
            )
            out[name] = config.replace(allowed_hosts=(*config.allowed_hosts, *flags))
    return out


def test_every_url_the_stack_uses_for_the_datasource_names_an_allowed_host(
    services: dict[str, Any],
) -> None:
    served = _served_hosts(services)
    assert served, "no service runs `rlvitals serve`"
    provisioned = yaml.safe_load(
        (ROOT / "provisioning" / "datasources" / "rlvitals.yaml").read_text()
    )
    urls = [
        urllib.parse.urlsplit(ds["url"])
        for ds in provisioned["datasources"]
        if urllib.parse.urlsplit(ds["url"]).hostname in served
    ]
    assert urls, "no provisioned Grafana datasource points at a service running `rlvitals serve`"
    for url in urls:
        assert served[str(url.hostname)].allows_host(url.netloc), (
            f"Grafana reaches {url.geturl()}, but the {url.hostname} service does not answer "
            f"Host {url.netloc}: add it to {HOSTS_SETTING} in docker-compose.yml"
        )
    for name, config in served.items():
        probe = " ".join(services[name]["healthcheck"]["test"])
        for url in re.findall(r"https?://[^'\"\s]+", probe):
            netloc = urllib.parse.urlsplit(url).netloc
            assert config.allows_host(netloc), f"{name}'s healthcheck sends Host {netloc}"
        # what a person's browser opens (term pages, runbook links): RLVITALS_PUBLIC_URL
        assert config.allows_host(urllib.parse.urlsplit(config.public_url or "").netloc), name
        assert config.allows_host("rl.example.org") is False
        proxied = config.replace(public_url="https://rl.example.org")
        assert proxied.allows_host("rl.example.org"), "a reverse proxy's public name is refused"
        assert not config.allows_host("attacker-rebind.example"), f"{name} answers any Host"


def _env_example() -> dict[str, str]:
    out = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            out[key.strip()] = value.split("#", 1)[0].strip()
    return out
