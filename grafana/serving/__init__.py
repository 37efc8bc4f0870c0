"""The HTTP server under `rlvitals serve`: waitress (pinned in pyproject.toml) with the limits a
server that untrusted clients reach needs, which waitress alone does not give.

- `limits.py`: `ServerLimits`, how many connections are kept (in all and per client address) and
  how long a request's headers and body may take; the file-descriptor budget it fits in.
- `guard.py`: `ConnectionGuard`, which enforces those limits on waitress's channels, and
  `create_guarded_server`, waitress's `create_server` with the guard in place; `client_key`,
  the address a client is counted under (also by the datasource's wrong-token guard).

Why a guard and not waitress's own settings is said in `guard.py`. May import waitress and the
standard library; nothing of rlvitals (the app it serves is any WSGI callable).
"""

from .guard import ConnectionGuard, ConnectionStats, client_key, create_guarded_server
from .limits import LimitsError, ServerLimits, raise_open_files_limit

__all__ = [
    "ConnectionGuard",
    "ConnectionStats",
    "LimitsError",
    "ServerLimits",
    "client_key",
    "create_guarded_server",
    "raise_open_files_limit",
]
