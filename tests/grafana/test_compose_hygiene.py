"""The compose bundle gives each service the least InfluxDB privilege, keeps `.env` out of git,
sets Grafana's secret key, and the datasource bounds the work of one request."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask

import exporter
from grafana.datasource import DatasourceConfig

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


def test_only_influxdb_sees_the_admin_token(services: dict[str, Any]) -> None:
    for name, service in services.items():
        text = yaml.safe_dump(service.get("environment", {}))
        if name == "influxdb":
            assert "INFLUXDB_TOKEN" in text
        else:
            assert "INFLUXDB_TOKEN}" not in text and "${INFLUXDB_TOKEN" not in text, name


def test_each_service_mounts_only_its_own_least_privilege_token(
    services: dict[str, Any],
) -> None:
    script = (ROOT / "provisioning" / "influxdb" / "20-tokens.sh").read_text()
    grants = dict(re.findall(r"make_token /tokens/(\w+)/token \"[^\"]+\" (--\S+)", script))
    assert grants == {
        "exporter": "--write-bucket",
        "datasource": "--read-bucket",
        "grafana": "--read-bucket",
    }
    for name in grants:
        mounts = [v for v in services[name]["volumes"] if v.startswith("influxdb-token-")]
        assert mounts == [f"influxdb-token-{name}:/run/influx:ro"], name
    influx_mounts = services["influxdb"]["volumes"]
    assert {f"influxdb-token-{n}:/tokens/{n}" for n in grants} <= set(influx_mounts)
    for name in ("exporter", "datasource"):
        assert services[name]["environment"]["RLVITALS_INFLUX_TOKEN_FILE"] == "/run/influx/token"
    assert "/run/influx/token" in " ".join(services["grafana"]["entrypoint"])


def test_grafana_secret_key_comes_from_env(services: dict[str, Any]) -> None:
    key = services["grafana"]["environment"]["GF_SECURITY_SECRET_KEY"]
    assert key.startswith("${GRAFANA_SECRET_KEY:?")
    assert "GRAFANA_SECRET_KEY=" in (ROOT / ".env.example").read_text()


def test_readme_never_tells_host_jobs_to_bind_all_interfaces() -> None:
    assert "RLVITALS_PROMETHEUS_HOST=0.0.0.0" not in (ROOT / "README.md").read_text()


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
