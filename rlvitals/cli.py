"""`rlvitals` command line. Each component contributes its subcommands through a `register` function.

Only the module of the command asked for is imported: the components import numpy, Flask,
TensorBoard's protobufs and the registry, about a second before a command could answer, which
`rlvitals --version`, `rlvitals --help` and a mistyped command need none of. `COMMANDS` is the
one list of commands, the modules that register each and its line in `rlvitals --help`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import __version__

__all__ = ["COMMANDS", "main"]

# command -> (modules whose `register(subparsers)` add it, in order; its line in `--help`).
# A module may register several commands; `runs`' actions are added to it by the second module.
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "demo": (
        ("rlvitals.demo.commands",),
        "simulated training with injected failures into the store",
    ),
    "serve": (
        ("grafana.commands",),
        "the live dashboard and the Grafana JSON datasource (default 127.0.0.1:8686); "
        "with LOGDIRs (or --logdir), import and follow their logs as they grow",
    ),
    "import": (
        ("exporter.ingest.commands",),
        "read existing training logs once into the store / InfluxDB",
    ),
    "tail": (
        ("exporter.ingest.commands",),
        "read training logs and keep following them as they grow (the sidecar)",
    ),
    "evaluate": (
        ("rlvitals.evaluate.commands",),
        "replay training logs through the diagnosis at every logged step; compare verdicts",
    ),
    "report": (("grafana.report.commands",), "self-contained HTML report of a run"),
    "runs": (
        ("exporter.store.runs_list", "rlvitals.runs_manage"),
        "list the runs in the store (project, framework, status, last step, started); "
        "delete, rename, note, tag them",
    ),
    "validate": (
        ("rlvitals.commands_registry",),
        "check the built-in registry, or it extended by user files",
    ),
    "build": (
        ("rlvitals.commands_registry",),
        "regenerate docs, dashboards, alert rules and provisioning from the registry",
    ),
    "doctor": (
        ("rlvitals.commands_registry",),
        "check configuration and connectivity, say what is wrong",
    ),
}

Handler = Callable[[argparse.Namespace], int]


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands' action: a command's `--help` line comes from `COMMANDS`."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name in COMMANDS:
            kwargs.setdefault("help", COMMANDS[name][1])
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


def _asked(argv: Sequence[str]) -> str | None:
    """The command named on the line: its first word not an option (the top level's only
    options, --help and --version, take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with `command` registered by its modules; every other command is listed
    by name and help line only (enough for `--help` and for naming a mistyped command)."""
    parser = argparse.ArgumentParser(
        prog="rlvitals",
        description="RL training vital signs: registry, exporter, Grafana datasource and dashboards.",
    )
    parser.add_argument("--version", action="version", version=f"rlvitals {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    if command in COMMANDS:
        for name in COMMANDS[command][0]:
            importlib.import_module(name).register(sub)
    for name in COMMANDS:
        if name not in sub.choices:
            sub.add_parser(name, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(_asked(argv))
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
