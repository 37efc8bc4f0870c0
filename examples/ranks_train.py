"""One training job, many processes, one run: what each rank of a torchrun job logs.

    torchrun --standalone --nproc-per-node 4 examples/ranks_train.py
    rlvitals runs

Every rank calls `exporter.init` with the same name; its rank and its job come from torchrun's
environment (RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID), read when `init` is called, so the ranks
join one run and each rank's rows carry its rank. Each rank logs its own step time, throughput
and gradient norm (per-rank readings: the run page shows rank 0's with the lowest and highest of
any rank beside it); rank 0 alone logs the episode return, as most jobs log training metrics.
No torch.distributed process group is needed for this: a stand-in loop of `--steps` steps.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Sequence

import exporter


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="training steps (default 2000)")
    parser.add_argument("--run", default="ranks-demo", help="run name (default ranks-demo)")
    args = parser.parse_args(argv)
    with exporter.init(args.run, project="ranks", framework="trl") as run:
        rank = run.rank or 0
        rng = random.Random(rank)
        last = time.perf_counter()
        for step in range(args.steps):
            now = time.perf_counter()
            values = {
                "step_time": now - last,
                "grad_norm": 1.0 + 0.1 * rng.random() + 0.05 * rank,
            }
            last = now
            if rank == 0:
                values["reward"] = 1.0 - math.exp(-step / 500)
            run.log(step, values)
    print(f"rank {rank}: logged {args.steps} steps into run {run.name!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
