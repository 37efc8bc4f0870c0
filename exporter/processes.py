"""This host's process table, as far as it can be read: whether a process still runs, how it
exited while that can still be read, and which processes hold a file open for writing.

- A process **runs** when its pid exists, started when we were told (a recycled pid is another
  process) and is not a zombie. A zombie has exited (its files are closed, its sockets gone)
  and waits for its parent to reap it: a launcher that never calls `wait` leaves one behind.
- A zombie's **exit status** is still in the process table (`/proc/PID/stat`, field 52, Linux
  3.5 and later, for processes of the same user): killed by a signal, or exited with a code.
  Once reaped, how a process ended is gone: nothing in `/proc` keeps it.
- **Writers of a file**: the processes whose open files (`/proc/PID/fd`) include it, opened for
  writing (`/proc/PID/fdinfo/FD` flags), which is how a follower of a log finds the trainer
  writing it. Only processes of the same user (or all, as root) can be read, and only in this
  pid namespace: a writer in another container, on another host, or one that opens its log
  only for each write is not seen, and what is not seen is unknown, never "gone".

Without `/proc` (macOS) only whether a pid exists is known (`kill(pid, 0)`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Exit",
    "ProcessState",
    "Writer",
    "describe_exit",
    "holds_for_writing",
    "process_state",
    "start_ticks",
    "writers_of",
]

_PROC = Path("/proc")
_WRITE_ACCESS = 0o3  # O_WRONLY | O_RDWR in the flags of /proc/PID/fdinfo/FD


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 is index 0)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    try:
        return text[text.rindex(")") + 2 :].split()
    except ValueError:
        return None


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (starttime), None without /proc or for no such process."""
    fields = _stat_fields(pid)
    try:
        return None if fields is None else int(fields[19])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Exit:
    """How a process ended: the signal that killed it, or the code it exited with."""

    signal: int | None = None
    code: int | None = None

    @property
    def normal(self) -> bool:
        return self.signal is None and self.code == 0


def describe_exit(end: Exit) -> str:
    if end.signal is not None:
        try:
            name = signal.Signals(end.signal).name
        except ValueError:
            name = f"signal {end.signal}"
        return f"killed by {name}"
    return f"exited with status {end.code}"


def _exit_from_wait_status(status: int) -> Exit:
    # the wait status waitpid would give: low 7 bits the signal, else the code in bits 8-15
    if status & 0x7F:
        return Exit(signal=status & 0x7F)
    return Exit(code=(status >> 8) & 0xFF)


@dataclass(frozen=True)
class ProcessState:
    """`running`; `zombie` (exited, not reaped) with its `exit` where readable; `gone` (no such
    process, or the pid now names another one); `unknown` (no /proc and no answer)."""

    state: str
    exit: Exit | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def process_state(pid: int, started: int | None = None) -> ProcessState:
    """The state of `pid` on this host; `started` (its start ticks) tells a recycled pid."""
    fields = _stat_fields(pid)
    if fields is None:
        if pid == os.getpid():
            return ProcessState("running")
        if not _PROC.is_dir():
            return ProcessState("running" if _pid_exists(pid) else "gone")
        return ProcessState("gone")
    try:
        ticks = int(fields[19])
    except (ValueError, IndexError):
        ticks = None
    if started is not None and ticks is not None and ticks != started:
        return ProcessState("gone")  # the pid was reused by another process
    if fields and fields[0] in ("Z", "X"):
        end = None
        if len(fields) >= 50:
            try:
                end = _exit_from_wait_status(int(fields[49]))
            except ValueError:
                end = None
        return ProcessState("zombie", end)
    return ProcessState("running")


@dataclass(frozen=True)
class Writer:
    """A process holding a file open for writing: pid and start ticks."""

    pid: int
    started: int | None


def _for_writing(pid: str, fd: str) -> bool:
    try:
        text = (_PROC / pid / "fdinfo" / fd).read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return bool(int(line.split()[1], 8) & _WRITE_ACCESS)
            except (ValueError, IndexError):
                return False
    return False


def _real(paths: Iterable[str | Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        try:
            out[os.path.realpath(p)] = str(p)
        except OSError:
            continue
    return out


def writers_of(paths: Collection[str | Path]) -> dict[str, tuple[Writer, ...]]:
    """path -> the processes (other than this one) holding it open for writing, for each of
    `paths` some process holds; one pass over /proc for all of them."""
    wanted = _real(paths)
    found: dict[str, list[Writer]] = {}
    if not wanted:
        return {}
    try:
        pids = [p for p in os.listdir(_PROC) if p.isdigit()]
    except OSError:
        return {}
    me = str(os.getpid())
    for pid in pids:
        if pid == me:
            continue
        try:
            fds = os.listdir(_PROC / pid / "fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                target = os.readlink(_PROC / pid / "fd" / fd)
            except OSError:
                continue
            path = wanted.get(target)
            if path is not None and _for_writing(pid, fd):
                writer = Writer(int(pid), start_ticks(int(pid)))
                if writer not in found.setdefault(path, []):
                    found[path].append(writer)
    return {path: tuple(ws) for path, ws in found.items()}


def holds_for_writing(pid: int, paths: Collection[str | Path]) -> bool:
    """Whether `pid` holds any of `paths` open for writing (False when it cannot be read)."""
    wanted = _real(paths)
    try:
        fds = os.listdir(_PROC / str(pid) / "fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(_PROC / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target in wanted and _for_writing(str(pid), fd):
            return True
    return False
