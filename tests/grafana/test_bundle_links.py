"""Every link of the Grafana bundle goes through one configurable public address: no file of the
bundle names `localhost:8686`, and compose's Grafana entrypoint (run here with `sh`, as the
container runs it) fills `RLVITALS_PUBLIC_URL` into the dashboards it hands Grafana."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import registry
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.sources import PUBLIC_API_URL, PUBLIC_URL_SETTING

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "provisioning" / "grafana" / "entrypoint.sh"
BUNDLE = ("grafana/dashboards", "provisioning")


def _bundle_files() -> list[Path]:
    return [p for d in BUNDLE for p in (ROOT / d).rglob("*") if p.is_file()]


def test_no_file_of_the_bundle_names_a_host_address() -> None:
    found = [str(p) for p in _bundle_files() if "localhost:8686" in p.read_text(errors="ignore")]
    assert not found, found


def test_every_term_link_starts_with_the_public_address(builtin: registry.Registry) -> None:
    links = 0
    for path, text in dashboard_files(builtin, ("en", "zh")).items():
        for url in re.findall(r"[^\s\"'(\[]*/terms/[^\s\"')\]]*", text):
            assert url.startswith(PUBLIC_API_URL), f"{path}: {url}"
            links += 1
    rules = (ROOT / "provisioning" / "alerting" / "rlvitals-rules.yaml").read_text()
    runbooks = re.findall(r"runbook_url: (\S+)", rules)
    assert runbooks and all(u.startswith(PUBLIC_API_URL) for u in runbooks if u), runbooks[:3]
    assert links > 100


def _run_entrypoint(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    ran = tmp_path / "run.sh"
    ran.write_text('#!/bin/sh\necho "grafana started: $*"\n')
    ran.chmod(0o755)
    env = {
        **os.environ,
        "RLVITALS_DASHBOARDS_SRC": str(ROOT / "grafana" / "dashboards"),
        "RLVITALS_DASHBOARDS_DIR": str(tmp_path / "dashboards"),
        PUBLIC_URL_SETTING: url,
        "GRAFANA_RUN": str(ran),
    }
    sh = shutil.which("sh")
    assert sh is not None
    return subprocess.run(
        [sh, str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_entrypoint_fills_the_public_address_into_every_dashboard_and_starts_grafana(
    tmp_path: Path,
) -> None:
    done = _run_entrypoint(tmp_path, "https://rl.example.org/")
    assert done.returncode == 0, done.stderr
    assert "grafana started" in done.stdout
    copies = sorted((tmp_path / "dashboards").rglob("*.json"))
    assert len(copies) == len(list((ROOT / "grafana" / "dashboards").rglob("*.json")))
    for copy in copies:
        text = copy.read_text()
        assert PUBLIC_API_URL not in text, copy
        json.loads(text)  # still JSON
    overview = (tmp_path / "dashboards" / "en" / "overview.json").read_text()
    assert "https://rl.example.org/terms/policy_kl?lang=en" in overview


@pytest.mark.parametrize("url", ["", "localhost:8686", "http://a&b", "http://a b"])
def test_the_entrypoint_refuses_an_address_a_link_cannot_be_built_from(
    tmp_path: Path, url: str
) -> None:
    done = _run_entrypoint(tmp_path, url)
    assert done.returncode == 2 and PUBLIC_URL_SETTING in done.stderr
    assert "grafana started" not in done.stdout
