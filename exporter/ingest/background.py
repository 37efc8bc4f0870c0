"""Follow training logs from inside another process (`rlvitals serve LOGDIR`): the `tail --follow`
loop of `commands.follow_logs` in a daemon thread, restarted when it fails, its state readable
at any moment (the page and `/api/health` show it).

A failure never passes silently: its last error line is kept (with when it happened and how
often the loop was restarted), written to stderr as tail writes it, and the loop is started
again after a pause that grows from 1 s to 30 s. A restart reads on from the read positions
stored with the samples, so nothing is read twice and no run becomes NAME-2.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, TextIO

import registry

from ..sources import LogFile
from .commands import follow_logs, tail_arguments

__all__ = ["FollowState", "Followed", "Follower"]

_FIRST_PAUSE = 1.0
_LONGEST_PAUSE = 30.0

State = Literal["starting", "following", "restarting", "stopped"]


@dataclass(frozen=True)
class Followed:
    """One folder (or file) named on the command line and how many log files were found under
    it (None before the first look)."""

    path: str
    logs: int | None


@dataclass(frozen=True)
class FollowState:
    """What the follower is doing: `state`, the folders and their log counts, and the last
    failure (`error`, its time `error_at`, `restarts` so far), kept after a restart so it can
    be read."""

    state: State
    folders: tuple[Followed, ...]
    restarts: int = 0
    error: str | None = None
    error_at: float | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "state": self.state,
            "folders": [{"path": f.path, "logs": f.logs} for f in self.folders],
            "restarts": self.restarts,
            "error": self.error,
            "error_at": self.error_at,
        }


class _Said(io.StringIO):
    """Tail's stderr: passed on to `out` line by line (nothing kept but the last
    `rlvitals: error:` line)."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self._out = out
        self._pending = ""
        self.last_error: str | None = None

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line.startswith("rlvitals: error: "):
                self.last_error = line.removeprefix("rlvitals: error: ")
            self._out.write(line + "\n")
        if lines:
            self._out.flush()
        return len(text)


class Follower:
    """`tail --follow ARGV` in a background thread; `start()`, `state()`, `stop()`.

    `argv` are tail's arguments (the paths and flags, as `rlvitals tail` takes them); they are
    parsed at once, so bad ones raise SystemExit in the caller, not in the thread. `reg`, when
    given, is the registry `--registry` names, already loaded (it is not loaded again).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        out: TextIO | None = None,
        first_pause: float = _FIRST_PAUSE,
        reg: registry.Registry | None = None,
    ) -> None:
        self._args = tail_arguments(argv)
        self._registry = reg
        self._paths = tuple(str(p) for p in self._args.paths)
        self._out = out or sys.stderr
        self._first_pause = first_pause
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._state = FollowState("starting", tuple(Followed(p, None) for p in self._paths))
        self._thread = threading.Thread(target=self._loop, name="rlvitals-follow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def state(self) -> FollowState:
        with self._lock:
            return self._state

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop following: what was read is stored (tail's drain); False if it took longer
        than `timeout` seconds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _set(self, **changes: object) -> None:
        with self._lock:
            self._state = replace(self._state, **changes)  # type: ignore[arg-type]

    def _polled(self, files: Sequence[LogFile]) -> None:
        folders = tuple(Followed(p, _count_under(p, files)) for p in self._paths)
        self._set(state="following", folders=folders)

    def _loop(self) -> None:
        pause = self._first_pause
        while not self._stop.is_set():
            said = _Said(self._out)
            started = time.monotonic()
            try:
                code = follow_logs(
                    self._args,
                    stop=self._stop,
                    err=said,
                    on_poll=self._polled,
                    reg=self._registry,
                )
                error = said.last_error or f"the log follower ended (exit {code})"
            except BaseException as exc:  # nothing may end the thread unsaid
                error = f"{type(exc).__name__}: {exc}"
            if self._stop.is_set():
                break
            # a loop that ran a good while before failing starts again soon; one failing at
            # once (a store it cannot open) waits longer each time
            if time.monotonic() - started > _LONGEST_PAUSE:
                pause = self._first_pause
            restarts = self.state().restarts + 1
            self._set(state="restarting", error=error, error_at=time.time(), restarts=restarts)
            print(
                f"rlvitals serve: following the logs failed ({error}); starting again in "
                f"{pause:g} s (restart {restarts})",
                file=self._out,
                flush=True,
            )
            if self._stop.wait(pause):
                break
            pause = min(_LONGEST_PAUSE, pause * 2)
        self._set(state="stopped")


def _count_under(root: str, files: Sequence[LogFile]) -> int:
    """How many of `files` were found under `root` (a folder, or the file itself)."""
    base = os.path.abspath(root)
    count = 0
    for log in files:
        path = os.path.abspath(log.path)
        if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
            count += 1
    return count
