"""The forwarder in a process of its own, so sending to InfluxDB never competes with training for
the training process's GIL.

Why a process: sqlite3 lets go of the GIL around every row it reads, and a thread that has let
go of it waits up to the interpreter's switch interval (5 ms) to get it back while a pure-Python
training loop runs. Reading a 5,000-row batch in the training process could take seconds, and
rendering and sending holds the GIL the training loop needs. The outbox is already the durable
hand-off between the worker and the forwarder, so the forwarder can just as well read it from
another process: the training process only writes the outbox.

The parent (`ForwarderProcess`, what `Run` uses) starts `python -m exporter.influx.forward_child`
and talks to it in JSON lines: the settings on its stdin first (credentials never go on the
command line), then `flush` and `stop` requests; the child answers with counter changes, flush
results and its log records, which the parent adds to the run's counts and logs as its own. When
the parent dies (stdin ends), or ends a run with rows not yet sent (`detach`), the child goes on
sending what the outbox holds for up to RLVITALS_DRAIN_TIMEOUT, records how far it got in the
outbox (`Outbox.note_forwarder`, read by `rlvitals runs`), then exits; it runs in a session of
its own, so a signal sent to the training's process group leaves that drain alone. When the
child dies, the parent starts another one (nothing is lost: the rows wait in the outbox).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from ..config import ExporterSettings
from ..counts import RunCounters
from .forwarder import Forwarder
from .rollups import InfluxRollups, make_rollups
from .writers import make_writer

__all__ = ["FORWARDER_LOG", "ForwarderProcess", "main"]

FORWARDER_LOG = "forwarder.log"
"""The forwarder child's own log, in the store folder: what it said after the training exited."""

_log = logging.getLogger("exporter.influx.forwarder")
_COUNTED = ("sent", "write_errors", "server_rejected")
_REPORT_EVERY = 0.1  # seconds between the child's counter reports, while they change
# How long the child waits for new rows once it has sent all there was (a flush cuts it short).
# Each pass costs a read, a render, a data and a rollup request and a mark in the store whatever
# it holds: at 1,000 steps/s x 30 metrics, 0.1 s cost the child 19 % of a core and influxd 8 %,
# 0.5 s 12-15 % and 5-7 % (docs/benchmarks.md); a point reaches InfluxDB up to 0.5 s later,
# a tenth of Grafana's shortest default refresh.
_IDLE_POLL = 0.5
_RESTART_AFTER = 1.0  # seconds between restarts of a child that died
_FAILED_STARTS = 2  # children that died before they were ready: then forward on a thread
_NICE = 10  # the child's niceness over the training's (see `main`)


