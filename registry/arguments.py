"""`--registry PATH`, the same on every command that reads the registry.

A PATH that is a folder replaces the built-in registry (its metrics.yaml, terms.yaml, rules.yaml);
any other PATH is a user file extending it (`my_metrics.yaml`). The option repeats: at most one
folder, any number of files. A command adds it with `add_registry_argument(parser)` and loads
with `registry_from_args(args)`; `load_paths` does the same for paths from elsewhere.
`add_map_argument` adds `--map TAG=METRIC` (a run's own tag names), which `registry_from_args`
then applies.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path

from .catalog import Registry
from .errors import Problem, RegistryInvalid
from .loader import load
from .tag_map import MAP_HELP, parse_kept, parse_map

__all__ = [
    "REGISTRY_HELP",
    "add_map_argument",
    "add_registry_argument",
    "load_paths",
    "registry_from_args",
]

REGISTRY_HELP = (
    "a user registry file (my_metrics.yaml) extending the built-in registry, or a folder "
    "replacing it; repeatable (one folder at most)"
)


def add_registry_argument(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """Add `--registry PATH` (repeatable; `aliases`: other spellings of it, such as
    `--registry-dir`) to `parser`; `registry_from_args` reads it."""
    parser.add_argument(
        "--registry",
        *aliases,
        dest="registry",
        action="append",
        default=[],
        metavar="PATH",
        help=REGISTRY_HELP,
    )


def add_map_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--map TAG=METRIC` (repeatable) to `parser`; `registry_from_args` applies it."""
    parser.add_argument("--map", action="append", default=[], metavar="TAG=METRIC", help=MAP_HELP)


def registry_from_args(args: argparse.Namespace, extra: Iterable[str | Path] = ()) -> Registry:
    """The registry `--registry` names (the built-in one without it), with `extra` user files
    (a command's positional paths) and the `--map` mappings, when the command has them (they
    beat the files' `map:`). Raises RegistryInvalid naming each problem, BadMapping for --map."""
    reg = load_paths([*(getattr(args, "registry", None) or ()), *extra])
    items = getattr(args, "map", None) or ()
    return reg.with_map(parse_map(items, reg)).keeping(parse_kept(items))


def load_paths(paths: Sequence[str | Path]) -> Registry:
    """The registry of `--registry` PATHs: the one folder among them (the built-in registry
    when none) extended by the rest, in order. Raises RegistryInvalid."""
    folders = [Path(p) for p in paths if Path(p).is_dir()]
    files = [Path(p) for p in paths if not Path(p).is_dir()]
    if len(folders) > 1:
        shown = ", ".join(str(f) for f in folders)
        raise RegistryInvalid(
            [
                Problem(
                    str(folders[1]),
                    "",
                    "",
                    f"--registry names {len(folders)} folders ({shown}); one folder replaces the "
                    "built-in registry, so give one and pass the rest as .yaml files",
                )
            ]
        )
    return load(folders[0] if folders else None, extensions=files)
