"""Errors raised by log sources for input that cannot be read at all (a whole file or an option)."""

from __future__ import annotations

from ..errors import ExporterError

__all__ = ["BadPattern", "SourceError", "UnreadableLog"]


class SourceError(ExporterError):
    """Base of the log-source errors; the message says what, where and how to fix it."""


class UnreadableLog(SourceError):
    """A path that does not exist, is not readable, or holds no log of a known format."""


class BadPattern(SourceError):
    """A user regular expression that does not compile or lacks the groups a source needs."""
