"""Errors raised by the registry: one small hierarchy, messages that say what, where and how to fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AmbiguousName",
    "BadMapping",
    "Problem",
    "RegistryError",
    "RegistryInvalid",
    "ResolveError",
    "UnknownName",
]


class RegistryError(Exception):
    """Base class for everything the registry raises."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a registry file: where it is and what is wrong."""

    file: str
    entry: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.entry}" if self.entry else self.file
        if self.field:
            where += f" field '{self.field}'"
        return f"{where}: {self.message}"


class RegistryInvalid(RegistryError):
    """The registry files do not validate; carries every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        # The first problem on the first line, the others below it: a command printing one
        # line still says what and where (`rlvitals validate` lists them all).
        first = f": {self.problems[0]}" if self.problems else ""
        rest = "".join(f"\n  - {p}" for p in self.problems[1:])
        super().__init__(f"registry is invalid ({len(self.problems)} problem(s)){first}{rest}")


class ResolveError(RegistryError, LookupError):
    """A metric name could not be translated to one canonical id."""

    def __init__(self, name: str, message: str, candidates: Sequence[str] = ()) -> None:
        self.name = name
        self.candidates = tuple(candidates)
        super().__init__(message)


class UnknownName(ResolveError):
    """No metric and no alias in the registry matches the name."""


class AmbiguousName(ResolveError):
    """The name means different metrics in different frameworks; pass framework= to choose."""


class BadMapping(RegistryError):
    """A `--map TAG=METRIC` that is malformed or names no metric id."""
