"""One rank of a training job, as a launcher starts it: `python rank_worker.py RUN STEPS
[KILL_AT]`, its rank and job from the environment (torchrun's RANK, WORLD_SIZE and
TORCHELASTIC_RUN_ID, or Slurm's), its store from RLVITALS_STORE (and InfluxDB from
RLVITALS_INFLUX_*).

Each rank logs its own throughput and gradient norm at every step (per-rank readings) and
rank 0 alone the episode return (a training metric only rank 0 logs, as most jobs do). Every
value says which rank logged it and at which step, so a reader can tell a row stored under
another rank's key ("mixed") from a row lost: throughput = 1000 * (rank + 1) + step % 1000,
gradient norm = rank + step / 10**6, episode return = step / 1000. With KILL_AT, the rank whose
number the environment's KILL_RANK gives stops at that step as `kill -9` would stop it (after a
flush: what it logged before is stored), without finish(). It first writes its pid to the file
KILL_MARK names, if any, and the other ranks given that file wait, before they finish, until
that process is gone: as ranks of a real job notice a dead peer at their next collective.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import exporter
from exporter.processes import process_state


def main() -> int:
    run_name, steps = sys.argv[1], int(sys.argv[2])
    kill_at = int(sys.argv[3]) if len(sys.argv) > 3 else None
    run = exporter.init(run_name, project="ranks")
    rank = run.rank
    assert rank is not None, "the launcher's environment gave no rank"
    killed = kill_at is not None and rank == int(os.environ.get("KILL_RANK", "-1"))
    mark = Path(os.environ["KILL_MARK"]) if os.environ.get("KILL_MARK") else None
    for step in range(steps):
        values = {
            "time/fps": 1000.0 * (rank + 1) + step % 1000,
            "grad_norm": rank + step / 10**6,
        }
        if rank == 0:
            values["rollout/ep_rew_mean"] = step / 1000
        run.log(step, values)
        if killed and step == kill_at:
            if not run.flush(120, sent=True):
                return 3
            if mark is not None:
                mark.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    if mark is not None and not killed:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pid = int(mark.read_text() or 0) if mark.exists() else 0
            state = process_state(pid, None) if pid else None
            if state is not None and not state.running:
                break
            time.sleep(0.05)
        else:
            return 4
    run.finish(120)
    print(f"{run.name} rank {rank}: {run.stats.accepted} accepted", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
