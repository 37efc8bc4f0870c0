"""The command-line flags of the commands that read logs (`import`, `tail`, `serve LOGDIR`,
`evaluate`), declared once so that each accepts what the readers' messages advise: the logs as
PATHs or `--logdir`, how to read them (`--format`, `--pattern`, `--step-key`) and the run config
(`--map`, `--config`, `--set`). `format_argv` and `config_argv` give them back as flags, for a
command that reads through `tail` or `import` (serve's follower, evaluate's replay).

May import: the standard library, `registry`, `exporter.sources`.
"""

from __future__ import annotations

import argparse

from registry import add_map_argument

from ..sources import FORMATS

__all__ = [
    "add_config_arguments",
    "add_format_arguments",
    "add_path_arguments",
    "config_argv",
    "format_argv",
    "given_paths",
]


def add_path_arguments(
    p: argparse.ArgumentParser, dest: str, help_text: str, metavar: str = "PATH"
) -> None:
    """The logs to read, named as PATHs or, as TensorBoard users type them, `--logdir PATH`
    (repeatable, the same as naming PATH); `given_paths` joins the two."""
    p.add_argument(dest, nargs="*", metavar=metavar, help=help_text)
    p.add_argument(
        "--logdir",
        action="append",
        default=[],
        metavar=metavar,
        help="a log folder or file, as `tensorboard --logdir` takes it (repeatable; the same "
        "as naming " + metavar + ")",
    )


def given_paths(args: argparse.Namespace, dest: str = "paths") -> list[str]:
    """The PATHs and the `--logdir` PATHs of a command line, PATHs first."""
    return [*getattr(args, dest), *args.logdir]


def add_format_arguments(p: argparse.ArgumentParser) -> None:
    """How the logs are read when their format cannot be told or their step is not the usual
    key: `--format`, `--pattern`, `--step-key` (what the readers' messages advise)."""
    p.add_argument(
        "--format", choices=("auto", *FORMATS), default="auto", help="log format (default auto)"
    )
    p.add_argument(
        "--pattern",
        metavar="REGEX",
        help="for text logs: a regex with a named group 'step' and either 'name' and 'value' "
        "or one group per metric ('__' in a group name stands for '/')",
    )
    p.add_argument(
        "--step-key", metavar="KEY", help="the step key/column when it is not the usual one"
    )


def format_argv(args: argparse.Namespace) -> list[str]:
    """`add_format_arguments`' flags as given, for a command that reads the logs with
    `tail` or `import` (serve's follower, evaluate's replay)."""
    argv = ["--format", args.format]
    if args.pattern is not None:
        argv += ["--pattern", args.pattern]
    if args.step_key is not None:
        argv += ["--step-key", args.step_key]
    return argv


def config_argv(args: argparse.Namespace) -> list[str]:
    """`add_config_arguments`' flags as given (`--map`, `--config`, `--set`)."""
    argv = [f"--map={m}" for m in args.map]
    if args.config is not None:
        argv += ["--config", args.config]
    argv += [f"--set={s}" for s in args.set]
    return argv


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """`--config FILE`, `--set KEY=VALUE`: the run config diagnosis reads (run context), and
    `--map TAG=METRIC`: the run's own tag names (`registry.registry_from_args` applies them;
    `mapped_config` records them in the run config)."""
    add_map_argument(p)
    p.add_argument(
        "--config",
        metavar="FILE",
        help="run config (YAML or JSON mapping): algorithm, n_actions, clip_epsilon, kl_coef, "
        "planned_steps, ... (docs/run-config.md); overrides what the logs say",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one run-config key (repeatable; VALUE parsed as JSON when it can be, e.g. "
        "--set n_actions=2 --set algorithm=PPO); overrides --config",
    )
