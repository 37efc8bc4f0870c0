"""`rlvitals` command line. Each component contributes its subcommands through a `register` function."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from . import __version__

__all__ = ["main"]

# Modules that expose `register(subparsers)`; each adds its own subcommands and handlers.
_COMMAND_MODULES: tuple[str, ...] = (
    "rlvitals.commands_registry",
    "exporter.ingest.commands",
    "exporter.store.runs_list",
    "rlvitals.runs_manage",  # subcommands of `runs`: after it
    "rlvitals.evaluate.commands",
    "grafana.commands",
    "rlvitals.demo.commands",
    "grafana.report.commands",
)

Handler = Callable[[argparse.Namespace], int]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvitals",
        description="RL training vital signs: registry, exporter, Grafana datasource and dashboards.",
    )
    parser.add_argument("--version", action="version", version=f"rlvitals {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`rlvitals runs --json | head`): what it wanted was printed.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command a pipe closed on


if __name__ == "__main__":
    sys.exit(main())
