"""`rlvitals import` and `rlvitals tail`: read existing training logs into the store / InfluxDB.

Bad input (a missing path, a pattern that does not compile, a file of no known format, bad
settings) ends with one line on stderr and exit code 2. Malformed lines inside a log are skipped,
counted and listed with file:line; they never stop an import.

Read positions. How far each file was read is stored in the outbox (`source_positions`) in the
same transaction as the samples read up to there. `tail` goes on from the stored positions (a
restarted sidecar neither re-reads its logs nor records a false `resume` event); a file that was
truncated, rotated or replaced meanwhile is read from its start; `--from-start` ignores them.
A position keeps the run it was read into, so a run renamed since (`rlvitals runs rename`) goes
on under its new name, its files' folder name notwithstanding.
`import` is a deliberate one-pass (re-)import, so it reads every file from its start unless
`--resume` is given; it saves the positions it reached once everything it read was stored (and,
with InfluxDB configured, sent), so a later `tail` or `import --resume` goes on from there.

With InfluxDB configured `import` writes straight to it (see `direct.py`: the log file is the
durable copy; an InfluxDB that stays unreachable stops the import with exit 1); `--via-outbox`
stores every sample in the outbox first, as `tail` does. SIGTERM (a stopped container) is handled
like Ctrl-C: what was read is stored before exiting, waiting at most a few seconds; the reader
ends after the file it is reading (an import whose last file it was is complete). Exit 1 when
something read was not stored (disk budget, refused by InfluxDB, the store blocked at SIGTERM) or,
for `import`, files were left unread; its runs are then left incomplete, and the same command
goes on with them.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import yaml

import registry
from registry import FRAMEWORKS

from ..config import ExporterSettings
from ..errors import ConfigError, ExporterError, WriteError
from ..lifecycle import RunStatus, Status
from ..prometheus import live_states
from ..prometheus.metrics_endpoint import MetricsEndpoint
from ..prometheus.store_statuses import store_statuses
from ..schema import CONFIG_SOURCES, SourcePosition, read_by_itself
from ..sources import (
    EndMark,
    LogFile,
    LogSet,
    Malformed,
    Record,
    ScalarBlock,
    compile_pattern,
)
from ..sources.console import CONSOLE_TRAINERS, SNIFF_BYTES
from ..sources.follow import path_key
from ..store.outbox import Outbox
from .arguments import add_config_arguments, add_format_arguments, add_path_arguments, given_paths
from .feed import Ingest, RunSummary, import_end
from .log_context import parse_assignment

__all__ = [
    "add_config_arguments",
    "follow_logs",
    "import_into",
    "mapped_config",
    "read_config_arguments",
    "register",
    "tail_arguments",
]

_SHOWN_PROBLEMS = 20
_PROGRESS_EVERY = 1.0  # seconds between progress lines on stderr
_FINISH_TIMEOUT = 600.0
"""When `tail --follow` ends a followed run whose logs went quiet (the same policy as the alert)."""
_GRACE = 5.0  # seconds of waiting left after SIGTERM
_FLUSH_STEP = 1.0
_SAY_EVERY = 10.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser(
        "import",
        description="Read TensorBoard event files, JSON Lines, SB3 progress.csv or text logs (with "
        "--pattern) once. A directory is searched recursively; each folder holding logs is one "
        "run, named after the folder, unless --run names a single run.",
    )
    _common(imp)
    imp.add_argument(
        "--resume",
        action="store_true",
        help="go on with runs of the same name already in the store, from where an earlier "
        "import or tail stopped in each file (default: every file from its start, and a run "
        "whose name is taken gets a new name, NAME-2)",
    )
    imp.add_argument(
        "--via-outbox",
        action="store_true",
        help="with InfluxDB configured, store every sample in the local outbox first instead of "
        "writing straight to InfluxDB (the log file is the durable copy otherwise)",
    )
    imp.set_defaults(handler=_import, follow=False)
    tail = sub.add_parser(
        "tail",
        description="Like `import`, then keep reading what is appended, across log rotation, "
        "truncation and new files appearing (SB3 adds an event file when a run resumes).",
    )
    _common(tail)
    tail.add_argument(
        "--follow",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep following the logs (default); --no-follow reads them once",
    )
    tail.add_argument(
        "--resume",
        action="store_true",
        help="go on with runs of the same name already in the store even when this tail never "
        "read their logs (runs it was following before a restart are always resumed; others "
        "whose name is taken get a new name, NAME-2)",
    )
    tail.add_argument(
        "--from-start",
        action="store_true",
        help="read every file from its start, ignoring where an earlier tail stopped",
    )
    tail.add_argument(
        "--poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between polls (default 2)",
    )
    tail.add_argument(
        "--max-polls",
        type=int,
        default=None,
        metavar="N",
        help="stop after N polls (for scripts and tests; default: until interrupted)",
    )
    tail.set_defaults(handler=_tail)


def _common(p: argparse.ArgumentParser) -> None:
    add_path_arguments(p, "paths", "log files or directories to search")
    p.add_argument(
        "--run", metavar="NAME", help="put everything into this run (default: folder names)"
    )
    p.add_argument("--project", metavar="P", help="project tag for the run(s)")
    add_format_arguments(p)
    p.add_argument(
        "--framework",
        choices=("auto", *FRAMEWORKS),
        default="auto",
        help="framework that decides ambiguous names (default: detected from the keys)",
    )
    registry.add_registry_argument(p)
    p.add_argument("--store", metavar="DIR", help="embedded store folder (default $RLVITALS_STORE)")
    add_config_arguments(p)


def mapped_config(reg: registry.Registry, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with the registry's tag mappings (`--map`, a user file's `map:`) recorded under
    `tag_map`, so a later reader of the stored run knows which names were mapped."""
    out = dict(config)
    if reg.mapped or reg.as_logged:
        out[registry.MAP_RECORD_KEY] = dict(registry.map_record(reg))
    return out


