"""`rlvitals serve`: run the datasource under waitress."""

from __future__ import annotations

import argparse
import os
import sys

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
        "bearer token.",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
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
        app = create_app(config, registry.load())
    except (ConfigError, registry.RegistryError) as exc:
        print(f"rlvitals serve: {exc}", file=sys.stderr)
        return 2
    source = config.influx_url or str(config.outbox_path)
    print(
        f"rlvitals dashboard and datasource on http://{args.host}:{args.port}/ reading {source}",
        file=sys.stderr,
    )
    waitress.serve(app, host=args.host, port=args.port, threads=max(1, args.threads))
    return 0
