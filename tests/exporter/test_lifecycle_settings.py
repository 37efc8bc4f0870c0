"""The lifecycle's windows as settings (RLVITALS_STALL_AFTER_S, RLVITALS_ENDED_AFTER_S): bad values
are refused by name, by the exporter, the datasource and the command line alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter import ConfigError, ExporterSettings, Lifecycle
from grafana.datasource.config import ConfigError as DatasourceConfigError
from grafana.datasource.config import DatasourceConfig
from rlvitals.cli import main


@pytest.mark.parametrize(
    "env",
    [
        {"RLVITALS_STALL_AFTER_S": "3600", "RLVITALS_ENDED_AFTER_S": "600"},  # out of order
        {"RLVITALS_STALL_AFTER_S": "0"},
        {"RLVITALS_STALL_AFTER_S": "ten minutes"},
    ],
)
def test_bad_windows_are_refused_naming_the_setting(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="RLVITALS_STALL_AFTER_S"):
        ExporterSettings.from_env(env)
    with pytest.raises(DatasourceConfigError, match="RLVITALS_STALL_AFTER_S"):
        DatasourceConfig.from_env(env)


def test_the_windows_set_are_the_ones_every_reader_judges_with() -> None:
    env = {"RLVITALS_STALL_AFTER_S": "5", "RLVITALS_ENDED_AFTER_S": "50"}
    expected = Lifecycle(stall_after_s=5, ended_after_s=50)
    assert ExporterSettings.from_env(env).lifecycle == expected
    assert DatasourceConfig.from_env(env).lifecycle == expected


def test_runs_with_a_bad_window_exits_2_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RLVITALS_STALL_AFTER_S", "-1")
    assert main(["runs", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "RLVITALS_STALL_AFTER_S" in err and "Traceback" not in err
