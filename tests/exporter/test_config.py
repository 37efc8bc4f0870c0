"""Settings come from RLVITALS_* variables, reject bad values clearly and never show secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter import ConfigError, ExporterSettings


def test_settings_read_every_rlvitals_variable() -> None:
    s = ExporterSettings.from_env(
        {
            "RLVITALS_STORE": "/data/store",
            "RLVITALS_INFLUX_URL": "http://influx:8086",
            "RLVITALS_INFLUX_API": "V2",
            "RLVITALS_INFLUX_ORG": "lab",
            "RLVITALS_INFLUX_BUCKET": "rl",
            "RLVITALS_INFLUX_TOKEN": "tok-123",
            "RLVITALS_INFLUX_DATABASE": "db",
            "RLVITALS_INFLUX_RETENTION_POLICY": "week",
            "RLVITALS_PROMETHEUS_PORT": "9100",
            "RLVITALS_POLICY": "drop",
            "RLVITALS_DISK_BUDGET_MB": "2.5",
            "RLVITALS_BATCH_SIZE": "100",
            "RLVITALS_FLUSH_TIMEOUT": "3",
        }
    )
    assert s.store == Path("/data/store")
    assert (s.influx_api, s.influx_org, s.influx_bucket, s.influx_token) == (
        "v2",
        "lab",
        "rl",
        "tok-123",
    )
    assert (s.influx_database, s.influx_retention_policy) == ("db", "week")
    assert (s.prometheus_port, s.policy, s.batch_size, s.flush_timeout) == (9100, "drop", 100, 3.0)
    assert s.disk_budget_bytes == int(2.5 * 2**20)
    assert s.outbox_path == Path("/data/store/outbox.sqlite")


def test_defaults_use_the_embedded_store_and_warn_policy() -> None:
    s = ExporterSettings.from_env({})
    assert s.store == Path("./rlvitals-data")
    assert s.influx_url is None and s.prometheus_port is None and s.policy == "warn"


def test_repr_never_shows_password_or_token() -> None:
    s = ExporterSettings(influx_password="hunter2-pw", influx_token="tok-secret-xyz")
    for text in (repr(s), str(s)):
        assert "hunter2-pw" not in text and "tok-secret-xyz" not in text
        assert "influx_token='***'" in text


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"RLVITALS_POLICY": "loud"}, "RLVITALS_POLICY"),
        ({"RLVITALS_PROMETHEUS_PORT": "ninety"}, "RLVITALS_PROMETHEUS_PORT"),
        ({"RLVITALS_INFLUX_URL": "influx:8086"}, "http://"),
        ({"RLVITALS_INFLUX_URL": "http://x", "RLVITALS_INFLUX_API": "v2"}, "RLVITALS_INFLUX_TOKEN"),
        ({"RLVITALS_DISK_BUDGET_MB": "-1"}, "RLVITALS_DISK_BUDGET_MB"),
    ],
)
def test_bad_settings_raise_config_error_naming_the_variable(
    env: dict[str, str], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        ExporterSettings.from_env(env)


def test_store_given_as_a_string_is_taken_as_a_folder(tmp_path: Path) -> None:
    settings = ExporterSettings(store=str(tmp_path / "a"))  # type: ignore[arg-type]
    assert settings.store == tmp_path / "a"
    assert settings.outbox_path == tmp_path / "a" / "outbox.sqlite"
    import exporter

    with exporter.init("r", settings=settings) as run:  # was a TypeError at init
        run.log(1, {"train/loss": 0.5})
        assert run.flush()
    assert settings.outbox_path.is_file()


def test_store_of_another_type_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"store=3 \(int\) is not a folder path"):
        ExporterSettings(store=3)  # type: ignore[arg-type]