def _settings_json(settings: ExporterSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in settings.__dataclass_fields__:
        value = getattr(settings, name)
        out[name] = str(value) if isinstance(value, Path) else value
    return out


def _settings_from(data: dict[str, Any]) -> ExporterSettings:
    return ExporterSettings(**{**data, "store": Path(data["store"])})


class ForwarderProcess:
    """Same interface as `Forwarder` (start, wake, flush, stop), run in a child process."""

    def __init__(self, settings: ExporterSettings, counters: RunCounters) -> None:
        self._settings = settings
        self._counters = counters
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._waiting: dict[int, tuple[threading.Event, list[bool | None]]] = {}
        self._next_id = 0
        self._stopping = False
        self._started_at = 0.0
        self._reported_death = False
        self._ready = False
        self._failed_starts = 0
        self._fallback: Forwarder | None = None

    def start(self) -> None:
        """Start the child; raises OSError when no process can be started (the caller then
        forwards on a thread instead)."""
        with self._lock:
            self._spawn()

    @property
    def ready(self) -> bool:
        """Whether the running child has read its settings and begun sending."""
        with self._lock:
            return self._ready

    def _spawn(self) -> None:
        env = dict(os.environ)
        # The child imports this package the way the parent did, installed or not: from the
        # folder the parent's `exporter` came from, first (an editable install is found by an
        # import hook after the path, so a folder named `exporter` on the path, a namespace
        # package to Python, would be found instead: "No module named ...forward_child").
        home = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([home, *(p for p in sys.path if p and p != home)])
        # Its stderr is a file in the store, not the training's: a child left draining after
        # the training exited must not hold the training's pipes open (a shell piping the
        # training's output into `tee` would wait for the drain), and what it says then has
        # to land somewhere.
        with contextlib.suppress(OSError):
            self._settings.store.mkdir(parents=True, exist_ok=True)
        try:
            log: IO[bytes] | int = open(self._log_path(), "ab")  # noqa: SIM115
        except OSError:
            log = subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "exporter.influx.forward_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
        finally:
            if not isinstance(log, int):
                log.close()
        assert proc.stdin is not None and proc.stdout is not None
        hello = {"settings": _settings_json(self._settings)}
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()
        self._proc = proc
        self._ready = False
        self._started_at = time.monotonic()
        self._reader = threading.Thread(
            target=self._read, args=(proc, proc.stdout), name="rlvitals-forwarder-io", daemon=True
        )
        self._reader.start()

    def _log_path(self) -> Path:
        return self._settings.store / FORWARDER_LOG

    def _read(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self._take(message)
        proc.wait()
        with self._lock:
            for event, result in self._waiting.values():
                result.append(None)  # no answer: the child died
                event.set()
            self._waiting.clear()
            if not self._ready and not self._stopping:
                self._failed_starts += 1
                if self._failed_starts >= _FAILED_STARTS and self._fallback is None:
                    self._fall_back(proc.returncode)
                    return
            if not self._stopping and not self._reported_death:
                self._reported_death = True
                _log.error(
                    "rlvitals forwarder process exited (code %s; what it said is in %s); "
                    "starting another (unsent rows wait in the outbox)",
                    proc.returncode,
                    self._log_path(),
                )

    def _fall_back(self, code: int | None) -> None:
        """No child gets as far as reading its settings here (a frozen or embedded Python that
        cannot run `-m`): forward on a thread of this process instead."""
        writer = make_writer(self._settings)
        if writer is None:
            return
        _log.warning(
            "rlvitals: the forwarder process cannot start here (%s exited with code %s before "
            "it was ready); forwarding on a thread",
            sys.executable,
            code,
        )
        fallback = Forwarder(
            self._settings.outbox_path,
            writer,
            self._counters,
            batch_size=self._settings.batch_size,
            rollups=_own_rollups(self._settings),
        )
        fallback.start()
        self._fallback = fallback

    def _take(self, message: dict[str, Any]) -> None:
        if message.get("ready"):
            with self._lock:
                self._ready = True
                self._failed_starts = 0
            return
        if "log" in message:
            _log.log(int(message["log"]), "%s", message.get("text", ""))
            return
        if any(k in message for k in _COUNTED):
            c = self._counters
            with c.lock:
                c.sent += int(message.get("sent", 0))
                c.write_errors += int(message.get("write_errors", 0))
                c.server_rejected += int(message.get("server_rejected", 0))
                if message.get("last_write") is not None:
                    c.last_write = float(message["last_write"])
        if "flushed" in message:
            with self._lock:
                waiting = self._waiting.pop(int(message["flushed"]), None)
            if waiting is not None:
                waiting[1].append(bool(message.get("ok")))
                waiting[0].set()

    def _alive(self) -> bool:
        """Whether a child runs; starts another when the last one died (at most once a second)."""
        with self._lock:
            if self._stopping or self._fallback is not None:
                return False
            proc = self._proc
            if proc is not None and proc.returncode is None and proc.poll() is None:
                return True
            if time.monotonic() - self._started_at < _RESTART_AFTER:
                return False
            try:
                self._spawn()
            except OSError as exc:
                _log.error("rlvitals: cannot restart the forwarder process: %s", exc)
                return False
            return True

    def _send(self, message: dict[str, Any]) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):  # the child is gone
            return False
        return True

    def wake(self) -> None:
        """Nothing to do: the child looks for new rows `_IDLE_POLL` seconds after it last found
        all there was."""

    def flush(self, timeout: float) -> bool:
        """Wait until the child found nothing unsent; False on timeout. A child that dies
        meanwhile is replaced and asked again."""
        deadline = time.monotonic() + timeout
        while True:
            if self._fallback is not None:
                return self._fallback.flush(max(0.0, deadline - time.monotonic()))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not self._alive():
                time.sleep(0.05)
                continue
            outcome = self._ask_flush(remaining)
            if outcome is not None:
                return outcome

    def _ask_flush(self, timeout: float) -> bool | None:
        """The child's answer to one flush request; None when it died before answering."""
        event = threading.Event()
        result: list[bool | None] = []
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._waiting[ident] = (event, result)
        if not self._send({"flush": ident, "timeout": timeout}):
            with self._lock:
                self._waiting.pop(ident, None)
            return None
        # the child answers within `timeout`; a little more for the answer to arrive
        if not event.wait(timeout + 1.0):
            with self._lock:
                self._waiting.pop(ident, None)
            return False
        return result[0] if result else None

    def detach(self, drain: float) -> int | None:
        """The training process ends with rows not yet sent: leave the child to send them for
        up to `drain` seconds after this process exits, without waiting for it. Its pid (None
        when forwarding on a thread here, which is stopped instead)."""
        with self._lock:
            self._stopping = True
            proc = self._proc
            fallback = self._fallback
        if fallback is not None:
            fallback.stop(1.0)
            return None
        if proc is None or proc.poll() is not None or not self._send({"drain": drain}):
            return None
        return proc.pid

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            proc = self._proc
            fallback = self._fallback
        if fallback is not None:
            fallback.stop(timeout)
        if proc is None:
            return
        self._send({"stop": True})
        try:
            proc.wait(max(0.1, timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(1.0)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _own_rollups(settings: ExporterSettings) -> InfluxRollups | None:
    """The forwarder's rollups, over a connection of their own (they run on their own thread)."""
    writer = make_writer(settings)
    return None if writer is None else make_rollups(settings, writer)


# -- the child ---------------------------------------------------------------------------------


class _Out:
    """The child's stdout: one JSON object per line, from any thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            try:
                self._stream.write(json.dumps(message).encode() + b"\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the parent is gone; its rows are still in the outbox


class _ToParent(logging.Handler):
    """Log records go to the parent, which logs them as its own."""

    def __init__(self, out: _Out) -> None:
        super().__init__()
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        self._out.send({"log": record.levelno, "text": self.format(record)})


class _Reporter:
    """Sends the parent what changed in the counters since the last report."""

    def __init__(self, counters: RunCounters, out: _Out) -> None:
        self._counters = counters
        self._out = out
        self._last = dict.fromkeys(_COUNTED, 0)
        self._lock = threading.Lock()

    def report(self) -> None:
        with self._lock:
            c = self._counters
            with c.lock:
                now = {k: int(getattr(c, k)) for k in _COUNTED}
                last_write = c.last_write
            delta = {k: now[k] - self._last[k] for k in _COUNTED if now[k] != self._last[k]}
            if not delta:
                return
            self._last = now
            self._out.send({**delta, "last_write": last_write})


def main() -> int:
    """The child: forward the outbox named in the settings read from stdin until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the training; stdin ends it
    # The training is what the machine is for: where the two want the same core, it goes
    # first, and the forwarder sends in the gaps (its backlog is on /metrics and in
    # `rlvitals runs` if they are too few, and it drains after the training exits).
    with contextlib.suppress(OSError, AttributeError):
        os.nice(_NICE)
    out = _Out(sys.stdout.buffer)
    handler = _ToParent(out)
    root = logging.getLogger()
    root.addHandler(handler)
    # and to its stderr, the store's forwarder.log: read once the training process is gone
    own = logging.StreamHandler(sys.stderr)
    own.setLevel(logging.WARNING)
    own.setFormatter(logging.Formatter(f"%(asctime)s pid {os.getpid()} %(message)s"))
    root.addHandler(own)
    root.setLevel(logging.INFO)
    first = sys.stdin.buffer.readline()
    try:
        settings = _settings_from(json.loads(first)["settings"])
    except (ValueError, KeyError, TypeError) as exc:
        _log.error("rlvitals forwarder process: unreadable settings (%s); exiting", exc)
        return 2
    writer = make_writer(settings)
    if writer is None:
        return 0
    out.send({"ready": True})
    counters = RunCounters()
    forwarder = Forwarder(
        settings.outbox_path,
        writer,
        counters,
        batch_size=settings.batch_size,
        idle_wait=_IDLE_POLL,
        rollups=_own_rollups(settings),
    )
    forwarder.start()
    reporter = _Reporter(counters, out)
    done = threading.Event()

    def report_loop() -> None:
        while not done.wait(_REPORT_EVERY):
            reporter.report()

    threading.Thread(target=report_loop, name="rlvitals-report", daemon=True).start()

    def flush(ident: int, timeout: float) -> None:
        ok = forwarder.flush(timeout)
        reporter.report()
        out.send({"flushed": ident, "ok": ok})

    stopped = False
    drain = settings.drain_timeout
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "flush" in message:
            threading.Thread(
                target=flush,
                args=(int(message["flush"]), float(message.get("timeout", 10.0))),
                daemon=True,
            ).start()
        elif message.get("stop"):
            stopped = True
            break
        elif "drain" in message:
            drain = float(message["drain"])
            break
    if not stopped:
        # told to drain, or the training process is gone (stdin ended): send what it left for
        # a bounded time, on our own (the parent may not wait for us)
        forwarder.drain(drain)
    forwarder.stop(5.0)
    done.set()
    reporter.report()
    return 0