def read_config_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The run config of `--config` and `--set`; raises ConfigError naming what is wrong."""
    out: dict[str, Any] = {}
    if getattr(args, "config", None):
        path = Path(args.config)
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"--config {path}: cannot read it ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--config {path}: not YAML or JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ConfigError(
                f"--config {path}: expected a mapping of keys to values, got {type(doc).__name__}"
            )
        out.update({str(k): v for k, v in doc.items()})
    for item in getattr(args, "set", None) or ():
        try:
            key, value = parse_assignment(item)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        out[key] = value
    return out


def _import(args: argparse.Namespace) -> int:
    if (code := _paths_given(args, "import")) is not None:
        return code
    return _ingest(
        args,
        follow=False,
        poll=0.0,
        max_polls=1,
        resume=args.resume,
        direct=not args.via_outbox,
        resume_runs=args.resume,
    )


def _tail(args: argparse.Namespace) -> int:
    if (code := _paths_given(args, "tail")) is not None:
        return code
    if args.poll <= 0:
        return _fail(f"--poll {args.poll} must be a positive number of seconds")
    # With InfluxDB configured, what the logs already hold is read like `import` reads it
    # (straight to InfluxDB, see direct.py); what they get after that goes through the outbox.
    return _ingest(
        args,
        follow=args.follow,
        poll=args.poll,
        max_polls=args.max_polls,
        resume=not args.from_start,
        direct=True,
        resume_runs=args.resume,
    )


def _paths_given(args: argparse.Namespace, command: str) -> int | None:
    """Join --logdir to the PATHs; exit code 2 when neither names a log."""
    args.paths = given_paths(args)
    if not args.paths:
        return _fail(f"name the logs to read: rlvitals {command} PATH... (or --logdir PATH)")
    return None


def tail_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """`rlvitals tail ARGV` parsed as the command line parses it (same flags, same defaults):
    how `serve LOGDIR` follows its folders. Bad arguments raise SystemExit, as on the command
    line; build ARGV from flags already checked."""
    parser = argparse.ArgumentParser(prog="rlvitals")
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["tail", *argv])


def import_into(
    paths: Sequence[Path],
    *,
    settings: ExporterSettings,
    reg: registry.Registry,
    run: str,
    config: Mapping[str, Any],
    framework: str | None = None,
    reading: Sequence[str] = (),
    err: TextIO,
) -> tuple[int, list[RunSummary]]:
    """What `rlvitals import PATHS --run RUN` does, into the store of `settings` (never the
    environment's), with the run config `config` and the registry `reg` (its `--map`s
    applied) and `reading`, import's flags for how the logs are read (`format_argv`): the
    diagnosis replay stores a run exactly as an import would, then reads it as the datasource
    does. Every line goes to `err`; returns import's exit code and what each
    run received (the names it logged, its framework)."""
    argv = ["import", *map(str, paths), "--run", run, *reading]
    if framework is not None:
        argv += ["--framework", framework]
    parser = argparse.ArgumentParser(prog="rlvitals")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    received: list[RunSummary] = []
    code = _run_ingest(
        args,
        follow=False,
        poll=0.0,
        max_polls=1,
        resume=False,
        direct=False,
        resume_runs=False,
        stop=threading.Event(),
        err=err,
        reg=reg,
        settings=settings,
        config=config,
        out=err,
        summaries=received,
    )
    return code, received


def follow_logs(
    args: argparse.Namespace,
    *,
    stop: threading.Event,
    err: TextIO,
    on_poll: Callable[[Sequence[LogFile]], None] | None = None,
    reg: registry.Registry | None = None,
) -> int:
    """What `rlvitals tail --follow` does with `args` (`tail_arguments`), in the calling
    thread, until `stop` is set: the runs it followed before go on from the stored read
    positions, new files are picked up at each poll, quiet runs end (`finish_idle`), and each
    run is started once its file was read (listed while the other files are read). Every line
    goes to `err`; `on_poll` gets the files known after each poll; `reg` is the registry of
    `args.registry` when the caller loaded it already. Returns tail's exit code;
    an unexpected exception ends it like a failure (said on `err`) rather than propagating."""
    return _run_ingest(
        args,
        follow=True,
        poll=args.poll,
        max_polls=args.max_polls,
        resume=not args.from_start,
        direct=True,
        resume_runs=args.resume,
        stop=stop,
        err=err,
        on_poll=on_poll,
        contain=True,
        reg=reg,
        start_each=True,
    )


def _nothing_found(paths: list[str], passed_over: list[Path]) -> str:
    """Why a search found no log: the text files it looked into and why each was not one."""
    said = f"no logs found under {', '.join(paths)}"
    if not passed_over:
        return said + "; check the paths or --format"
    shown = ", ".join(str(p) for p in passed_over[:5])
    more = f" and {len(passed_over) - 5} more" if len(passed_over) > 5 else ""
    return (
        f"{said}: {len(passed_over)} text file(s) were read, and their first {SNIFF_BYTES >> 20} "
        f"MB hold no metric line {CONSOLE_TRAINERS} prints: {shown}"
        f"{more}. A trainer whose console logger is off prints none (verl: `trainer.logger` "
        "without 'console'); for another trainer's lines pass --format regex --pattern"
    )


def _log_set(
    args: argparse.Namespace, problems: _Problems, positions: dict[str, SourcePosition]
) -> LogSet:
    """The logs `tail` follows, as the flags say, going on from `positions`. A console log's
    logging cadence may be given as `--set logging_steps=N` (see exporter/sources/console.py)."""
    cadence = read_config_arguments(args).get("logging_steps")
    valid = isinstance(cadence, int) and not isinstance(cadence, bool) and cadence > 0
    return LogSet(
        [Path(p) for p in args.paths],
        problems.add,
        fmt=args.format,
        pattern=args.pattern,
        step_key=args.step_key,
        positions=positions,
        cadence=cadence if valid else None,
        on_unreadable=problems.unreadable,
    )


def _incomplete_imports(settings: ExporterSettings) -> dict[str, str]:
    """Runs an earlier import left incomplete (it was killed or failed): name -> who and why."""
    if not settings.outbox_path.exists():
        return {}
    with Outbox(settings.outbox_path) as box:
        records = box.runs()
    out = {}
    for record in records:
        status = settings.lifecycle.status(record.recorded)
        if status.status is RunStatus.INCOMPLETE:
            lease = record.lease
            out[record.run] = lease.holder.describe() if lease else "it stopped"
    return out


def _positions_of(
    args: argparse.Namespace, stored: dict[str, SourcePosition], runs: Mapping[str, str]
) -> dict[str, SourcePosition]:
    """The stored read positions of the files whose run is in `runs` (found by discovering the
    files as the import will, without reading them)."""
    probe = _log_set(args, _Problems(io.StringIO()), {})
    try:
        probe.refresh()
        wanted = {path_key(log.path) for log in probe.files if (args.run or log.run) in runs}
    finally:
        probe.close()
    return {key: position for key, position in stored.items() if key in wanted}


def _leave_incomplete(settings: ExporterSettings, ingest: Ingest, why: str) -> None:
    """Mark the import's runs incomplete after the fact (what was lost is known only once
    they finished): the same command then goes on with them."""
    try:
        with Outbox(settings.outbox_path) as box:
            for summary in ingest.summaries:
                box.record_state(
                    summary.name,
                    "importing",
                    f"the import stopped: {why}; running the same command again goes on with "
                    "this run",
                )
    except ExporterError as exc:
        print(f"rlvitals: warning: {str(exc).splitlines()[0]}", file=sys.stderr)


def _end_unread(
    settings: ExporterSettings,
    ingest: Ingest,
    unfinished: Mapping[str, str],
    run_config: Mapping[str, Any],
) -> None:
    """Record the end of each incomplete run whose logs held nothing past where the earlier
    import stopped (it was killed after storing everything, before recording the end): this
    import read nothing for it, so no run was started to record it, and it would stay
    incomplete however often the command ran."""
    names = [s.name for s in ingest.summaries if s.stats is None and s.name in unfinished]
    if not names:
        return
    try:
        with Outbox(settings.outbox_path) as box:
            for name in names:
                record = box.run(name)
                config = {**(record.config if record else {}), **run_config}
                box.record_state(name, *import_end(config, box.last_step(name)))
    except ExporterError as exc:
        print(f"rlvitals: warning: {str(exc).splitlines()[0]}", file=sys.stderr)


def _position_runs(settings: ExporterSettings) -> dict[str, str]:
    if not settings.outbox_path.exists():
        return {}
    with Outbox(settings.outbox_path) as box:
        return box.position_runs()


def _run_names(settings: ExporterSettings) -> set[str]:
    if not settings.outbox_path.exists():
        return set()
    with Outbox(settings.outbox_path) as box:
        return {r.run for r in box.runs()}


def _renames(
    args: argparse.Namespace,
    logs: LogSet,
    positions: Mapping[str, SourcePosition],
    runs: Mapping[str, str],
    existing: Collection[str] = (),
) -> dict[str, str]:
    """The name each run's logs give (`--run` or the folder) -> the run their stored positions
    were read into, where the two differ (the run was renamed since, `rlvitals runs rename`):
    every file of that run, new ones included, goes on under the new name instead of making
    the old one again. A name still in the store (`existing`) was not renamed: an earlier
    re-import made NAME-2 from the same files, and `--resume` goes on with NAME."""
    out: dict[str, str] = {}
    for log in logs.files:
        key, named = path_key(log.path), args.run or log.run
        if key in positions and runs.get(key, named) != named and named not in existing:
            out[named] = runs[key]
    return out


def _stored_positions(settings: ExporterSettings) -> dict[str, SourcePosition]:
    if not settings.outbox_path.exists():
        return {}
    with Outbox(settings.outbox_path) as box:
        return box.source_positions()


@contextmanager
def _sigterm_stops(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (in the main thread) sets `stop`: the reader ends after the file it is reading
    and waits a few seconds for what it read to be stored (exit 1 if it was not). From a
    thread (tests) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, request_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail(message: str, out: TextIO | None = None) -> int:
    print(f"rlvitals: error: {message}", file=out or sys.stderr)
    return 2


def _ingest(
    args: argparse.Namespace,
    *,
    follow: bool,
    poll: float,
    max_polls: int | None,
    resume: bool,
    direct: bool,
    resume_runs: bool,
) -> int:
    stop = threading.Event()
    with _sigterm_stops(stop):
        return _run_ingest(
            args,
            follow=follow,
            poll=poll,
            max_polls=max_polls,
            resume=resume,
            direct=direct,
            resume_runs=resume_runs,
            stop=stop,
        )


def _run_ingest(
    args: argparse.Namespace,
    *,
    follow: bool,
    poll: float,
    max_polls: int | None,
    resume: bool,
    direct: bool,
    resume_runs: bool,
    stop: threading.Event,
    err: TextIO | None = None,
    on_poll: Callable[[Sequence[LogFile]], None] | None = None,
    contain: bool = False,
    reg: registry.Registry | None = None,
    start_each: bool = False,
    settings: ExporterSettings | None = None,
    config: Mapping[str, Any] | None = None,
    out: TextIO | None = None,
    summaries: list[RunSummary] | None = None,
) -> int:
    """The import / tail loop. `err` takes the lines meant for stderr, `on_poll` the files
    found after each poll, and with `contain` an unexpected exception while reading ends the
    loop like a bad file does (said on `err`, what was read stored) instead of propagating:
    `follow_logs` runs it in a thread of another process (with the registry it loaded, `reg`).
    With `start_each`, a run whose file was read through starts (and is listed) at once, its
    framework detected from what it held, rather than after the whole pass: behind a folder's
    small runs a big file can take minutes to read. `settings`, `config` (the run config) and
    `out` (the summary lines) replace what the environment, `--config`/`--set` and stdout give,
    and `summaries` receives each run's `RunSummary`: `import_into` passes them."""
    err = err or sys.stderr
    try:
        if args.pattern is not None:
            compile_pattern(args.pattern)
        elif args.format == "regex":
            return _fail("--format regex needs --pattern REGEX", err)
        if settings is None:
            settings = ExporterSettings.from_env(os.environ)
            if args.store:
                settings = settings.replace(store=Path(args.store))
        reg = reg or registry.registry_from_args(args)
        given = read_config_arguments(args) if config is None else dict(config)
        run_config = mapped_config(reg, given)
        positions = _stored_positions(settings) if resume else {}
        unfinished = {} if follow or resume else _incomplete_imports(settings)
        if unfinished:
            positions = _positions_of(args, _stored_positions(settings), unfinished)
    except (ExporterError, registry.RegistryError) as exc:
        return _fail(str(exc).splitlines()[0], err)
    direct = direct and settings.influx_url is not None
    endpoint: MetricsEndpoint | None = None
    if follow and settings.prometheus_port is not None:
        # One /metrics for every run the sidecar follows (each run starting its own endpoint on
        # the same port would fail), with the alert and rule states counted in step space.
        endpoint = MetricsEndpoint(host=settings.prometheus_host, port=settings.prometheus_port)
        live_states.attach(endpoint, reg, settings.outbox_path)
        # the sidecar is the team's exporter: it pages for the store's other writers too
        outbox_path = settings.outbox_path
        life = settings.lifecycle
        endpoint.set_store_statuses(lambda: store_statuses(outbox_path, life))
        try:
            endpoint.start()
        except OSError as exc:
            return _fail(
                f"cannot serve /metrics on {settings.prometheus_host}:{settings.prometheus_port} "
                f"({exc.strerror}); choose a free RLVITALS_PROMETHEUS_PORT",
                err,
            )
        print(f"rlvitals: serving /metrics on {endpoint.host}:{endpoint.port}", file=err)
    settings = settings.replace(prometheus_port=None)
    problems = _Problems(err)
    logs = _log_set(args, problems, positions)
    ingest = Ingest(
        registry=reg,
        settings=settings,
        run_name=args.run,
        project=args.project,
        framework=None if args.framework == "auto" else args.framework,
        on_run_start=lambda s: print(_framework_line(s), file=err),
        direct=direct,
        endpoint=endpoint,
        resume=lambda name: resume_runs or name in attached,
        config=run_config,
        follow=follow,
    )
    progress = _Progress(err)
    status = 0
    attached: set[str] = set()
    saved: dict[Path, SourcePosition] = {}
    interrupted = False
    # SIGTERM stops the reader after the file it is reading: the last one read whole leaves
    # nothing unread, so the import is complete once what it read is stored
    cut_short = False
    found: list[LogFile] = []
    resumed_any = False
    try:
        found = logs.refresh()
        resumed_any = bool(logs.resumed)
        if not found and not follow:
            return _fail(_nothing_found(args.paths, logs.passed_over), err)
        if not found:
            # a follower waits for logs to appear (as `tensorboard --logdir` does), but says so
            print(
                f"rlvitals: no logs under {', '.join(args.paths)} yet; looking again every "
                f"{poll:g} s",
                file=err,
            )
        if resume:
            ingest.follow_renames(
                _renames(args, logs, positions, _position_runs(settings), _run_names(settings))
            )
        if on_poll is not None:
            on_poll(logs.files)  # what was found, before the first pass reads it
        ingest.look_for_writers([log.path for log in logs.files])
        # Runs whose logs a reader of this store read before (a restarted sidecar): they are
        # this reader's own and go on, never becoming NAME-2 copies of themselves.
        attached.update(
            ingest.run_name(log) for log in logs.files if path_key(log.path) in positions
        )
        # Runs an earlier import left incomplete go on under their own name (`Outbox.claim`),
        # from where it stopped, or from the start when it saved no read position (it stopped,
        # or the store refused what it read, before the first one): said either way.
        for name in sorted({ingest.run_name(log) for log in logs.files} & set(unfinished)):
            where = (
                "from where that import stopped"
                if name in attached
                else "reading its logs from their start (that import saved no read position)"
            )
            print(
                f"rlvitals: run {name!r} was left incomplete by an earlier import "
                f"({unfinished[name]}); going on with it {where}",
                file=err,
            )
        if logs.resumed:
            print(
                f"rlvitals: {len(logs.resumed)} file(s) go on from where the last reader stopped",
                file=err,
            )
        polls = 0
        catching_up = direct and follow
        while True:
            try:
                for log, records in logs.poll_blocks(final=not follow):
                    if stop.is_set():
                        cut_short = True  # files left unread
                        break
                    progress.file(log.path.name)
                    ingest.feed(log, progress.count(records), facts=partial(logs.facts, log))
                    if start_each:
                        ingest.settle()
                    position = logs.position(log)
                    if position is not None and saved.get(log.path) != position:
                        saved[log.path] = position
                        ingest.save_position(log, position)
            except WriteError:
                if not catching_up:
                    raise
                # InfluxDB stayed unreachable during the catch-up: the rest goes through the
                # outbox, read again from where InfluxDB stopped (said by `_drain` below)
            ingest.settle()
            if catching_up:
                catching_up = False
                if not _drain(ingest, err, stop) and stop.is_set():
                    break
                failed = ingest.failure() is not None
                ingest.hand_over(_FINISH_TIMEOUT)
                # Go on from the positions the catch-up stored: exactly what InfluxDB took.
                logs.close()
                logs = _log_set(args, problems, _stored_positions(settings))
                logs.refresh()
                saved.clear()
                if failed:
                    # what InfluxDB did not take is read again now, into the outbox
                    print(
                        "rlvitals: the catch-up stopped; reading on from where InfluxDB stopped "
                        "through the outbox (it sends when InfluxDB answers)",
                        file=err,
                    )
                    continue
                print("rlvitals: caught up; following the logs through the outbox", file=err)
            if follow:
                ingest.finish_idle(settings.lifecycle, time.time())
            if on_poll is not None:
                on_poll(logs.files)
            polls += 1
            if not follow or (max_polls is not None and polls >= max_polls) or stop.is_set():
                break
            if stop.wait(poll):
                break
        if stop.is_set():
            print("rlvitals: stopping (SIGTERM); storing what was read", file=err)
    except KeyboardInterrupt:
        interrupted = True
        print("rlvitals: interrupted; storing what was read", file=err)
    except (ExporterError, OSError) as exc:
        status = _fail(str(exc).splitlines()[0], err)
    except Exception as exc:
        if not contain:
            raise
        # a bug met while following inside `serve`: said with its traceback, and what was read
        # is stored below, so the restarted follower goes on from there
        traceback.print_exc(file=err)
        status = _fail(f"{type(exc).__name__}: {exc}", err)
    finally:
        logs.close()
    progress.done()
    drained = _drain(ingest, err, stop)
    # an import that read everything and stored it records each run's end; one that stopped
    # leaves its runs incomplete, for the same command to go on with
    complete = drained and status == 0 and not interrupted and not cut_short
    ingest.finish(_FINISH_TIMEOUT if drained else 1.0, complete=complete)
    if complete and unfinished:
        _end_unread(settings, ingest, unfinished, run_config)
    if endpoint is not None:
        endpoint.stop()
    lost = over_budget = 0
    for summary in ingest.summaries:
        if summary.stats is not None:
            stats = summary.stats
            lost += stats.dropped + stats.refused_disk + stats.server_rejected
            over_budget += stats.refused_disk
    if status == 0 and lost and not follow:
        _leave_incomplete(settings, ingest, f"{lost:,} value(s) read were not stored")
    statuses = _statuses(settings)
    read_as = _read_as(settings, [s.name for s in ingest.summaries])
    for summary in ingest.summaries:
        line = _summary_line(summary, statuses.get(summary.name), reg, read_as.get(summary.name))
        print(line, file=out or sys.stdout)
    if summaries is not None:
        summaries.extend(ingest.summaries)
    if over_budget:
        print(
            f"rlvitals: error: {over_budget:,} value(s) were refused because the outbox reached "
            f"its disk budget ({settings.disk_budget_mb:g} MB); raise RLVITALS_DISK_BUDGET_MB "
            "or move the store away, then run the same command again",
            file=err,
        )
    problems.close()
    names = ", ".join(repr(s.name) for s in ingest.summaries) or "its runs"
    again = (
        f"running the same command again goes on with {names} from where this one stopped "
        "(no new run is made)"
        if not follow
        else "running the same command again reads it again"
    )
    if status == 0 and not drained:
        status = 1
        print(
            "rlvitals: error: stopped before everything read was stored; the read positions "
            f"were not saved past it: {again}",
            file=err,
        )
    if status == 0 and cut_short and not follow:
        # its runs are left incomplete: exit 1, as for anything else it did not import
        status = 1
        print(
            f"rlvitals: error: stopped (SIGTERM) before every log was read; what was read is "
            f"stored: {again}",
            file=err,
        )
    if status == 0 and lost:
        status = 1
        print(
            f"rlvitals: error: {lost:,} value(s) read were not stored (see the counts above); "
            f"fix the cause: {again}",
            file=err,
        )
    read = sum(s.values for s in ingest.summaries)
    if status == 0 and follow and not read and not resumed_any:
        # a follower's job is to wait: it ends without error, but not as if it had read logs
        print(
            f"rlvitals: read no metric values from {', '.join(args.paths)}"
            + (f" ({len(found)} log file(s) hold no step with a value)" if found else "")
            + (" (see the lines named above)" if problems.count or problems.parts else ""),
            file=err,
        )
    if status == 0 and not follow and not interrupted and not read and not resumed_any:
        # a header-only CSV, a log whose metric lines could not be read, a text file with
        # none: an import that stored nothing must not look like one that did
        status = 1
        print(
            f"rlvitals: error: read no metric values from {', '.join(args.paths)}: the "
            f"{len(found)} log file(s) found hold no step with a value"
            + (" (see the lines named above)" if problems.count or problems.parts else ""),
            file=err,
        )
    return status


