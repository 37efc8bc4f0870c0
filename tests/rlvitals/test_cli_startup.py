"""`rlvitals --version` and `rlvitals --help` answer without importing the components (numpy,
Flask, waitress, TensorBoard's protobufs, the registry: about a second of imports), and every
command listed by `--help` is there when asked for. Timing is not asserted here (see
docs/benchmarks.md); what is asserted is what makes it fast: the modules a bare answer loads."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
# What a command's own work needs and `--version` / `--help` do not.
HEAVY = ("numpy", "flask", "waitress", "tensorboard", "yaml", "registry", "exporter", "grafana")


def _imported(*argv: str) -> tuple[set[str], str]:
    """The top-level modules `python -X importtime -m rlvitals ARGV` imports, and its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rlvitals", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names, done.stdout


@pytest.mark.parametrize("argv", [["--version"], ["--help"]], ids=["version", "help"])
def test_a_bare_answer_imports_none_of_the_components(argv: list[str]) -> None:
    names, out = _imported(*argv)
    assert "rlvitals" in names  # the measurement sees the package itself
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    if argv == ["--version"]:
        assert out.startswith("rlvitals ")
    else:
        for command in COMMANDS:
            assert f"    {command} " in out, command


def test_a_command_imports_what_it_needs() -> None:
    # the control: the same measurement sees the components once a command runs
    names, _ = _imported("validate")
    assert {"registry", "yaml"} <= names


def test_every_listed_command_is_registered_by_the_modules_named_for_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command, (modules, summary) in COMMANDS.items():
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0, command
        out = capsys.readouterr().out
        assert out.startswith(f"usage: rlvitals {command}"), command
        assert summary  # its line in --help
        # the modules named register it (and nothing they register is missing from the list)
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        for name in modules:
            importlib.import_module(name).register(sub)
        assert command in sub.choices, (command, modules)
        assert set(sub.choices) <= set(COMMANDS), set(sub.choices) - set(COMMANDS)


def test_a_mistyped_command_is_named_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["servee"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'servee'" in err and "'serve'" in err
