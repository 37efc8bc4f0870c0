"""How many connections `rlvitals serve` keeps and how long a request may take to arrive.

Each open connection costs the server one file descriptor, and up to three while a large body or
response overflows to a temporary file (waitress/adjustments.py, the comment above
`connection_limit`). So the connection limit is cut to what the process's open-files limit can
hold, after raising that limit's soft value to its hard one (what the system already allows).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["FDS_PER_CONNECTION", "LimitsError", "ServerLimits", "raise_open_files_limit"]

FDS_PER_CONNECTION = 3
RESERVED_FDS = 128
"""Descriptors kept for everything else: the store's sqlite files, InfluxDB connections, the log
follower's open logs, the listening sockets."""


class LimitsError(ValueError):
    """A limit that cannot work (zero connections, a negative timeout); the message names it."""


@dataclass(frozen=True)
class ServerLimits:
    """`connections` open at once in all and `per_client` from one client address (an IPv6
    client's /64, which one host usually owns); at either limit a new connection closes the
    oldest one of the same scope that is not being answered, so a client sending a request now
    gets in while whoever holds connections open without finishing a request loses them.

    A request's headers must arrive within `header_timeout` seconds of its first byte, the whole
    request within `request_timeout`; a connection with no request under way is closed after
    `idle_timeout` seconds. A trickled header (a byte every few seconds, the slowloris attack)
    keeps a connection *active* but not within these deadlines."""

    connections: int = 2000
    per_client: int = 64
    header_timeout: float = 10.0
    request_timeout: float = 60.0
    idle_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.connections < 1:
            raise LimitsError(f"--connection-limit {self.connections} must be at least 1")
        if self.per_client < 1:
            raise LimitsError(f"--client-limit {self.per_client} must be at least 1")
        for flag, value in (
            ("--header-timeout", self.header_timeout),
            ("--request-timeout", self.request_timeout),
            ("--idle-timeout", self.idle_timeout),
        ):
            if not value > 0:
                raise LimitsError(f"{flag} {value} must be a positive number of seconds")
        if self.request_timeout < self.header_timeout:
            raise LimitsError(
                f"--request-timeout {self.request_timeout:g} is shorter than --header-timeout "
                f"{self.header_timeout:g}: the whole request includes its headers"
            )

    def fitted(self, open_files: int) -> ServerLimits:
        """These limits with `connections` (and `per_client`) cut to what `open_files`
        descriptors hold at `FDS_PER_CONNECTION` each."""
        budget = max(1, (open_files - RESERVED_FDS) // FDS_PER_CONNECTION)
        connections = min(self.connections, budget)
        return dataclasses.replace(
            self, connections=connections, per_client=min(self.per_client, connections)
        )


def raise_open_files_limit() -> int:
    """Raise this process's soft open-files limit to its hard limit; return the soft limit now in
    force (unchanged where the platform has no such limit or refuses)."""
    try:
        import resource
    except ImportError:  # not on Windows: no such limit to raise
        return 1 << 20
    infinity = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == infinity:
        return 1 << 20
    target = 1 << 16 if hard == infinity else hard
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return int(soft)
