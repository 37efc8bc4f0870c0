"""`installed(module)`: a module the `[test]` extra installs, imported; a clear failure when not.

The README's set-up line 2 (`pip install -e '.[test]'`) installs every package a test needs,
the integrations' trainers (torch, SB3, gymnasium, transformers, TRL) and NVML's binding
included, so a missing one is a broken install, not a reason to skip: the test fails, naming
the package and the line that installs it (`pytest.importorskip` would turn a green run into a
run that says nothing about the integrations).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

__all__ = ["INSTALL_LINE", "installed"]

INSTALL_LINE = "pip install -e '.[test]'"


def installed(module: str, package: str | None = None) -> ModuleType:
    """`module` imported; the test fails (without a traceback) when its package is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(
            f"{module} is not importable ({exc}): the test extra installs "
            f"{package or module.split('.')[0]}; run `{INSTALL_LINE}` in the repository",
            pytrace=False,
        )
