"""Who writes a run: the writer lease a process holds while it logs, imports or follows a run.

A lease names its holder (pid, host, the process's start time) and is renewed by the holder's
worker thread (`Lifecycle.renew_every_s`). It answers two questions from records, not from
silence: may a second process go on with this run (no, while the holder lives), and did the
writer die without saying how it ended (its process is gone, or, on another host, it stopped
renewing for `Lifecycle.lease_ttl_s`).

On the holder's own host liveness is read from the process table (`processes.py`): the pid
exists, started when the lease says (a recycled pid is another process) and is not a zombie (a
process that exited and that its parent has not reaped). Elsewhere only the renewals tell.

A follower's lease (`tail`) also carries what it saw of the process writing the run's logs
(`writer`, on the follower's host, and whether it still held a log open for writing): the
follower is not the trainer, and only that writer can make a followed run read stalled.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .processes import ProcessState, process_state, start_ticks

__all__ = [
    "LEASE_COLUMNS",
    "OLD_LEASE_COLUMNS",
    "Holder",
    "Lease",
    "holder_alive",
    "holder_state",
    "lease_from_row",
    "this_process",
]

OLD_LEASE_COLUMNS = "pid, host, started, kind, since, renewed"
"""The columns of a `leases` table from before followers recorded the logs' writer."""
LEASE_COLUMNS = OLD_LEASE_COLUMNS + ", writer_pid, writer_started, writer_open"
"""The columns of the store's `leases` table a lease is read from, in `lease_from_row`'s order."""


@dataclass(frozen=True)
class Holder:
    """A process: pid, host name, and its start time in clock ticks since boot (None where the
    system does not say, as on macOS)."""

    pid: int
    host: str
    started: int | None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


@dataclass(frozen=True)
class Lease:
    """A run's writer: who (`holder`), doing what (`kind`: log, import or tail), since when and
    last renewed when (store clock, Unix seconds)."""

    holder: Holder
    kind: str
    since: float
    renewed: float
    writer: Holder | None = None
    """A follower's lease: the process it saw writing the run's logs (on its own host), None
    when it saw none (another host or container, or a writer that opens its log only to
    write)."""
    writer_open: bool = False
    """Whether `writer` held one of the run's logs open for writing at the follower's last look
    (a writer that closed its logs and runs on is not writing them)."""


def lease_from_row(row: Sequence[Any]) -> Lease:
    """A lease from its stored columns (`LEASE_COLUMNS`, or `OLD_LEASE_COLUMNS`)."""
    pid, host, started, kind, since, renewed = row[:6]
    writer = None
    writer_open = False
    if len(row) >= 9 and row[6] is not None:
        writer = Holder(int(row[6]), str(host), row[7])
        writer_open = bool(row[8])
    return Lease(
        Holder(int(pid), str(host), started), str(kind), since, renewed, writer, writer_open
    )


def this_process() -> Holder:
    pid = os.getpid()
    return Holder(pid, socket.gethostname(), start_ticks(pid))


def holder_state(holder: Holder) -> ProcessState | None:
    """The holder's process state when it is on this host (None elsewhere: unknown)."""
    if holder.host != socket.gethostname():
        return None
    return process_state(holder.pid, holder.started)


def holder_alive(lease: Lease, now: float, ttl_s: float) -> bool:
    """Whether the lease's holder still runs: on this host, from the process table (a zombie
    does not run); elsewhere, whether it renewed within `ttl_s` seconds."""
    state = holder_state(lease.holder)
    if state is not None:
        return state.running
    return now - lease.renewed < ttl_s
