"""The `tail` sidecar serves every run it follows on one /metrics port, with live alert states."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def _bound_port(proc: subprocess.Popen[str], lines: list[str], deadline: float) -> int:
    """The port the sidecar says it serves /metrics on."""
    while time.monotonic() < deadline:
        for line in list(lines):
            found = re.search(r"serving /metrics on 127\.0\.0\.1:(\d+)", line)
            if found:
                return int(found.group(1))
        assert proc.poll() is None, "".join(lines)
        time.sleep(0.1)
    raise AssertionError("tail never said where it serves /metrics:\n" + "".join(lines))


def _critical_kl(text: str) -> dict[str, str]:
    """run -> value of rlvitals_alert_active for policy_kl's critical alert."""
    found = {}
    for line in text.splitlines():
        wanted = ('metric="policy_kl"', 'severity="critical"')
        if line.startswith("rlvitals_alert_active{") and all(w in line for w in wanted):
            found[line.split('run="')[1].split('"')[0]] = line.rsplit(" ", 1)[1]
    return found


def _scrape_until(port: int, deadline: float, done: Callable[[str], bool]) -> str:
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text = r.read().decode()
            if done(text):
                return text
        except OSError:
            pass
        time.sleep(0.2)
    return text


def test_two_runs_share_one_port_and_carry_alert_states(tmp_path: Path) -> None:
    for run, kl in (("a", 0.01), ("b", 0.5)):
        folder = tmp_path / "runs" / run
        folder.mkdir(parents=True)
        lines = [json.dumps({"step": s, "policy_kl": kl, "policy_entropy": 1.0}) for s in range(50)]
        (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # port 0: the sidecar binds a free port and prints it (a number picked here could be taken
    # by another test before the sidecar binds it)
    env = {
        **os.environ,
        "RLVITALS_STORE": str(tmp_path / "store"),
        "RLVITALS_PROMETHEUS_PORT": "0",
    }
    env.pop("RLVITALS_INFLUX_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", "tail", str(tmp_path / "runs"), "--poll", "0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        port = _bound_port(proc, lines, time.monotonic() + 60)
        # wait for the runs' own gauges too: the alert states (read from the outbox) can show
        # before a busy machine has scheduled the scrape that carries the step gauges
        text = _scrape_until(
            port,
            time.monotonic() + 60,
            lambda t: (
                len(_critical_kl(t)) == 2
                and 'rlvitals_step{run="a"}' in t
                and 'rlvitals_step{run="b"}' in t
            ),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        reader.join(10)
    stderr = "".join(lines)
    assert proc.returncode == 0, stderr
    assert 'rlvitals_step{run="a"}' in text and 'rlvitals_step{run="b"}' in text
    # b logs policy KL 0.5 for 50 steps, far past the critical threshold; a stays at 0.01.
    assert _critical_kl(text) == {"a": "0.0", "b": "1.0"}
