"""The provisioned run-state rules, evaluated by Prometheus's own rule engine (`promtool test rules`)
at their boundaries, after the documented transformation of tests/grafana/prom_rules.py (itself
checked here: it changes durations by the factor asked, and nothing else).

What the rules must say (docs/status.md): a training process serving its
own /metrics that vanishes without an end pages *Run crashed* with what was seen; one that
recorded its end before it went (finished, or crashed) pages that end only; a crash resolves an
hour after it was last served, or at once when the run is served again with another status; a
stalled run pages *Training stalled*, a quiet one nothing; a follower (a sidecar) going away pages
no run."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prom_rules import duration_seconds, prometheus_rules, scale_durations

from grafana.dashboards_gen.alerts import WRITER_GONE

ROOT = Path(__file__).resolve().parents[2]
PROVISIONED = ROOT / "provisioning" / "alerting" / "rlvitals-rules.yaml"
STALLED, CRASHED = "rlv-training-stalled", "rlv-run-crashed"


def _provisioned() -> dict[str, Any]:
    return yaml.safe_load(PROVISIONED.read_text(encoding="utf-8"))


def _tokens(expr: str) -> list[str | float]:
    """The expression as text between durations and the durations in seconds."""
    out: list[str | float] = []
    at = 0
    for match in re.finditer(r"(?<=[\[:])[^\]:]+(?=[\]:])|(?<=offset )\S+", expr):
        if match.group(0).strip() and re.fullmatch(r"[\d.]+(ms|s|m|h|d|w)+", match.group(0)):
            out += [expr[at : match.start()], duration_seconds(match.group(0))]
            at = match.end()
    return [*out, expr[at:]]


def test_the_transformation_scales_every_duration_and_changes_nothing_else() -> None:
    provisioned = _provisioned()
    scale = 1 / 150
    out = prometheus_rules(provisioned, scale=scale)
    given = {r["uid"]: (r, g) for g in provisioned["groups"] for r in g["rules"]}
    rules = {r["alert"]: (r, g) for g in out["groups"] for r in g["rules"]}
    assert set(rules) == set(given)
    windows = 0
    for uid, (rule, group) in rules.items():
        source, source_group = given[uid]
        assert duration_seconds(rule["for"]) == pytest.approx(
            duration_seconds(source["for"]) * scale, abs=1e-3
        )
        assert duration_seconds(group["interval"]) == pytest.approx(
            duration_seconds(source_group["interval"]) * scale, abs=1e-3
        )
        expr = source["data"][0]["model"]["expr"]
        threshold = source["data"][2]["model"]["conditions"][0]["evaluator"]["params"][0]
        a, b = _tokens(rule["expr"]), _tokens(f"({expr}) > {threshold:g}")
        assert len(a) == len(b), uid
        for x, y in zip(a, b, strict=True):
            if isinstance(y, float):
                assert isinstance(x, float) and x == pytest.approx(y * scale, abs=1e-3), uid
                windows += 1
            else:
                assert x == y, uid
        assert rule["labels"] == source["labels"]
    assert windows >= 3, "the crash rule's windows and the counters' look-backs are durations"
    assert scale_durations("rate(x[5m] offset 1h)", 2.0) == "rate(x[600000ms] offset 7200000ms)"


def _status(run: str, status: str, values: str, reason: str = "") -> dict[str, str]:
    labels = f'run="{run}", status="{status}", reason="{reason}", job="j", instance="i"'
    return {"series": f"rlvitals_run_status{{{labels}}}", "values": values}


def _heartbeat(run: str, values: str) -> dict[str, str]:
    name = "rlvitals_writer_heartbeat_timestamp_seconds"
    return {"series": f'{name}{{run="{run}", job="j", instance="i"}}', "values": values}


def _crash(run: str, reason: str) -> dict[str, Any]:
    return {
        "exp_labels": {
            "severity": "critical",
            "metric": "rlvitals_step",
            "layer": "health",
            "run": run,
            "reason": reason,
        },
        "exp_annotations": {"summary": f"Run {run} crashed: {reason}"},
    }


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_the_run_state_rules_at_their_boundaries_in_prometheus(tmp_path: Path) -> None:
    rules = prometheus_rules(_provisioned(), uids={STALLED, CRASHED})
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    crash = "uncaught RuntimeError: CUDA error"
    series = [
        # a trainer serving its own /metrics, killed at 3m: it answered at 0-2m, then nothing
        _heartbeat("killed", "60 120 180 stale"),
        _status("killed", "live", "1 1 1 stale"),
        # one that finished: its last scrape read the end (heartbeat 0), then it exited
        _heartbeat("done", "60 120 0 stale"),
        _status("done", "live", "1 1 stale"),
        _status("done", "finished", "_ _ 1 stale"),
        # one that raised: recorded crashed, scraped once, exited
        _heartbeat("raised", "60 120 0 stale"),
        _status("raised", "live", "1 1 stale"),
        _status("raised", "crashed", "_ _ 1 stale", crash),
        # crashed, then resumed by another process (live again from 3m)
        _status("resumed", "crashed", "1 1 stale", crash),
        _status("resumed", "live", "_ _ _ 1 1 1 1 1 1"),
        # a hung trainer, and a followed run whose writer cannot be seen
        _status("hung", "stalled", "1x10"),
        _status("quiet", "quiet", "1x10"),
        # a follower serving a followed run, stopped at 2m: it serves no heartbeat
        _status("followed", "live", "1 1 stale"),
    ]

    def at(minutes: str, name: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"eval_time": minutes, "alertname": name, "exp_alerts": alerts}

    checks = [
        # "resumed" until another status is served for it (from 3m), "killed" not yet
        at("2m", CRASHED, [_crash("raised", crash), _crash("resumed", crash)]),
        at("4m", CRASHED, [_crash("killed", WRITER_GONE), _crash("raised", crash)]),
        # held after the resumed run stopped being served (8m): it was resumed, not crashed
        at("30m", CRASHED, [_crash("killed", WRITER_GONE), _crash("raised", crash)]),
        # an hour after each was last served (2m), both resolve
        at("62m", CRASHED, [_crash("killed", WRITER_GONE), _crash("raised", crash)]),
        at("63m", CRASHED, []),
        at("2m", STALLED, [{"exp_labels": {**_crash("hung", "")["exp_labels"], "run": "hung"}}]),
    ]
    checks[-1]["exp_alerts"][0]["exp_labels"].pop("reason")
    checks[-1]["exp_alerts"][0]["exp_annotations"] = {
        "summary": "Run hung: its writer runs but stored nothing for 600 s"
    }
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": checks}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, width=1000), encoding="utf-8")
    done = subprocess.run(
        ["promtool", "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
