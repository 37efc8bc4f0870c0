"""Normal exit, `kill -9`, a zombie and a hang, in the three deployments docs/compose.md offers, each
with its own status and its own alert (none for a normal exit), read where a user reads them: the
embedded UI's `/api/runs`, `/metrics`, and the provisioned alert rules evaluated by a real
Prometheus (issue 36).

- **followed**: a trainer writes a JSON Lines log that a real `rlvitals tail --follow` follows
  (the compose sidecar; its /metrics is the `rlvitals-exporter` job). `--set planned_steps` gives
  the planned length, as a run config would;
- **store**: a trainer logging through `exporter.init` into the sidecar's store (issue 22): the
  sidecar serves its status from the store;
- **self**: a trainer serving its own /metrics (`RLVITALS_PROMETHEUS_PORT`, docs/compose.md way 1; the
  `rlvitals-training-job` job).

The documented defaults (10 minutes to stall, an hour to end) are simulated 150 times faster: the
exporter's windows through RLVITALS_STALL_AFTER_S / RLVITALS_ENDED_AFTER_S, the rules loaded from
`provisioning/alerting/rlvitals-rules.yaml` with every duration divided by 150 by the documented
transformation of `prom_rules.py` (its `for:` included). A zombie is a trainer killed by SIGKILL
whose launcher never waits for it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from influx_server import free_port, spawn_until_ready
from prom_rules import prometheus_rules
from prom_server import PromServer
from prometheus_client.parser import text_string_to_metric_families

from exporter.store.outbox import Outbox
from grafana.dashboards_gen.alerts import EXPORTER_JOB, WRITER_GONE
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or not Path("/proc/self/fd").is_dir(),
    reason="needs Debian's prometheus and /proc",
)

REPO = Path(__file__).resolve().parents[2]
PROVISIONED = REPO / "provisioning" / "alerting" / "rlvitals-rules.yaml"
SCALE = 1 / 150
STALL_S = 600 * SCALE  # 4 s for the documented 10 minutes
ENDED_S = 3600 * SCALE  # 24 s for its hour
TRAINING_JOB = "rlvitals-training-job"
STALLED, CRASHED, UNHEALTHY = "rlv-training-stalled", "rlv-run-crashed", "rlv-exporter-unhealthy"
DEPLOYMENTS = ("followed", "store", "self")
CASES = ("normal", "kill", "zombie", "hang")
PLANNED = 20
EARLY = 6  # the steps a trainer that does not end normally logs

_TRAINER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path

    deployment, name, how, where, planned, early = sys.argv[1:]
    steps = int(planned) if how == "normal" else int(early)
    if deployment == "followed":
        # a job writing its own log, kept open as SB3's CSV logger or a TensorBoard writer does
        log = open(Path(where) / name / "progress.jsonl", "a")
        for step in range(1, steps + 1):
            values = {"time/total_timesteps": step, "train/approx_kl": 0.01,
                      "train/clip_fraction": 0.1, "rollout/ep_rew_mean": 1.0 + step}
            log.write(json.dumps(values) + "\\n")
            log.flush()
            time.sleep(0.25)
    else:
        import exporter
        run = exporter.init(name, config={})
        for step in range(1, steps + 1):
            run.log(step, {"policy_kl": 0.01, "clip_fraction": 0.1})
            time.sleep(0.25)
        assert run.flush(10)
    print("READY", flush=True)
    if how == "normal":
        if deployment != "followed":
            run.finish()  # a training process that serves /metrics waits for a scrape of it
        sys.exit(0)
    time.sleep(3600)  # hung, or waiting to be killed
    """
)

