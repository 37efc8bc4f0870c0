"""The ranks of one job are one run (issue 39, DESIGN.md "Scale"): real processes started as
torchrun starts its workers (RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_RUN_ID, MASTER_ADDR and
MASTER_PORT in each one's environment), each logging per-rank readings and rank 0 alone a
training metric, one of them killed as `kill -9` kills.

What the user is promised, and checked here: one run whatever the number of ranks or hosts,
every rank's rows present under its rank (0 lost: each rank's steps, all of them; 0 mixed: each
row's value is the one its rank logged), and the run's status crashed naming the dead rank.
Every value the worker logs says which rank logged it (`rank_worker.py`).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from influx_server import InfluxDatabase, free_port

import registry
from exporter import ExporterSettings, Outbox
from exporter.lifecycle import Lifecycle, RunStatus
from exporter.schema import RANK_END
from grafana.datasource.history.influx_http import InfluxHttp
from grafana.datasource.history.influxql import InfluxHistory
from grafana.datasource.run_summary import run_summary

WORKER = Path(__file__).with_name("rank_worker.py")
ROOT = Path(__file__).resolve().parents[3]


def _launch(
    store: Path,
    ranks: Sequence[int],
    world: int,
    job: str,
    steps: int,
    *,
    kill: tuple[int, int] | None = None,
    mark: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[int, subprocess.Popen[bytes]]:
    """Start one process per rank on one "host" (a store of its own), as torchrun would."""
    port = str(free_port())
    procs = {}
    for local, rank in enumerate(ranks):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")},
            "PYTHONPATH": str(ROOT),
            "RLVITALS_STORE": str(store),
            "RANK": str(rank),
            "LOCAL_RANK": str(local),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(len(ranks)),
            "TORCHELASTIC_RUN_ID": job,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            **(extra or {}),
        }
        args = [sys.executable, str(WORKER), "dist", str(steps)]
        if kill is not None:
            env["KILL_RANK"] = str(kill[0])
            args.append(str(kill[1]))
        if mark is not None:
            env["KILL_MARK"] = str(mark)
        procs[rank] = subprocess.Popen(args, env=env, stderr=subprocess.PIPE)
    return procs


def _wait(procs: Mapping[int, subprocess.Popen[bytes]], killed: int | None) -> None:
    for rank, proc in procs.items():
        _, err = proc.communicate(timeout=600)
        expected = -9 if rank == killed else 0
        assert proc.returncode == expected, (rank, proc.returncode, err.decode()[-2000:])


def _expected_steps(rank: int, steps: int, kill: tuple[int, int]) -> int:
    """Steps a rank logged: all of them, or up to and including the step it was killed at."""
    return kill[1] + 1 if rank == kill[0] else steps


def _rank_of(field: str, value: float) -> int:
    """The rank a stored value says logged it (the worker's formulas, read backwards)."""
    if field == "samples_per_second":
        return int(value // 1000) - 1
    return int(value)  # grad_norm = rank + step / 10**6


def test_eight_ranks_of_a_job_log_one_run_with_every_rows_rank_and_the_killed_rank_named(
    tmp_path: Path,
) -> None:
    steps, kill = 20_000, (3, 10_000)
    store = tmp_path / "store"
    procs = _launch(
        store, range(8), 8, str(uuid.uuid4()), steps, kill=kill, mark=tmp_path / "killed"
    )
    _wait(procs, killed=kill[0])

    with Outbox(store / "outbox.sqlite") as box:
        runs = box.runs()
        assert [r.run for r in runs] == ["dist"]  # one run, never dist-2 ... dist-8
        status = Lifecycle().status(runs[0].recorded)
        events = box.events("dist", RANK_END)
    assert status.status is RunStatus.CRASHED
    assert status.reason.startswith("rank 3: "), status.reason
    # each rank's end reached the store as an event (what InfluxDB is told), the dead one's too
    ends = {e.rank: e.fields.get("state") for e in events}
    assert ends == {r: "crashed" if r == kill[0] else "finished" for r in range(8)}

    with sqlite3.connect(store / "outbox.sqlite") as db:
        rows = db.execute(
            "SELECT rank, field, step, value FROM samples WHERE field IN "
            "('samples_per_second', 'grad_norm', 'episodic_return')"
        ).fetchall()
    seen: dict[tuple[int, str], set[int]] = {}
    mixed = []
    for rank, field, step, value in rows:
        seen.setdefault((rank, field), set()).add(step)
        if field != "episodic_return" and _rank_of(field, value) != rank:
            mixed.append((rank, field, step, value))
        if field == "episodic_return" and (rank != 0 or value != pytest.approx(step / 1000)):
            mixed.append((rank, field, step, value))
    assert mixed == []
    for rank in range(8):
        logged = set(range(_expected_steps(rank, steps, kill)))
        assert seen[(rank, "samples_per_second")] == logged, rank  # 0 lost
        assert seen[(rank, "grad_norm")] == logged, rank
    # the training metric only rank 0 logs is rank 0's alone
    assert {k for k in seen if k[1] == "episodic_return"} == {(0, "episodic_return")}
    assert seen[(0, "episodic_return")] == set(range(steps))


def test_ranks_on_two_hosts_write_one_run_through_influxdb_with_no_shared_file(
    tmp_path: Path, influx: InfluxDatabase, builtin: registry.Registry
) -> None:
    steps, kill = 5_000, (6, 2_000)
    job = str(uuid.uuid4())
    settings = ExporterSettings(store=tmp_path, influx_url=influx.url, influx_database=influx.name)
    out = {
        "RLVITALS_INFLUX_URL": settings.influx_url or "",
        "RLVITALS_INFLUX_DATABASE": settings.influx_database,
    }
    # two hosts: two stores, each forwarding to the one InfluxDB; rank 6 dies on host b
    host_a = _launch(tmp_path / "a", range(4), 8, job, steps, extra=out)
    host_b = _launch(
        tmp_path / "b", range(4, 8), 8, job, steps, kill=kill, mark=tmp_path / "b-killed", extra=out
    )
    _wait(host_a, killed=None)
    _wait(host_b, killed=kill[0])

    assert {r["value"] for r in influx.query('SHOW TAG VALUES WITH KEY = "run"')} == {"dist"}
    rows = influx.query(
        'SELECT "samples_per_second", "grad_norm" FROM "throughput", "optimization" '
        'WHERE "run" = \'dist\' GROUP BY "rank"'
    )
    seen: dict[tuple[int, str], set[int]] = {}
    mixed = []
    for row in rows:
        rank = int(row["rank"])
        for field in ("samples_per_second", "grad_norm"):
            if row.get(field) is None:
                continue
            seen.setdefault((rank, field), set()).add(int(row["time"]))
            if _rank_of(field, row[field]) != rank:
                mixed.append((rank, field, row["time"], row[field]))
    assert mixed == []
    for rank in range(8):
        logged = set(range(_expected_steps(rank, steps, kill)))
        assert seen[(rank, "samples_per_second")] == logged, rank
        assert seen[(rank, "grad_norm")] == logged, rank
    returns = influx.query(
        'SELECT "episodic_return" FROM "reward" WHERE "run" = \'dist\' GROUP BY "rank"'
    )
    assert {r["rank"] for r in returns} == {"0"} and len(returns) == steps

    # the datasource reading InfluxDB: one run, crashed, the dead rank named
    history = InfluxHistory(InfluxHttp(influx.url, influx.name), builtin)
    assert history.runs() == ("dist",)
    summary = run_summary(history, Lifecycle(), "dist")
    assert summary["status"] == "crashed", summary
    assert str(summary["status_reason"]).startswith("rank 6: "), summary
    assert summary["last_step"] == steps - 1