class _Problems:
    """Malformed lines: the first few printed with file:line as they are found, all counted."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self.count = 0
        self.parts = 0  # lines (or records) read in part: some of their values not stored

    def add(self, problem: Malformed) -> None:
        if problem.kept:  # the values were stored: a warning, not a line skipped
            print(f"rlvitals: warning: {problem}", file=self._out)
            return
        if problem.part:  # the rest of the line was stored: not a line skipped either
            self.parts += 1
            if self.parts <= _SHOWN_PROBLEMS:
                print(f"rlvitals: not stored: {problem}", file=self._out)
            elif self.parts == _SHOWN_PROBLEMS + 1:
                print("rlvitals: more values not stored; only their count is shown", file=self._out)
            return
        self.count += 1
        if self.count <= _SHOWN_PROBLEMS:
            print(f"rlvitals: skipped {problem}", file=self._out)
        elif self.count == _SHOWN_PROBLEMS + 1:
            print("rlvitals: more malformed lines; only their count is shown", file=self._out)

    def unreadable(self, path: Path) -> None:
        """A folder or file of the logs this process may not read (said once while it stays
        so): under docker compose the sidecar reads ./runs as uid 10001 (docs/compose.md)."""
        fix = f"chmod -R o+rX {path}" if path.is_dir() else f"chmod o+r {path}"
        print(
            f"rlvitals: warning: cannot read {path} (permission denied to uid {os.getuid()}): "
            f"its logs are not imported until it can be; make it readable ({fix}), or have the "
            "trainer write its logs with umask 022",
            file=self._out,
        )

    def close(self) -> None:
        if self.count:
            print(f"rlvitals: {self.count} malformed line(s) skipped", file=self._out)
        if self.parts:
            print(
                f"rlvitals: {self.parts} problem(s) with values in lines otherwise read (the "
                "rest of each line stored)",
                file=self._out,
            )


class _Progress:
    """A progress line on stderr at most once a second while records are read."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._records = 0
        self._name = ""
        self._started = time.monotonic()
        self._last = self._started
        self._shown = False

    def file(self, name: str) -> None:
        self._name = name

    def count(
        self, records: Iterable[Record | ScalarBlock | SourcePosition | EndMark]
    ) -> Iterator[Record | ScalarBlock | SourcePosition | EndMark]:
        for record in records:
            if isinstance(record, SourcePosition | EndMark):
                yield record
                continue
            if isinstance(record, ScalarBlock):
                self._records += len(record)
                look = True  # a block is many records: look at the clock
            else:
                self._records += 1
                look = not self._records % 1024
            if look:
                now = time.monotonic()
                if now - self._last >= _PROGRESS_EVERY:
                    self._last = now
                    self._shown = True
                    rate = self._records / max(1e-9, now - self._started)
                    print(
                        f"rlvitals: read {self._records:,} steps ({rate:,.0f}/s), now {self._name}",
                        file=self._out,
                        flush=True,
                    )
            yield record

    def done(self) -> None:
        if self._shown:
            elapsed = time.monotonic() - self._started
            print(f"rlvitals: read {self._records:,} steps in {elapsed:.1f} s", file=self._out)


