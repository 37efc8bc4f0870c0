"""Errors raised by the exporter: one small hierarchy whose messages say what, where and how to fix."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ExporterError",
    "InvalidSample",
    "OutboxError",
    "RunHeld",
    "WriteError",
]


class ExporterError(Exception):
    """Base class for everything the exporter raises."""


class ConfigError(ExporterError, ValueError):
    """An `RLVITALS_*` setting (or the matching flag) has a value the exporter cannot use."""


class InvalidSample(ExporterError, ValueError):
    """A logged sample breaks a rule; raised at the call site only under the `strict` policy.

    `step`, `name` and `value` say which sample it was; `name` and `value` are None when the
    problem is the step itself.
    """

    def __init__(
        self, message: str, *, step: object = None, name: str | None = None, value: object = None
    ) -> None:
        self.step = step
        self.name = name
        self.value = value
        super().__init__(message)


class OutboxError(ExporterError):
    """The local outbox (sqlite file under RLVITALS_STORE) cannot be opened or written.

    `retryable` is True when the same write can succeed later (another process holds the lock).
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class RunHeld(ExporterError):
    """Another live process writes the run this one asked to go on with (its writer lease).

    `holder` names it ("pid 123 on host-a"), `kind` what it does (log, import, tail) and
    `since` when it took the run (Unix seconds).
    """

    def __init__(self, message: str, *, holder: str, kind: str, since: float) -> None:
        self.holder = holder
        self.kind = kind
        self.since = since
        super().__init__(message)


class WriteError(ExporterError):
    """A batch could not be written to InfluxDB.

    `retryable` is True when trying again later can succeed (server down, 5xx, auth or database
    not yet set up) and False when the server refused the data itself (HTTP 400).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = True,
        detail: str = "",
    ) -> None:
        self.status = status
        self.retryable = retryable
        self.detail = detail or message
        super().__init__(message)
