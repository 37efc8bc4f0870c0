"""Credentials never show: a URL carrying them is refused with a message that hides them, and
every place that prints the InfluxDB URL prints it redacted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import exporter
import registry
from exporter.config import redact_url
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.config import ConfigError as DatasourceConfigError

SECRET = "s3cr3t-pw"
URLS = [
    f"http://admin:{SECRET}@127.0.0.1:9",
    f"http://127.0.0.1:9/?u=admin&p={SECRET}",
    f"https://127.0.0.1:9/?token={SECRET}",
]


@pytest.mark.parametrize("url", URLS)
def test_exporter_settings_refuse_credentials_in_the_url_without_printing_them(url: str) -> None:
    with pytest.raises(exporter.ConfigError) as info:
        exporter.ExporterSettings(influx_url=url)
    assert SECRET not in str(info.value)
    assert "RLVITALS_INFLUX_PASSWORD" in str(info.value)


@pytest.mark.parametrize("url", URLS)
def test_datasource_config_refuses_credentials_in_the_url_without_printing_them(
    url: str,
) -> None:
    with pytest.raises(DatasourceConfigError) as info:
        DatasourceConfig(influx_url=url)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("url", URLS)
def test_doctor_and_import_never_print_credentials_from_the_url(tmp_path: Path, url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(RLVITALS_STORE=str(tmp_path), RLVITALS_INFLUX_URL=url)
    (tmp_path / "m.jsonl").write_text('{"step": 1, "losses/clipfrac": 0.1}\n')
    for args in (["doctor"], ["import", str(tmp_path / "m.jsonl")]):
        done = subprocess.run(
            [sys.executable, "-m", "rlvitals", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode != 0
        assert SECRET not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


def test_redacted_urls_keep_what_is_needed_to_find_the_server() -> None:
    assert redact_url(f"http://a:{SECRET}@db.example:8086/x?db=rl&p={SECRET}") == (
        "http://***@db.example:8086/x?db=rl&p=***"
    )


def test_health_is_503_with_no_secret_when_the_store_is_down(reg: registry.Registry) -> None:
    config = DatasourceConfig(
        influx_url="http://127.0.0.1:9",
        influx_password=SECRET,
        influx_username="u",
        influx_timeout=2,
    )
    response = create_app(config, reg).test_client().get("/api/health")
    assert response.status_code == 503
    assert response.get_json()["status"] == "degraded"
    assert SECRET not in response.get_data(as_text=True)