def _drain(ingest: Ingest, out: TextIO, stop: threading.Event) -> bool:
    """Wait for the runs to store (and send) everything, saying so every so often; after a
    SIGTERM wait at most `_GRACE` seconds more (a container gets killed soon after). False when
    something was left."""
    started = time.monotonic()
    deadline = started + _FINISH_TIMEOUT
    last_said = started
    while True:
        if stop.is_set():
            deadline = min(deadline, time.monotonic() + _GRACE)
        now = time.monotonic()
        if now >= deadline:
            why = "SIGTERM" if stop.is_set() else f"{_FINISH_TIMEOUT:.0f} s passed"
            print(f"rlvitals: stopped waiting for the store / InfluxDB ({why})", file=out)
            return False
        if ingest.flush(timeout=min(_FLUSH_STEP, deadline - now)):
            return True
        failure = ingest.failure()
        if failure is not None:
            print(f"rlvitals: error: {failure}", file=out)
            return False
        # a flush that failed at once (a run that cannot take anything) must not spin
        stop.wait(max(0.0, _FLUSH_STEP - (time.monotonic() - now)))
        if time.monotonic() - last_said >= _SAY_EVERY:
            last_said = time.monotonic()
            print(
                f"rlvitals: waiting for the store / InfluxDB to take the rest "
                f"({last_said - started:.0f} s)",
                file=out,
                flush=True,
            )


