"""Who writes a run: the writer lease a process holds while it logs, imports or follows a run.

A lease names its holder (pid, host, the process's start time) and is renewed by the holder's
worker thread (`Lifecycle.renew_every_s`). It answers two questions from records, not from
silence: may a second process go on with this run (no, while the holder lives), and did the
writer die without saying how it ended (its process is gone, or, on another host, it stopped
renewing for `Lifecycle.lease_ttl_s`).

On the holder's own host liveness is read from the process table: the pid exists and started
when the lease says (a recycled pid is another process). Elsewhere only the renewals tell.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LEASE_COLUMNS", "Holder", "Lease", "holder_alive", "lease_from_row", "this_process"]

LEASE_COLUMNS = "pid, host, started, kind, since, renewed"
"""The columns of the store's `leases` table a lease is read from, in `lease_from_row`'s order."""

_PROC = Path("/proc")


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


def lease_from_row(row: Sequence[Any]) -> Lease:
    """A lease from its stored columns (`LEASE_COLUMNS`)."""
    pid, host, started, kind, since, renewed = row[:6]
    return Lease(Holder(int(pid), str(host), started), str(kind), since, renewed)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (starttime), None without /proc or for no such process."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    try:
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def this_process() -> Holder:
    pid = os.getpid()
    return Holder(pid, socket.gethostname(), _start_ticks(pid))


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return True
    return True


def holder_alive(lease: Lease, now: float, ttl_s: float) -> bool:
    """Whether the lease's holder still runs: on this host, from the process table; elsewhere,
    whether it renewed within `ttl_s` seconds."""
    holder = lease.holder
    if holder.host == socket.gethostname():
        if holder.pid != os.getpid() and not _pid_exists(holder.pid):
            return False
        if holder.started is not None:
            started = _start_ticks(holder.pid)
            if started is not None and started != holder.started:
                return False  # the pid was reused by another process
        return True
    return now - lease.renewed < ttl_s
