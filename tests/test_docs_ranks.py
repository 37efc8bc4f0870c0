"""docs/ranks.md is true command by command: its torchrun job on one host makes one run of four
ranks, `rlvitals runs` lists it finished, and its multi-host command, started twice as two
hosts (two stores, nothing shared but one real InfluxDB), makes one run of eight ranks in that
InfluxDB, as the datasource reading it shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from influx_server import InfluxDatabase
from test_readme_commands import _command, _env, _run

import registry
from exporter.lifecycle import Lifecycle
from grafana.datasource.history import InfluxHistory, InfluxHttp
from grafana.datasource.run_summary import run_summary

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ranks.md"
_FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)

ONE_HOST = "torchrun --standalone --nproc-per-node 4 examples/ranks_train.py"
RUNS = "rlvitals runs"
HOSTS = (
    "RLVITALS_INFLUX_URL=$INFLUX torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d "
    "--rdzv-endpoint $HEAD:29400 --rdzv-id $JOB examples/ranks_train.py"
)
STEPS = 2000  # examples/ranks_train.py's default


def page_commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        _command(line)
        for block in _FENCE.findall(text)
        for line in block.splitlines()
        if _command(line)
    ]


def test_the_page_shows_these_commands_in_this_order() -> None:
    assert page_commands() == [ONE_HOST, RUNS, HOSTS]


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return folder


def _torchrun(line: str) -> str:
    """The page's line with this environment's torchrun (the one beside this Python)."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    return line.replace("torchrun ", f"{torchrun} ", 1)


def test_a_torchrun_job_on_one_host_is_one_run_finished_by_all_its_ranks(tmp_path: Path) -> None:
    work = _folder(tmp_path, "host")
    done = subprocess.run(
        _torchrun(ONE_HOST).split(),
        cwd=work,
        env=_env(work),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert said == [f"rank {r}: logged {STEPS} steps into run 'ranks-demo'" for r in range(4)]
    listed = _run(RUNS, work).stdout.splitlines()
    assert len(listed) == 2, listed  # the header and one run
    row = listed[1].split()
    assert (row[0], row[3]) == ("ranks-demo", "finished")
    assert "all 4 rank(s) finished" in listed[1]


def test_the_multi_host_command_on_two_hosts_is_one_run_of_eight_ranks_in_influxdb(
    tmp_path: Path, influx: InfluxDatabase, builtin: registry.Registry
) -> None:
    hosts = []
    job = str(uuid.uuid4())
    for name in ("host-a", "host-b"):
        work = _folder(tmp_path, name)
        env = {
            **_env(work),
            "INFLUX": influx.url,
            "HEAD": "127.0.0.1",
            "JOB": job,
            "RLVITALS_INFLUX_DATABASE": influx.name,  # the bundle's is `rlvitals`
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        hosts.append(
            subprocess.Popen(
                ["bash", "-c", HOSTS],
                cwd=work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in hosts:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert out.count(f"logged {STEPS} steps into run 'ranks-demo'") == 4, out
    history = InfluxHistory(InfluxHttp(influx.url, influx.name), builtin)
    assert history.runs() == ("ranks-demo",)
    ranks = {
        row["value"] for row in influx.query('SHOW TAG VALUES FROM "throughput" WITH KEY = "rank"')
    }
    assert ranks == {str(r) for r in range(8)}
    summary = run_summary(history, Lifecycle(), "ranks-demo")
    assert summary["status"] == "finished", summary
    assert summary["status_reason"] == "all 8 rank(s) finished"
    assert summary["last_step"] == STEPS - 1
