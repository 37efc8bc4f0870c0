"""`rlvitals doctor` names each problem with its fix, against a real InfluxDB where one is needed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from influx_server import InfluxDatabase

from rlvitals.cli import main
from rlvitals.doctor import Finding, diagnose


def _by_check(findings: list[Finding], prefix: str) -> Finding:
    return next(f for f in findings if f.check.startswith(prefix))


def test_default_configuration_is_healthy_and_creates_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    findings = diagnose({"RLVITALS_STORE": str(store)})
    assert all(f.ok for f in findings), [str(f) for f in findings]
    assert not store.exists()


def test_unreachable_influxdb_is_a_problem_with_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"RLVITALS_STORE": str(tmp_path), "RLVITALS_INFLUX_URL": f"http://127.0.0.1:{port}"}
    finding = _by_check(diagnose(env), "InfluxDB")
    assert (
        not finding.ok and "unreachable" in finding.detail and "RLVITALS_INFLUX_URL" in finding.fix
    )


def test_missing_database_on_a_real_influxdb_is_named(
    influx: InfluxDatabase, tmp_path: Path
) -> None:
    env = {
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_INFLUX_URL": influx.url,
        "RLVITALS_INFLUX_DATABASE": "nope_db",
    }
    finding = _by_check(diagnose(env), "InfluxDB")
    assert not finding.ok and "'nope_db' does not exist" in finding.detail
    env["RLVITALS_INFLUX_DATABASE"] = influx.name
    assert _by_check(diagnose(env), "InfluxDB").ok


def test_v2_api_against_a_1x_server_says_to_switch(influx: InfluxDatabase, tmp_path: Path) -> None:
    env = {
        "RLVITALS_STORE": str(tmp_path),
        "RLVITALS_INFLUX_URL": influx.url,
        "RLVITALS_INFLUX_API": "v2",
        "RLVITALS_INFLUX_ORG": "o",
        "RLVITALS_INFLUX_BUCKET": "b",
        "RLVITALS_INFLUX_TOKEN": "secret-token",
    }
    findings = diagnose(env)
    finding = _by_check(findings, "InfluxDB")
    assert not finding.ok and "RLVITALS_INFLUX_API=v1" in finding.fix
    assert "secret-token" not in "\n".join(str(f) for f in findings)


def test_bad_setting_and_busy_port_are_reported_together(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        findings = diagnose(
            {"RLVITALS_STORE": str(tmp_path), "RLVITALS_PROMETHEUS_PORT": str(port)}
        )
        assert not _by_check(findings, "Prometheus").ok
    bad = diagnose({"RLVITALS_STORE": str(tmp_path), "RLVITALS_PROMETHEUS_PORT": "ninety"})
    assert not _by_check(bad, "exporter settings").ok


def test_doctor_command_exits_1_on_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    assert main(["doctor"]) == 0
    monkeypatch.setenv("RLVITALS_INFLUX_URL", "http://127.0.0.1:1")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] InfluxDB" in out and "fix:" in out and "Traceback" not in out


def test_doctor_prints_settings_as_readable_lines_not_a_dataclass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    monkeypatch.delenv("RLVITALS_PROMETHEUS_PORT", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ExporterSettings(" not in out
    assert f"store: {tmp_path}" in out
    assert "InfluxDB: none: the embedded store is the database" in out
    assert "bad-input policy: warn" in out