# A launcher that never waits for its child: once killed, the trainer stays a zombie.
_LAUNCHER = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen(sys.argv[1:])
    print(child.pid, flush=True)
    time.sleep(3600)
    """
)


@dataclass
class Trainer:
    deployment: str
    case: str
    proc: subprocess.Popen[str]
    port: int | None = None
    launcher: subprocess.Popen[str] | None = None

    @property
    def name(self) -> str:
        return f"{self.deployment}-{self.case}"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.launcher is None else self.child

    child: int = 0


def _env(store: Path, port: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env.update(
        RLVITALS_STORE=str(store),
        RLVITALS_STALL_AFTER_S=f"{STALL_S:g}",
        RLVITALS_ENDED_AFTER_S=f"{ENDED_S:g}",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    if port is not None:
        env["RLVITALS_PROMETHEUS_PORT"] = str(port)
    return env


def _start(
    deployment: str, case: str, root: Path, logs: Path, store: Path, port: int | None
) -> Trainer:
    name = f"{deployment}-{case}"
    own = root / "stores" / name if deployment == "self" else store
    if deployment == "followed":
        (logs / name).mkdir()
    cmd = [sys.executable, "-c", _TRAINER, deployment, name, case, str(logs), str(PLANNED)]
    cmd.append(str(EARLY))
    env = _env(own, port)
    if case == "zombie":
        launcher = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, *cmd],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert launcher.stdout is not None
        trainer = Trainer(deployment, case, launcher, port, launcher)
        trainer.child = int(launcher.stdout.readline())
        return trainer
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    return Trainer(deployment, case, proc, port)


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return text[text.rindex(")") + 2]


def _served(port: int) -> dict[str, tuple[str, str]]:
    """`rlvitals_run_status` of one /metrics: run -> (status, reason)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == "rlvitals_run_status":
            for sample in family.samples:
                if sample.value == 1:
                    out[sample.labels["run"]] = (sample.labels["status"], sample.labels["reason"])
    return out


def _writer_seen(store: Path, run: str, pid: int) -> bool:
    """Whether the follower recorded `pid` as the process holding the run's logs open."""
    with Outbox(store / "outbox.sqlite") as outbox:
        lease = outbox.lease(run)
    return lease is not None and lease.writer is not None and lease.writer.pid == pid


def _ui(store: Path) -> dict[str, tuple[str, str]]:
    """The embedded UI's run list for a store: run -> (status, what set it)."""
    config = DatasourceConfig(store=store, stall_after_s=STALL_S, ended_after_s=ENDED_S)
    answer = create_app(config).test_client().get("/api/runs")
    assert answer.status_code == 200, answer.data
    return {r["run"]: (r["status"], r["status_reason"]) for r in answer.get_json()["runs"]}


def _firing(prom: PromServer) -> set[tuple[str, str, str]]:
    """(alert, run, reason) of every alert Prometheus has firing now."""
    with urllib.request.urlopen(f"{prom.url}/api/v1/alerts", timeout=10) as r:
        alerts = json.loads(r.read())["data"]["alerts"]
    return {
        (a["labels"]["alertname"], a["labels"].get("run", ""), a["labels"].get("reason", ""))
        for a in alerts
        if a["state"] == "firing"
    }