def _framework_line(summary: RunSummary) -> str:
    if summary.framework is None:
        line = f"rlvitals: run {summary.name!r}: no framework recognised from the keys; pass --framework"
    else:
        how = "detected from the keys" if summary.detected else "as given"
        line = f"rlvitals: run {summary.name!r}: framework {summary.framework} ({how})"
    if summary.renamed_from is not None:
        line += (
            f"; a run named {summary.renamed_from!r} is already in the store, so this one is "
            f"{summary.name!r} (--resume goes on with the old one)"
        )
    if summary.follows is not None:
        line += (
            f"; a later training in the log of run {summary.follows!r} (its steps started again), "
            "read as a run of its own"
        )
    if summary.config:
        shown = ", ".join(
            f"{k}={v}" for k, v in summary.config.items() if k not in ("framework", CONFIG_SOURCES)
        )
        line += f"; run context: {shown}" if shown else ""
    if summary.config.get("step_source") == "logging order" and summary.framework == "openrlhf":
        # OpenRLHF before v0.8.1 prints no step: one training bar a step (openrlhf_console.py)
        line += "; its log prints no step, so steps count its completed training bars (one a step)"
    elif summary.config.get("step_source") == "logging order":
        line += (
            "; its log prints no step, so steps count its logged lines (times logging_steps "
            "where the log prints it): pass --set logging_steps=N if the trainer logged every "
            "N steps"
        )
    return line


