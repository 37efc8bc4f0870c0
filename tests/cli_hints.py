"""What the command-line habit tests share: the options a command accepts, and logs each of
which makes a reader advise an option (tests/rlvitals/test_cli_habits.py for import, tail and
evaluate; tests/grafana/test_serve_terminal.py for serve)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rlvitals import cli

__all__ = ["OPTION", "hint_logs", "options_of"]

# an option as a message names it: `--step-key`, not a `--` inside a word
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options_of(command: str) -> set[str]:
    """Every option string `rlvitals COMMAND` accepts (its actions' too, for `runs`)."""
    parser = _subparsers(cli._parser(command))[command]
    found = set(parser._option_string_actions)
    for sub in _subparsers(parser).values():
        found |= set(sub._option_string_actions)
    return found


def hint_logs(root: Path) -> Path:
    """Logs each of which makes a reader advise an option."""
    logs = root / "logs"
    for name in ("nostep", "own", "amb", "hf"):
        (logs / name).mkdir(parents=True)
    # a JSON Lines log whose step key is not a known one: --step-key
    (logs / "nostep" / "m.jsonl").write_text('{"iter": 1, "loss": 1.0}\n{"iter": 2, "loss": 0.9}\n')
    # names of its own: --map suggestions
    (logs / "own" / "m.jsonl").write_text(
        "".join(
            f'{{"step": {i}, "optim/kl": 0.0{i}, "perf/return_mean10": {i}}}\n' for i in range(1, 6)
        )
    )
    # `kl` is policy KL in RLlib and the reference KL in TRL: --framework
    (logs / "amb" / "m.jsonl").write_text(
        "".join(f'{{"step": {i}, "kl": 0.0{i}}}\n' for i in range(1, 4))
    )
    # a Hugging Face Trainer's printed dicts without a step: --set logging_steps=N
    (logs / "hf" / "train.log").write_text(
        "".join(
            f"{{'loss': '0.5{i}', 'reward': '0.1', 'learning_rate': '1e-05', 'epoch': '0.{i}'}}\n"
            for i in range(1, 5)
        )
    )
    # named alone, of no format that can be told: --format, --pattern
    (root / "notes.txt").write_text("hello there\n")
    return logs