def _ever_fired(prom: PromServer) -> set[tuple[str, str]]:
    """(alert, run) of every alert that fired at any evaluation of the test."""
    rows = prom.query(
        'count by (alertname, run) (count_over_time(ALERTS{alertstate="firing"}[30m]))'
    )
    return {(r["metric"]["alertname"], r["metric"].get("run", "")) for r in rows}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("deployments")
    logs, store = root / "logs", root / "store"
    logs.mkdir()
    tail_port = free_port()
    tail_cmd = [sys.executable, "-m", "rlvitals", "tail", "--follow", "--poll", "0.5"]
    tail_cmd += ["--set", f"planned_steps={PLANNED}", str(logs)]
    with mock.patch.dict(os.environ, _env(store, tail_port), clear=True):
        tail = spawn_until_ready(
            tail_cmd, root / "tail.log", f"http://127.0.0.1:{tail_port}/metrics", 200, 60
        )
    trainers: list[Trainer] = []
    prom: PromServer | None = None
    try:
        # Prometheus first, scraping every trainer's port: a trainer killed before its first
        # scrape was never seen, and can page nothing
        ports = {f"self-{case}": free_port() for case in CASES}
        rules = prometheus_rules(yaml.safe_load(PROVISIONED.read_text()), scale=SCALE)
        (root / "prom").mkdir()
        (root / "prom" / "rules.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
        own = ", ".join(f'"127.0.0.1:{port}"' for port in ports.values())
        config = textwrap.dedent(
            f"""
            global:
              scrape_interval: 500ms
              scrape_timeout: 500ms
              evaluation_interval: 500ms
            rule_files: ["{root / "prom" / "rules.yml"}"]
            scrape_configs:
              - job_name: {EXPORTER_JOB}
                static_configs: [{{targets: ["127.0.0.1:{tail_port}"]}}]
              - job_name: {TRAINING_JOB}
                static_configs: [{{targets: [{own}]}}]
            """
        )
        prom = PromServer(root / "prom", config)
        prom.start()
        for deployment in DEPLOYMENTS:
            for case in CASES:
                name = f"{deployment}-{case}"
                trainers.append(_start(deployment, case, root, logs, store, ports.get(name)))
        yield {
            "root": root,
            "store": store,
            "tail": tail,
            "tail_port": tail_port,
            "trainers": {t.name: t for t in trainers},
            "prom": prom,
        }
    finally:
        for trainer in trainers:
            for proc in (trainer.proc, trainer.launcher):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            if trainer.launcher is not None and _state(trainer.child) != "gone":
                os.kill(trainer.child, signal.SIGKILL)
        tail.send_signal(signal.SIGTERM)
        tail.wait(30)
        if prom is not None:
            prom.stop()


def _wait(what: str, check: Any, timeout: float, *context: Any) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            said = "\n".join(str(c() if callable(c) else c) for c in context)
            pytest.fail(f"{what}: not within {timeout} s\n{said}")
        time.sleep(0.3)


def test_each_end_has_its_own_status_and_alert_in_every_deployment(
    deployed: dict[str, Any],
) -> None:
    trainers: dict[str, Trainer] = deployed["trainers"]
    prom: PromServer = deployed["prom"]
    store: Path = deployed["store"]
    root: Path = deployed["root"]
    tail_log = root / "tail.log"
    # each trainer is ended as soon as it logged its steps, within the stall window (a trainer
    # left idle longer is stalled first, and pages as such: rightly)
    problems: list[str] = []

    def end(trainer: Trainer) -> None:
        out = (trainer.launcher or trainer.proc).stdout
        assert out is not None
        line = out.readline()
        if line != "READY\n":
            problems.append(f"{trainer.name}: {line!r}")
            return
        if trainer.deployment == "self" and trainer.case in ("kill", "zombie"):
            # a trainer killed before Prometheus ever scraped it was never seen, and can page
            # nothing (docs/status.md): on a loaded machine the first scrapes of a starting
            # process can time out, so kill it only once a scrape of it is stored
            seen = f'rlvitals_writer_heartbeat_timestamp_seconds{{run="{trainer.name}"}} > 0'
            deadline = time.monotonic() + 60
            while not prom.query(seen):
                if time.monotonic() > deadline:
                    problems.append(f"{trainer.name}: never scraped")
                    return
                time.sleep(0.1)
        if trainer.deployment == "followed" and trainer.case in ("kill", "zombie"):
            # likewise a follower judges a writer's end only once it has seen the writer holding
            # the logs (it looks once a second here): a writer killed before that left logs that
            # do not say how the run ended, and the run rightly reads `ended` (seen in CI)
            deadline = time.monotonic() + 60
            while not _writer_seen(store, trainer.name, trainer.pid):
                if time.monotonic() > deadline:
                    problems.append(f"{trainer.name}: its writer never seen")
                    return
                time.sleep(0.1)
        if trainer.case == "kill":
            trainer.proc.send_signal(signal.SIGKILL)
            trainer.proc.wait(10)
        elif trainer.case == "zombie":
            os.kill(trainer.child, signal.SIGKILL)  # its launcher never reaps it
            deadline = time.monotonic() + 10
            while _state(trainer.child) != "Z":
                if time.monotonic() > deadline:
                    problems.append(f"{trainer.name}: not a zombie")
                    return
                time.sleep(0.01)
        elif trainer.case == "normal" and trainer.proc.wait(30) != 0:
            problems.append(f"{trainer.name}: exit {trainer.proc.returncode}")

    enders = [threading.Thread(target=end, args=(t,)) for t in trainers.values()]
    for thread in enders:
        thread.start()
    for thread in enders:
        thread.join(120)
    assert not problems, problems
    killed_at = time.monotonic()

    expected = {(CRASHED, f"{d}-{c}") for d in DEPLOYMENTS for c in ("kill", "zombie")} | {
        (STALLED, f"{d}-hang") for d in DEPLOYMENTS
    }

    # a crash resolves ENDED_S after it was last served (the documented hour): gather what fired
    seen: dict[tuple[str, str], str] = {}

    def firing() -> set[tuple[str, str]]:
        for alert, run, why in _firing(prom):
            if alert != UNHEALTHY:
                seen[(alert, run)] = why
        return set(seen)

    _wait(
        "every crash and hang paged",
        lambda: expected <= firing(),
        60,
        lambda: sorted(seen.items()),
        lambda: _ui(store),
        lambda: prom.query("last_over_time(rlvitals_writer_heartbeat_timestamp_seconds[1h])"),
        lambda: prom.query('up{job="rlvitals-training-job"}'),
        lambda: prom.query('rlvitals_run_status{job="rlvitals-training-job"}'),
        lambda: tail_log.read_text(errors="replace")[-3000:],
    )
    print("all paged", round(time.monotonic() - killed_at, 1), "s after the kills")
    reasons = seen
    assert reasons[(CRASHED, "self-kill")] == WRITER_GONE
    assert reasons[(CRASHED, "self-zombie")] == WRITER_GONE
    assert "killed by SIGKILL" in reasons[(CRASHED, "followed-zombie")]
    assert "zombie" in reasons[(CRASHED, "followed-zombie")]
    # the follower may see the killed trainer before this test reaps it (its exit status then
    # read from the process table) or after (the planned length says it stopped early); a
    # zombie reaped a moment later is not called one
    kill_reason = reasons[(CRASHED, "followed-kill")]
    assert "zombie" not in kill_reason, kill_reason
    assert "of the planned 20" in kill_reason or "killed by SIGKILL" in kill_reason, kill_reason
    assert "zombie" in reasons[(CRASHED, "store-zombie")]
    # the same race for the store's reader: between the kill and this test's wait() the
    # trainer is a zombie, and a reader that looks then records what it saw
    store_kill = reasons[(CRASHED, "store-kill")]
    assert "stopped without recording an end" in store_kill or (
        "killed by SIGKILL" in store_kill and "zombie" in store_kill
    ), store_kill

    # the embedded UI: the sidecar's store (followed and store deployments), each self-served
    # trainer's own store
    ui = _ui(store)
    for name in trainers:
        if name.startswith("self-"):
            ui.update(_ui(root / "stores" / name))
    want = {"normal": "finished", "kill": "crashed", "zombie": "crashed", "hang": "stalled"}
    assert {name: ui[name][0] for name in trainers} == {
        name: want[t.case] for name, t in trainers.items()
    }, ui
    assert "planned length" in ui["followed-normal"][1], ui["followed-normal"]
    # /metrics: the sidecar pages for what it follows and for its store's writers; a training
    # process that serves its own pages for its hang
    served = _served(deployed["tail_port"])
    for name in ("followed-hang", "store-hang"):
        assert served[name][0] == "stalled", served
    # The sidecar serves a crash for ENDED_S (the scaled hour) after it happened, then lets it
    # go: its alert above fired, so it was served; one read here after the slowest trainer ended
    # may come past that on a loaded machine (`KeyError: 'followed-kill'`, seen in CI), so what
    # is still served is checked. (Polling each right after its end instead was tried once in
    # CI: that run paged a crash for `self-hang`, a missed scrape of the hung trainer read as a
    # process gone; whether the polling's load caused it is not known.)
    for name in ("followed-kill", "followed-zombie", "store-kill", "store-zombie"):
        assert served.get(name, ("crashed", ""))[0] == "crashed", served
    assert not {"followed-normal", "store-normal"} & set(served), served
    assert _served(trainers["self-hang"].port or 0)["self-hang"][0] == "stalled"

    # the rules: over the whole test, exactly these fired (a normal exit nothing, a crash never
    # as a stall, a hang never as a crash)
    time.sleep(2)
    ever = {(a, r) for a, r in _ever_fired(prom) if a != UNHEALTHY}
    assert ever == expected, sorted(ever ^ expected)