def _statuses(settings: ExporterSettings) -> dict[str, Status]:
    """Each stored run's status now, as the store recorded it (empty if it cannot be read)."""
    try:
        with Outbox(settings.outbox_path) as box:
            records = box.runs()
    except ExporterError:
        return {}
    return {r.run: settings.lifecycle.status(r.recorded) for r in records}


def _read_as(settings: ExporterSettings, runs: Iterable[str]) -> dict[str, dict[str, str]]:
    """{run: {name: metric}} of the names each run read as a metric by itself (its record)."""
    try:
        with Outbox(settings.outbox_path) as box:
            return {run: read_by_itself(box.transforms(run)) for run in runs}
    except ExporterError:
        return {}


def _summary_line(
    summary: RunSummary,
    status: Status | None = None,
    reg: registry.Registry | None = None,
    read_as: Mapping[str, str] | None = None,
) -> str:
    line = (
        f"run {summary.name!r}: {summary.steps:,} steps, {summary.values:,} values "
        f"from {len(summary.files)} file(s), framework {summary.framework or 'none'}"
    )
    if status is not None:
        line += f"; now {status.status} ({status.reason})"
    if reg is not None and summary.names:
        # before the counts, which scripts read up to the line's end
        rec = registry.recognise(reg, summary.names, summary.framework, read_as=read_as)
        line += "; " + rec.line()
    stats = summary.stats
    if stats is not None:
        line += (
            f"; stored {stats.accepted:,}, unregistered {stats.unregistered:,}, "
            f"rejected {stats.rejected:,}, non-finite {stats.nonfinite_total:,}"
        )
        if stats.sent:
            line += f", sent to InfluxDB {stats.sent:,}"
        if stats.server_rejected:
            line += f", refused by InfluxDB {stats.server_rejected:,} (see the outbox's `rejected`)"
        if stats.dropped:
            line += f", dropped {stats.dropped:,}"
        if stats.refused_disk:
            line += f", refused (disk budget) {stats.refused_disk:,}"
    return line
