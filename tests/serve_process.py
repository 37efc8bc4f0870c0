"""`python -m rlvitals serve` as a real process on a port it picks itself.

Serve is started with `--port 0` and the test reads the address serve prints. A port chosen by
the test (bind 0, close, pass the number on) can be taken by another xdist worker, or handed out
twice, before serve binds it; serve then exits "cannot listen" and the test fails for nothing
that serve did.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["WAIT_S", "ServeExited", "Served"]

ROOT = Path(__file__).resolve().parents[1]
# generous: the machine the suite runs on may be loaded (a serve process starts in seconds)
WAIT_S = 90.0
_ADDRESS = re.compile(r"on http://(\S+):(\d+)/ reading")


class ServeExited(AssertionError):
    """Serve ended before it printed its address (a refusal to start, or a crash)."""

    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f"serve exited {returncode} before it served:\n{stderr}")
        self.returncode = returncode
        self.stderr = stderr


class Served:
    """`python -m rlvitals serve ARGV` started in `cwd`, its stderr collected as it comes.

    The environment is this one without any RLVITALS_ variable (`clean`: only a PATH), plus
    `env`.
    """

    def __init__(
        self,
        cwd: Path,
        *argv: str,
        env: Mapping[str, str] | None = None,
        clean: bool = False,
    ) -> None:
        full = (
            {"PATH": "/usr/bin:/bin"}
            if clean
            else {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        )
        full["PYTHONPATH"] = str(ROOT)  # this checkout's code, not an installed copy's
        full.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvitals", "serve", "--port", "0", *argv],
            cwd=cwd,
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = self._wait_port()
        # a server bound to every address is reached here through loopback
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def _wait_port(self) -> int:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = _ADDRESS.search(self.stderr)
            if found:
                return int(found.group(2))
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise ServeExited(self.proc.returncode, self.stderr)
            time.sleep(0.1)
        self.proc.kill()
        raise AssertionError(f"serve printed no address in {WAIT_S:.0f} s:\n{self.stderr}")

    def wait_said(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.stderr:
            assert time.monotonic() < deadline, f"{text!r} never said:\n{self.stderr}"
            time.sleep(0.1)

    def stop(self) -> str:
        """SIGTERM, as a stopped container gets; what it printed on stdout (the run lines)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=WAIT_S)
        self._reader.join(5)
        assert self.proc.returncode == 0, self.stderr
        return out

    def kill(self) -> None:
        """End it whatever state it is in (a test's cleanup after a failure)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
        self._reader.join(5)
