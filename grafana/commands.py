"""`rlvitals serve [LOGDIR ...]`: run the datasource under waitress; with folders given, also
import the logs under them and keep following them (`exporter.ingest.background.Follower`, the
`tail --follow` loop in a thread of this process)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.ingest.arguments import (
    add_config_arguments,
    add_format_arguments,
    add_path_arguments,
    config_argv,
    format_argv,
    given_paths,
)
from registry import FRAMEWORKS, add_registry_argument

if TYPE_CHECKING:
    from exporter.ingest.background import Follower
    from registry import Registry

    from .datasource import DatasourceConfig
    from .serving import ServerLimits

__all__ = ["register"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8686
# waitress's logger of its task queue (`waitress.utilities.queue_logger`)
_QUEUE_LOGGER = "waitress.queue"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        description="Serve the live dashboard (open / in a browser: every run, every metric it "
        "logged) and runs, diagnosis cards, series, events and term pages over HTTP for Grafana "
        "(Infinity or simpod JSON datasource). Reads InfluxDB when RLVITALS_INFLUX_URL is set, "
        "else the embedded store under RLVITALS_STORE. Set RLVITALS_DATASOURCE_TOKEN to require a "
        "bearer token (at least 16 characters; a --host other machines reach refuses to start "
        "without one unless --allow-no-token). Requests are answered only when their Host header names this server: "
        "localhost, 127.0.0.1, ::1, the --host address, and the names of --allow-host and "
        "RLVITALS_DATASOURCE_HOSTS (others get 400, a defence against DNS rebinding). With "
        "LOGDIRs, the TensorBoard / SB3 progress.csv / JSONL / trainer_state logs under them are "
        "imported into the store and followed as they grow (what `rlvitals tail` does): new "
        "runs and new steps appear by themselves, and a restart reads only what is new.",
    )
    add_path_arguments(
        p,
        "logdirs",
        "folders (or log files) to import and keep following, like `tensorboard --logdir`",
        "LOGDIR",
    )
    p.add_argument("--store", metavar="DIR", help="embedded store folder (default $RLVITALS_STORE)")
    add_registry_argument(p)
    p.add_argument(
        "--framework",
        choices=("auto", *FRAMEWORKS),
        default="auto",
        help="with LOGDIR: framework that decides ambiguous names (default: detected from the keys)",
    )
    p.add_argument("--project", metavar="P", help="with LOGDIR: project tag for the run(s)")
    add_format_arguments(p)
    add_config_arguments(p)
    p.add_argument(
        "--resume",
        action="store_true",
        help="with LOGDIR: go on with runs of the same name already in the store even when no "
        "follower read their logs before (others whose name is taken get a new name, NAME-2)",
    )
    p.add_argument(
        "--poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="with LOGDIR: seconds between looks at the logs (default 2)",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header is NAME (any port; repeatable; added to "
        "the comma-separated RLVITALS_DATASOURCE_HOSTS); '*' answers any Host, only for use "
        "behind a reverse proxy that checks Host itself",
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--allow-no-token",
        action="store_true",
        help="serve a non-loopback --host with no RLVITALS_DATASOURCE_TOKEN set (refused "
        "otherwise): only when something in front already decides who reaches the port",
    )
    p.add_argument("--threads", type=int, default=4, help="worker threads (default 4)")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also show the web server's own notices: waitress's 'Task queue depth' warnings, "
        "said whenever requests wait for one of the --threads workers",
    )
    _add_limit_arguments(p)
    p.set_defaults(handler=_serve)


def _add_limit_arguments(p: argparse.ArgumentParser) -> None:
    from .serving import ServerLimits

    d = ServerLimits()
    p.add_argument(
        "--connection-limit",
        type=int,
        default=d.connections,
        metavar="N",
        help=f"connections kept open at once (default {d.connections}, cut to what the "
        "open-files limit holds); at the limit a new one closes the oldest idle or unfinished one",
    )
    p.add_argument(
        "--client-limit",
        type=int,
        default=d.per_client,
        metavar="N",
        help=f"connections kept open from one client address (default {d.per_client}; an IPv6 "
        "client's /64); beyond it the client's own oldest idle or unfinished one is closed",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=d.header_timeout,
        metavar="SECONDS",
        help=f"a request's headers must arrive within this (default {d.header_timeout:g}), "
        "however slowly they trickle",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=d.request_timeout,
        metavar="SECONDS",
        help=f"the whole request, body included, within this (default {d.request_timeout:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout,
        metavar="SECONDS",
        help=f"a kept-alive connection with no request is closed after this (default "
        f"{d.idle_timeout:g})",
    )


def _serve(args: argparse.Namespace) -> int:
    import registry
    from exporter.errors import ExporterError

    from .datasource import ConfigError, DatasourceConfig, create_app
    from .serving import (
        ConnectionGuard,
        LimitsError,
        ServerLimits,
        create_guarded_server,
        raise_open_files_limit,
    )

    if not 0 <= args.port <= 65535:
        print(f"--port {args.port} is not a port number (0-65535)", file=sys.stderr)
        return 2
    args.logdirs = given_paths(args, "logdirs")
    problem = _logdirs_problem(args)
    if problem is not None:
        print(f"rlvitals serve: {problem}", file=sys.stderr)
        return 2
    try:
        limits = ServerLimits(
            connections=args.connection_limit,
            per_client=args.client_limit,
            header_timeout=args.header_timeout,
            request_timeout=args.request_timeout,
            idle_timeout=args.idle_timeout,
        )
    except LimitsError as exc:
        print(f"rlvitals serve: {exc}", file=sys.stderr)
        return 2
    guard = ConnectionGuard(limits.fitted(raise_open_files_limit()))
    try:
        config = DatasourceConfig.from_env(os.environ)
        # absolute: the page and the terminal name the store actually read, wherever serve ran
        store = Path(os.path.abspath(args.store or config.store))
        config = config.replace(
            store=store,
            allowed_hosts=(*config.allowed_hosts, *args.allow_host),
            following=tuple(args.logdirs),
        )
        config = _with_bind_host(config, args.host)
        if config.token is None and not _binds_loopback(args.host) and not args.allow_no_token:
            print(f"rlvitals serve: {_no_token_refusal(args.host)}", file=sys.stderr)
            return 2
        if config.allow_edit is None:
            # run management from the pages: on for a server only this machine reaches
            config = config.replace(allow_edit=_binds_loopback(args.host))
        reg = registry.registry_from_args(args)
        follower = _follower(args, store, reg) if args.logdirs else None
        if follower is not None:
            _create_store(config.outbox_path)
        app = create_app(
            config,
            reg,
            follow_state=follower.state if follower else None,
            connection_stats=lambda: guard.stats().as_json(),
        )
        server = create_guarded_server(
            app,
            guard,
            host=args.host,
            port=args.port,
            threads=max(1, args.threads),
            # over the app's limit the app answers its JSON 413; far over it, waitress stops reading
            max_request_body_size=2 * config.max_body_bytes,
        )
    except (ConfigError, registry.RegistryError) as exc:
        print(f"rlvitals serve: {exc}", file=sys.stderr)  # a registry lists every problem
        return 2
    except ExporterError as exc:
        print(f"rlvitals serve: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"rlvitals serve: cannot listen on {args.host}:{args.port} ({exc.strerror}); "
            "choose a free --port",
            file=sys.stderr,
        )
        return 2
    source = config.influx_url or str(config.outbox_path)
    # the port actually bound (--port 0 picks a free one)
    port = getattr(server, "effective_port", args.port)
    print(
        f"rlvitals dashboard and datasource on http://{args.host}:{port}/ reading {source}",
        file=sys.stderr,
    )
    if config.uses_influx:
        if args.logdirs:
            print(f"rlvitals serve: outbox {store} (sent on to InfluxDB)", file=sys.stderr)
    else:
        print(f"rlvitals serve: store {store}", file=sys.stderr)
    for logdir in args.logdirs:
        print(
            f"rlvitals serve: following {logdir} ({os.path.abspath(logdir)}) every {args.poll:g} s",
            file=sys.stderr,
        )
    print(f"rlvitals serve: {_hosts_line(config)}", file=sys.stderr)
    if config.token is None and not _binds_loopback(args.host):
        print(
            f"rlvitals serve: no RLVITALS_DATASOURCE_TOKEN on {args.host} (--allow-no-token): "
            "whoever reaches this port reads every run",
            file=sys.stderr,
        )
    print(f"rlvitals serve: {_limits_line(guard.limits, limits)}", file=sys.stderr)
    editing = "on" if config.allow_edit and not config.uses_influx else "off"
    print(
        f"rlvitals serve: deleting, renaming, notes and tags from the pages are {editing} "
        "(RLVITALS_DATASOURCE_EDIT; on by default only when bound to loopback)",
        file=sys.stderr,
        flush=True,
    )
    logging.basicConfig()  # as waitress.serve does: its warnings and the app's are shown
    if not args.verbose:
        # A page load asks for many series at once, so requests wait for a worker thread all
        # the time: waitress says so at every one (151 lines in 30 minutes of one open page).
        # That is the server's business; its failures are still shown.
        logging.getLogger(_QUEUE_LOGGER).setLevel(logging.ERROR)
    # SIGTERM (a stopped container, a test) ends like Ctrl-C: the follower stores what it read
    previous = signal.signal(signal.SIGTERM, _interrupt)
    if follower is not None:
        follower.start()
    try:
        server.run()  # returns on KeyboardInterrupt
    finally:
        signal.signal(signal.SIGTERM, previous)
        if follower is not None and not follower.stop(timeout=15.0):
            print("rlvitals serve: the log follower did not stop in 15 s", file=sys.stderr)
    return 0


def _create_store(outbox: Path) -> None:
    """Create the store the follower writes before serving it: a page asking while the
    follower's first open is still making the tables would get a 503."""
    from exporter.store import Outbox

    with Outbox(outbox):
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _logdirs_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the LOGDIR arguments and --poll, or None."""
    if args.poll <= 0:
        return f"--poll {args.poll} must be a positive number of seconds"
    for logdir in args.logdirs:
        if not os.path.exists(logdir):
            return f"LOGDIR {logdir}: no such folder or file; check the path"
    if not args.logdirs:
        return None
    # what the follower would refuse in its thread, refused before the server starts
    from exporter.errors import ExporterError
    from exporter.ingest.commands import read_config_arguments
    from exporter.sources import compile_pattern

    try:
        if args.pattern is not None:
            compile_pattern(args.pattern)
        elif args.format == "regex":
            return "--format regex needs --pattern REGEX"
        read_config_arguments(args)
    except ExporterError as exc:
        return str(exc).splitlines()[0]
    return None


def _follower(args: argparse.Namespace, store: Path, reg: Registry) -> Follower:
    """The `tail --follow` of the LOGDIRs into `store`, with the flags serve shares with tail."""
    from exporter.ingest.background import Follower

    argv = [*args.logdirs, "--store", str(store), "--poll", repr(args.poll)]
    argv += ["--framework", args.framework, *format_argv(args), *config_argv(args)]
    if args.project is not None:
        argv += ["--project", args.project]
    if args.resume:
        argv += ["--resume"]
    for path in args.registry:
        argv += ["--registry", str(path)]
    return Follower(argv, reg=reg)


def _binds_loopback(host: str) -> bool:
    """Whether `--host` reaches only this machine: `localhost` or a loopback address
    (127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _no_token_refusal(host: str) -> str:
    from .datasource.config import TOKEN_SETTING
    from .datasource.secret_strength import MAKE_ONE

    return (
        f"--host {host} can be reached from other machines and no {TOKEN_SETTING} is set: "
        "anyone who reaches the port would read every run. Set a token (make one with "
        f"`{MAKE_ONE}`; browsers sign in once at /login, Grafana sends it as a bearer token), "
        "or bind --host 127.0.0.1, or pass --allow-no-token when something in front (a reverse "
        "proxy with its own login, a firewall) already decides who reaches it"
    )


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host in ("", "*")


def _with_bind_host(config: DatasourceConfig, host: str) -> DatasourceConfig:
    """`config` also answering the address `--host` binds: whoever reaches the server by it asked
    for this server. A wildcard (0.0.0.0, ::) is no name a client sends."""
    from .datasource.config import LOOPBACK_HOSTS, ConfigError

    if _is_wildcard(host) or host.strip("[]").lower() in LOOPBACK_HOSTS:
        return config
    try:
        return config.replace(allowed_hosts=(*config.allowed_hosts, host))
    except ConfigError:
        # a bind address no Host header can carry (an IPv6 zone, say) has nothing to match
        return config


def _limits_line(fitted: ServerLimits, asked: ServerLimits) -> str:
    cut = (
        f" (cut from {asked.connections}: the open-files limit holds no more; raise `ulimit -n`)"
        if fitted.connections < asked.connections
        else ""
    )
    return (
        f"at most {fitted.connections} connections{cut}, {fitted.per_client} per client; "
        f"headers within {fitted.header_timeout:g} s, a request within "
        f"{fitted.request_timeout:g} s, idle connections closed after {fitted.idle_timeout:g} s"
    )


def _hosts_line(config: DatasourceConfig) -> str:
    from .datasource.config import ANY_HOST, HOSTS_SETTING, LOOPBACK_HOSTS

    if ANY_HOST in config.allowed_hosts:
        return f"answering any Host header ({HOSTS_SETTING} or --allow-host has {ANY_HOST!r})"
    names = ", ".join(dict.fromkeys((*LOOPBACK_HOSTS, *config.allowed_hosts)))
    return (
        f"answering Host {names} (any port); others get 400: add names with --allow-host "
        f"or {HOSTS_SETTING}"
    )
