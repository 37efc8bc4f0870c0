"""Datasource settings come from RLVITALS_* variables; bad values are refused with the variable's name."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from serve_process import Served

from grafana.datasource import ConfigError, DatasourceConfig


def test_defaults_use_the_embedded_store() -> None:
    config = DatasourceConfig.from_env({})
    assert config.influx_url is None and not config.uses_influx
    assert config.outbox_path == Path("rlvitals-data") / "outbox.sqlite"
    assert config.token is None


def test_every_variable_is_read() -> None:
    config = DatasourceConfig.from_env(
        {
            "RLVITALS_STORE": "/data",
            "RLVITALS_INFLUX_URL": "http://influx:8086",
            "RLVITALS_INFLUX_API": "V2",
            "RLVITALS_INFLUX_BUCKET": "rl",
            "RLVITALS_INFLUX_ORG": "lab",
            "RLVITALS_INFLUX_TOKEN": "Zt0k3n",
            "RLVITALS_INFLUX_USERNAME": "u",
            "RLVITALS_INFLUX_PASSWORD": "Pw9x",
            "RLVITALS_DATASOURCE_TOKEN": "B34rer-token-0123456789",
            "RLVITALS_DATASOURCE_MAX_BODY": "4096",
            "RLVITALS_DATASOURCE_POINTS": "500",
        }
    )
    assert config.store == Path("/data") and config.influx_api == "v2"
    assert config.influx_database == "rl"  # the bucket, mapped by DBRP, when no database is set
    assert (config.influx_org, config.influx_token, config.token) == (
        "lab",
        "Zt0k3n",
        "B34rer-token-0123456789",
    )
    assert (config.max_body_bytes, config.default_points) == (4096, 500)
    for secret in ("Zt0k3n", "Pw9x", "B34rer-token-0123456789"):
        assert secret not in repr(config)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"RLVITALS_INFLUX_URL": "influx:8086"}, "RLVITALS_INFLUX_URL"),
        ({"RLVITALS_INFLUX_API": "v3"}, "RLVITALS_INFLUX_API"),
        ({"RLVITALS_INFLUX_URL": "http://x", "RLVITALS_INFLUX_API": "v2"}, "RLVITALS_INFLUX_TOKEN"),
        ({"RLVITALS_DATASOURCE_POINTS": "many"}, "RLVITALS_DATASOURCE_POINTS"),
        ({"RLVITALS_DATASOURCE_POINTS": "1"}, "RLVITALS_DATASOURCE_POINTS"),
        ({"RLVITALS_DATASOURCE_MAX_BODY": "10"}, "RLVITALS_DATASOURCE_MAX_BODY"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        DatasourceConfig.from_env(env)


def test_rlvitals_serve_answers_under_waitress(tmp_path: Path) -> None:
    server = Served(tmp_path, env={"RLVITALS_STORE": str(tmp_path)}, clean=True)
    try:
        with urllib.request.urlopen(f"{server.url}/api/runs", timeout=30) as r:
            assert r.status == 200
            assert r.read() == b'{"runs":[]}\n'
    finally:
        server.kill()


def test_rlvitals_serve_refuses_bad_config_without_traceback(tmp_path: Path) -> None:
    env = {"RLVITALS_INFLUX_URL": "nope", "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-m", "rlvitals.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "RLVITALS_INFLUX_URL" in r.stderr and "Traceback" not in r.stderr


# -- the token's minimum strength (issue 39): a guessable token is refused at start ------------

MAKE_ONE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("x", "1 character(s), fewer than 16"),
        ("s3cret-token", "12 character(s), fewer than 16"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "only 1 different characters"),
        ("changemechangeme", "only 7 different characters"),
    ],
)
@pytest.mark.parametrize("setting", ["RLVITALS_DATASOURCE_TOKEN", "RLVITALS_ALERT_WEBHOOK_SECRET"])
def test_a_weak_secret_is_refused_with_the_command_that_makes_one(
    token: str, why: str, setting: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        DatasourceConfig.from_env({setting: token})
    message = str(caught.value)
    assert setting in message and why in message and MAKE_ONE in message
    assert token not in message  # the secret is never echoed


def test_the_command_in_the_message_makes_a_token_that_is_accepted() -> None:
    # the command docs/security.md gives too
    assert MAKE_ONE in (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    made = subprocess.run(
        MAKE_ONE.replace("python", sys.executable, 1),
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    config = DatasourceConfig.from_env({"RLVITALS_DATASOURCE_TOKEN": made})
    assert config.token == made and len(made) >= 40


def test_rlvitals_serve_refuses_a_weak_token_without_traceback(tmp_path: Path) -> None:
    env = {
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_DATASOURCE_TOKEN": "x",
        "PATH": "/usr/bin:/bin",
    }
    r = subprocess.run(
        [sys.executable, "-m", "rlvitals.cli", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "RLVITALS_DATASOURCE_TOKEN is too weak" in r.stderr and MAKE_ONE in r.stderr
