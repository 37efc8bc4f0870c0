"""Which job a training process belongs to, and which rank of it it is: from the launcher.

The ranks of one job are one run (DESIGN.md, "Scale"). A process learns its rank and its job from
what it is given: `rank=` passed to `exporter.init`, else the launcher's environment, read when
`init` is called (never at import):

- torchrun (and launchers that set its variables: `accelerate`, DeepSpeed's launcher): `RANK`,
  `WORLD_SIZE`, `LOCAL_RANK`, and `TORCHELASTIC_RUN_ID`, the rendezvous id every worker of one
  launch shares (torch's `LocalElasticAgent._start_workers` sets them; `--standalone` makes it a
  fresh uuid per launch; without `--rdzv-id` it is the literal `none`, which identifies nothing);
- Slurm: `SLURM_PROCID` of `SLURM_NTASKS` tasks, in job `SLURM_JOB_ID` (step `SLURM_STEP_ID`);
- any launcher giving `MASTER_ADDR`/`MASTER_PORT` (the rendezvous every rank dials);
- none of these, with `rank=` given: the parent process on this host (the one that started the
  ranks, as `multiprocessing` does).

The job's key is what the store keeps with the run: a rank whose key matches a stored run of
the same name joins it; another key is another job, which gets `name-2` unless it resumes. A
launcher's job id is **firm**: a worker restarted under the same id (an elastic restart) goes
on with its rank. The others (a rendezvous address, a parent process) are **loose**: ports and
parents are reused, so such a key joins a run only while the rank has no place in it yet.

A single process (no rank given, a world of one) is no rank at all: its run is keyed as before.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError
from .processes import start_ticks

__all__ = ["Job", "job_of"]

_NO_RDZV_ID = "none"
"""torchrun's default `--rdzv-id`: every launch without one shares it."""


@dataclass(frozen=True)
class Job:
    """A process's place in its job: `rank` (None: a single process), the job's `key` (None
    when nothing identifies it), whether that key is a launcher's job id (`firm`), what set
    it (`source`: torchrun, slurm, rendezvous, parent, or none) and the `world_size` when the
    launcher says it."""

    rank: int | None
    key: str | None = None
    firm: bool = False
    source: str = "none"
    world_size: int | None = None

    def describe(self) -> str:
        if self.rank is None:
            return "a single process"
        of = f" of {self.world_size}" if self.world_size is not None else ""
        return f"rank {self.rank}{of} ({self.source})"


def _number(environ: Mapping[str, str], name: str, *, least: int) -> int | None:
    """An integer variable of the launcher, None when unset; a malformed one is refused."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < least:
        raise ConfigError(
            f"{name}={raw!r} in the environment is not an integer >= {least}; the launcher "
            "(torchrun, Slurm) sets it for each rank: unset it, or pass rank= to exporter.init"
        )
    return value


def _launcher_rank(environ: Mapping[str, str]) -> tuple[int | None, int | None]:
    """(rank, world size) the launcher gave this process; (None, None) for a single process."""
    world = _number(environ, "WORLD_SIZE", least=1)
    rank = _number(environ, "RANK", least=0)
    if rank is None:
        tasks = _number(environ, "SLURM_NTASKS", least=1)
        if tasks is None:
            tasks = _number(environ, "SLURM_NPROCS", least=1)
        if tasks is not None and tasks > 1:
            rank, world = _number(environ, "SLURM_PROCID", least=0), tasks
    if rank is not None and world is not None and rank >= world:
        raise ConfigError(
            f"rank {rank} is not below the world size {world} the launcher gave "
            "(RANK/SLURM_PROCID, WORLD_SIZE/SLURM_NTASKS); pass rank= to exporter.init"
        )
    if world == 1:
        return None, None  # a world of one: a single process
    return rank, world


def _key(environ: Mapping[str, str]) -> tuple[str | None, bool, str]:
    """(key, firm, source) of the job from the launcher's environment."""
    run_id = environ.get("TORCHELASTIC_RUN_ID", "").strip()
    if run_id and run_id != _NO_RDZV_ID:
        return f"torchrun:{run_id}", True, "torchrun"
    slurm = environ.get("SLURM_JOB_ID", "").strip()
    if slurm:
        step = environ.get("SLURM_STEP_ID", "").strip()
        return f"slurm:{slurm}" + (f".{step}" if step else ""), True, "slurm"
    addr = environ.get("MASTER_ADDR", "").strip()
    port = environ.get("MASTER_PORT", "").strip()
    if addr and port:
        return f"rendezvous:{addr}:{port}", False, "rendezvous"
    return None, False, "none"


def job_of(rank: int | None, environ: Mapping[str, str] | None = None) -> Job:
    """This process's job: `rank` as given (else the launcher's), and the job's key.

    `environ` defaults to `os.environ`, read now."""
    env = os.environ if environ is None else environ
    launched, world = _launcher_rank(env)
    if rank is None:
        rank = launched
    elif launched is None:
        world = None  # a rank given by hand: the launcher's world is not this one's
    if rank is None:
        return Job(None)
    key, firm, source = _key(env)
    if key is None:
        # ranks started by one process on this host (multiprocessing, a hand-written launcher)
        parent = os.getppid()
        key = f"parent:{socket.gethostname()}:{parent}:{start_ticks(parent)}"
        source = "parent"
    return Job(rank, key, firm, source, world)
