"""`rlvitals serve`: run the datasource under waitress."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .datasource import DatasourceConfig

__all__ = ["register"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8686


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="the live dashboard and the Grafana JSON datasource (default 127.0.0.1:8686)",
        description="Serve the live dashboard (open / in a browser: every run, every metric it "
        "logged) and runs, diagnosis cards, series, events and term pages over HTTP for Grafana "
        "(Infinity or simpod JSON datasource). Reads InfluxDB when RLVITALS_INFLUX_URL is set, "
        "else the embedded store under RLVITALS_STORE. Set RLVITALS_DATASOURCE_TOKEN to require a "
        "bearer token. Requests are answered only when their Host header names this server: "
        "localhost, 127.0.0.1, ::1, the --host address, and the names of --allow-host and "
        "RLVITALS_DATASOURCE_HOSTS (others get 400, a defence against DNS rebinding).",
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
    p.add_argument("--threads", type=int, default=4, help="worker threads (default 4)")
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    import waitress

    import registry

    from .datasource import ConfigError, DatasourceConfig, create_app

    if not 0 <= args.port <= 65535:
        print(f"--port {args.port} is not a port number (0-65535)", file=sys.stderr)
        return 2
    try:
        config = DatasourceConfig.from_env(os.environ)
        config = config.replace(allowed_hosts=(*config.allowed_hosts, *args.allow_host))
        config = _with_bind_host(config, args.host)
        if config.allow_edit is None:
            # run management from the pages: on for a server only this machine reaches
            config = config.replace(allow_edit=_is_loopback(args.host))
        app = create_app(config, registry.load())
    except (ConfigError, registry.RegistryError) as exc:
        print(f"rlvitals serve: {exc}", file=sys.stderr)
        return 2
    source = config.influx_url or str(config.outbox_path)
    print(
        f"rlvitals dashboard and datasource on http://{args.host}:{args.port}/ reading {source}",
        file=sys.stderr,
    )
    print(f"rlvitals serve: {_hosts_line(config)}", file=sys.stderr)
    editing = "on" if config.allow_edit and not config.uses_influx else "off"
    print(
        f"rlvitals serve: deleting, renaming, notes and tags from the pages are {editing} "
        "(RLVITALS_DATASOURCE_EDIT; on by default only when bound to loopback)",
        file=sys.stderr,
    )
    waitress.serve(app, host=args.host, port=args.port, threads=max(1, args.threads))
    return 0


def _is_loopback(host: str) -> bool:
    from .datasource.config import LOOPBACK_HOSTS

    return host.strip("[]").lower() in LOOPBACK_HOSTS


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


def _hosts_line(config: DatasourceConfig) -> str:
    from .datasource.config import ANY_HOST, HOSTS_SETTING, LOOPBACK_HOSTS

    if ANY_HOST in config.allowed_hosts:
        return f"answering any Host header ({HOSTS_SETTING} or --allow-host has {ANY_HOST!r})"
    names = ", ".join(dict.fromkeys((*LOOPBACK_HOSTS, *config.allowed_hosts)))
    return (
        f"answering Host {names} (any port); others get 400: add names with --allow-host "
        f"or {HOSTS_SETTING}"
    )
