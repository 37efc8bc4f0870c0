"""The /metrics endpoint: per-run gauges on its own registry, valid for `promtool check metrics`."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import exporter
import registry


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_served_on_the_configured_port_pass_promtool(
    tmp_path: Path, reg: registry.Registry
) -> None:
    # no linger at the end: this test's one read of /metrics is a scrape, and with no interval
    # measured the run would wait the longest linger (90 s) for another (the linger is what
    # tests/grafana/test_alerting_deployments_processes.py relies on)
    settings = exporter.ExporterSettings(
        store=tmp_path, prometheus_port=0, policy="warn", prometheus_linger_s=0.0
    )
    with exporter.init("ppo", registry=reg, settings=settings) as run:
        endpoint = run.metrics_endpoint
        assert endpoint is not None
        endpoint.set_rule_states(
            lambda: [exporter.RuleState("ppo", "entropy_collapse", "critical", True)]
        )
        for step in range(10):
            run.log(step, {"losses/clipfrac": 0.1 * step / 10, "perf/gpu_util_percent0": 0.5})
        run.log(10, {"losses/clipfrac": float("nan"), "weird name": 1.0, "losses/value_loss": -1.0})
        assert run.flush()
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5) as r:
            text = r.read().decode()
    samples = _samples(text)
    assert samples[
        ("rlvitals_metric", (("gpu", ""), ("metric", "clip_fraction"), ("run", "ppo")))
    ] == pytest.approx(0.09)
    assert (
        samples[("rlvitals_metric", (("gpu", "0"), ("metric", "gpu_utilization"), ("run", "ppo")))]
        == 50.0
    )
    assert samples[("rlvitals_step", (("run", "ppo"),))] == 10.0
    assert (
        samples[("rlvitals_nonfinite_samples_total", (("metric", "clip_fraction"), ("run", "ppo")))]
        == 1
    )
    assert samples[("rlvitals_rejected_samples_total", (("run", "ppo"),))] == 1
    assert (
        samples[
            (
                "rlvitals_rule_active",
                (("rule", "entropy_collapse"), ("run", "ppo"), ("severity", "critical")),
            )
        ]
        == 1
    )
    assert ("rlvitals_outbox_backlog", (("run", "ppo"),)) in samples
    assert ("rlvitals_write_errors_total", (("run", "ppo"),)) in samples
    assert ("rlvitals_last_write_age_seconds", (("run", "ppo"),)) in samples
    assert ("rlvitals_steps_per_second", (("run", "ppo"),)) in samples
    assert not any(name.startswith("rlvitals") for name in REGISTRY._names_to_collectors)
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not on PATH (install Debian's `prometheus` package)")
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_no_endpoint_without_a_configured_port(tmp_path: Path, reg: registry.Registry) -> None:
    with exporter.init(
        "p", registry=reg, settings=exporter.ExporterSettings(store=tmp_path)
    ) as run:
        assert run.metrics_endpoint is None


def test_one_endpoint_can_serve_several_runs(tmp_path: Path, reg: registry.Registry) -> None:
    endpoint = exporter.MetricsEndpoint(port=0)
    settings = exporter.ExporterSettings(store=tmp_path)
    with (
        exporter.init("a", registry=reg, settings=settings) as a,
        exporter.init("b", registry=reg, settings=settings) as b,
    ):
        endpoint.add(a)
        endpoint.add(b)
        a.log(1, {"losses/clipfrac": 0.1})
        b.log(2, {"losses/clipfrac": 0.2})
        assert a.flush() and b.flush()
        samples = _samples(endpoint.render().decode())
    assert samples[("rlvitals_step", (("run", "a"),))] == 1
    assert samples[("rlvitals_step", (("run", "b"),))] == 2
