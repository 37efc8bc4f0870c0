"""Every generated alert rule's PromQL, run by a real Prometheus scraping the real exporter:
failures fire the rules they should, a healthy learning run fires none; the default setup (no
training job on the host, finished runs, dotted run names) stays quiet."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundle_data import healthy_value, logged_metrics
from influx_server import refused_port
from prom_server import PromServer, scrape_config

import exporter
import registry
from exporter import ExporterSettings, Lifecycle, MetricsEndpoint
from exporter.ingest.feed import Ingest
from exporter.prometheus.live_states import attach
from exporter.prometheus.store_statuses import store_statuses
from exporter.sources import Record
from exporter.sources.discover import LogFile
from grafana.dashboards_gen.alerts import EXPORTER_JOB, Timing, alert_rule_groups

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus not installed"
)

# Short wall-clock windows (through the one Lifecycle definition) so a stall and an unhealthy
# exporter show within seconds; every other part of the expressions is what `rlvitals build` writes.
TIMING = Timing(
    unhealthy="30s", lookback_seconds=600, lifecycle=Lifecycle(stall_after_s=8, ended_after_s=600)
)
STEPS = 400
SCENARIOS = ("healthy", "collapse", "klspike", "nan", "stall", "done", "lr0.001")
HOST_JOB = "rlvitals-training-job"  # provisioning/prometheus/prometheus.yml: nothing listens there


@dataclass(frozen=True)
class Fired:
    rule: str
    run: str


def _values(
    reg: registry.Registry, scenario: str, step: int, rng: np.random.Generator
) -> dict[str, float]:
    values = {m.id: healthy_value(m, step, rng) for m in logged_metrics(reg)}
    if scenario == "collapse" and step >= 300:
        values["policy_entropy"] = 0.01
        values["policy_kl"] = 0.0
        values["clip_fraction"] = 0.0
    if scenario == "klspike" and step >= 350:
        values["policy_kl"] = 0.3
    if scenario == "nan" and step == STEPS - 5:
        values["policy_entropy"] = math.nan
    return values


@pytest.fixture(scope="module")
def stack(
    builtin: registry.Registry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("alerting")
    life = TIMING.lifecycle
    settings = ExporterSettings(
        store=root / "store",
        prometheus_port=None,
        policy="warn",
        stall_after_s=life.stall_after_s,
        ended_after_s=life.ended_after_s,
    )
    endpoint = MetricsEndpoint(port=0)
    attach(endpoint, builtin, settings.outbox_path)
    # as `rlvitals tail --follow` serves them: the store's other writers page here too
    endpoint.set_store_statuses(lambda: store_statuses(settings.outbox_path, life))
    runs = {}
    for scenario in SCENARIOS:
        run = exporter.init(scenario, registry=builtin, settings=settings, config={})
        rng = np.random.default_rng(1)
        for step in range(STEPS):
            run.log(step, _values(builtin, scenario, step, rng))
        assert run.flush(30)
        endpoint.add(run)
        runs[scenario] = run
    runs["done"].finish(30)  # finished: it must never read as stalled
    # a run whose training raised: recorded crashed in the store, paged by the store's statuses
    with (
        contextlib.suppress(RuntimeError),
        exporter.init("crash", registry=builtin, settings=settings, config={}) as crashed,
    ):
        crashed.log(0, {"policy_kl": 0.01})
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    # Followed logs (the sidecar's path): one was already quiet when first read (history), so
    # `finish_idle` ends it and it leaves /metrics; two grew while followed, then went quiet:
    # the one whose writer process still runs and holds its log open is stalled once the window
    # passes, and fires; the one with no writer to be seen is quiet, and never fires.
    ingest = Ingest(
        registry=builtin, settings=settings, framework="sb3", endpoint=endpoint, follow=True
    )
    now = time.time()
    holders = []
    for name, written in (
        ("followed-ended", now - 2 * life.ended_after_s),
        ("followed-stall", now),
        ("followed-quiet", now),
    ):
        (root / name).mkdir()
        log = LogFile(root / name / "m.jsonl", "jsonl")
        log.path.write_text("{}\n", encoding="utf-8")
        os.utime(log.path, (written, written))
        if name == "followed-stall":
            holders.append(_hold_open(log.path))
        records = [Record(s, {"policy_kl": 0.01}, wall_time=now + s) for s in range(STEPS)]
        ingest.feed(log, records[: STEPS // 2])
        if name != "followed-ended":
            ingest.feed(log, records[STEPS // 2 :])  # read again: it grew while followed
    ingest.settle()
    assert ingest.flush(30)
    # history is ended as soon as the reader moves on from it (here: to the next log)
    assert [r.name for r in ingest.runs] == ["followed-stall", "followed-quiet"]
    assert ingest.finish_idle(life, time.time()) == []
    # addresses where nothing answers, held for the module: a port picked and released could be
    # taken by another test's server meanwhile
    dead_ports = contextlib.ExitStack()
    dead_influx, dead_host = (dead_ports.enter_context(refused_port()) for _ in range(2))
    dead = ExporterSettings(
        store=root / "broken", influx_url=f"http://127.0.0.1:{dead_influx}", policy="warn"
    )
    broken = exporter.init("broken", registry=builtin, settings=dead, config={})
    endpoint.add(broken)
    port = endpoint.start()
    config = scrape_config(
        EXPORTER_JOB, [f"127.0.0.1:{port}"], more_jobs={HOST_JOB: [f"127.0.0.1:{dead_host}"]}
    )
    prom = PromServer(root / "prom", config)
    (root / "prom").mkdir()
    prom.start()
    stop = threading.Event()

    def keep_training() -> None:
        rng = np.random.default_rng(2)
        step = STEPS
        while not stop.wait(0.2):
            runs["healthy"].log(step, _values(builtin, "healthy", step, rng))
            runs["lr0.001"].log(step, _values(builtin, "healthy", step, rng))
            broken.log(step, {"policy_kl": 0.01})
            step += 1

    thread = threading.Thread(target=keep_training, daemon=True)
    thread.start()
    try:
        yield {"prom": prom, "runs": runs}
    finally:
        stop.set()
        thread.join(5)
        prom.stop()
        endpoint.stop()
        for run in (*runs.values(), broken):
            run.finish(5)
        ingest.finish(5)
        for holder in holders:
            holder.kill()
            holder.wait(10)
        dead_ports.close()


def _hold_open(path: Path) -> subprocess.Popen[str]:
    """A process holding `path` open for writing, as a training job holds its log."""
    code = "import sys, time; f = open(sys.argv[1], 'a'); print('ok', flush=True); time.sleep(3600)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ok\n"
    return proc


def _rules(reg: registry.Registry) -> list[dict[str, Any]]:
    return [r for g in alert_rule_groups(reg, TIMING)["groups"] for r in g["rules"]]


def _evaluate(prom: PromServer, rules: list[dict[str, Any]]) -> set[Fired]:
    fired = set()
    for rule in rules:
        expr = rule["data"][0]["model"]["expr"]
        threshold = rule["data"][2]["model"]["conditions"][0]["evaluator"]["params"][0]
        for sample in prom.query(expr):
            if float(sample["value"][1]) > threshold:
                fired.add(Fired(rule["uid"], sample["metric"].get("run", "")))
    return fired


def _wait_for(
    prom: PromServer, rules: list[dict[str, Any]], expected: set[Fired], timeout: float = 60
) -> set[Fired]:
    deadline = time.monotonic() + timeout
    fired: set[Fired] = set()
    while time.monotonic() < deadline:
        fired = _evaluate(prom, rules)
        if expected <= fired:
            return fired
        time.sleep(1)
    return fired


def test_injected_failures_fire_their_rules_and_a_healthy_run_fires_none(
    stack: dict[str, Any], builtin: registry.Registry
) -> None:
    rules = _rules(builtin)
    nonfinite = [r["uid"] for r in rules if r["labels"]["metric"] == "nonfinite_count"]
    expected = {
        Fired("rlv-policy_entropy-c-below", "collapse"),
        Fired("rlv-policy_entropy-w-below", "collapse"),
        Fired("rlv-policy_kl-c-above", "klspike"),
        Fired("rlv-policy_kl-w-above", "klspike"),
        *(Fired(uid, "nan") for uid in nonfinite),
        Fired("rlv-training-stalled", "stall"),
        Fired("rlv-training-stalled", "followed-stall"),
        Fired("rlv-run-crashed", "crash"),
        Fired("rlv-exporter-unhealthy", "broken"),
    }
    assert nonfinite, "the registry's NaN alert has no rule"
    fired = _wait_for(stack["prom"], rules, expected)
    assert expected <= fired, f"missing: {expected - fired}"
    for quiet in ("healthy", "lr0.001", "done", "followed-ended", "followed-quiet"):
        assert not {f for f in fired if f.run == quiet}, f"run {quiet} fired {fired}"
    # no training job on the host: its target is down, yet the exporter is healthy
    assert not {f for f in fired if f.rule == "rlv-exporter-unhealthy" and f.run != "broken"}
    down = stack["prom"].query(f'up{{job="{HOST_JOB}"}} == 0')
    assert down, "the host job's target should be down in this setup"


def test_every_rule_expression_is_valid_promql(
    stack: dict[str, Any], builtin: registry.Registry
) -> None:
    for rule in alert_rule_groups(builtin)["groups"]:
        for r in rule["rules"]:
            stack["prom"].query(r["data"][0]["model"]["expr"])  # raises on a PromQL error


def test_scrape_config_passes_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    import subprocess

    config = Path(__file__).parents[2] / "provisioning" / "prometheus" / "prometheus.yml"
    done = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    import yaml

    jobs = {
        j["job_name"]: [t for c in j["static_configs"] for t in c["targets"]]
        for j in yaml.safe_load(config.read_text())["scrape_configs"]
    }
    # the host's training job has its own job, so its absence never reads as the exporter down
    assert jobs[EXPORTER_JOB] == ["exporter:9464"]
    assert jobs[HOST_JOB] == ["host.docker.internal:9465"]
