"""Datasource settings: one frozen dataclass built from `RLVITALS_*` variables (or flags) in main."""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exporter.config import influx_token_from, influx_url_problem
from exporter.errors import ConfigError as _ExporterConfigError
from exporter.lifecycle import Lifecycle
from grafana.alert_webhook import SECRET_SETTING

from .secret_strength import weakness

__all__ = [
    "ANY_HOST",
    "HOSTS_SETTING",
    "LOOPBACK_HOSTS",
    "SESSION_COOKIE",
    "SESSION_DAYS",
    "TOKEN_SETTING",
    "WEBHOOK_SECRET_SETTING",
    "ConfigError",
    "DatasourceConfig",
    "InfluxApi",
]

InfluxApi = Literal["v1", "v2"]
SESSION_COOKIE = "rlvitals_session"
"""The cookie a browser signed in at `/login` sends instead of the bearer token."""
SESSION_DAYS = 30
_SECRETS = ("influx_password", "influx_token", "token", "alert_webhook_secret")
TOKEN_SETTING = "RLVITALS_DATASOURCE_TOKEN"
WEBHOOK_SECRET_SETTING = SECRET_SETTING
MAX_POINTS_LIMIT = 100_000

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Host names always answered. A DNS-rebinding page runs under the attacker's own name, which its
requests carry in `Host`; a page under a loopback name is already on this machine."""
ANY_HOST = "*"
"""In `allowed_hosts`: answer any `Host` (for a reverse proxy in front that checks it itself)."""
HOSTS_SETTING = "RLVITALS_DATASOURCE_HOSTS"
_HOSTS_WHERE = f"{HOSTS_SETTING} (or `rlvitals serve --allow-host`)"
# DNS labels plus `_`, which Docker's embedded DNS accepts in service and container names
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


class ConfigError(ValueError):
    """An `RLVITALS_*` setting has a value the datasource cannot use; the message says which."""


def _str(environ: Mapping[str, str], key: str) -> str | None:
    raw = environ.get(key, "").strip()
    return raw or None


def _int(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer; set it to a whole number") from None


def _flag(environ: Mapping[str, str], key: str) -> bool | None:
    raw = environ.get(key, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{key}={raw!r} must be 1 or 0 (true/false, yes/no, on/off)")


def _float(environ: Mapping[str, str], key: str, default: float) -> float:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a number; set it to e.g. 10 or 2.5") from None


@dataclass(frozen=True)
class DatasourceConfig:
    """Where history is read from and how requests are bounded.

    With `influx_url` unset the exporter's outbox under `store` is read (the embedded store).
    `token`, when set, must be sent by every client as `Authorization: Bearer <token>` (except
    on `/api/health` and the public term pages). Secrets never appear in `repr`.

    `allowed_hosts` are the names, besides `LOOPBACK_HOSTS`, that a request's `Host` header may
    carry (ports are not compared); `ANY_HOST` among them turns the check off. They are kept in
    a canonical form: lower case, no trailing dot, IPv6 without brackets.
    """

    store: Path = Path("./rlvitals-data")
    influx_url: str | None = None
    influx_api: InfluxApi = "v1"
    influx_database: str = "rlvitals"
    influx_username: str | None = None
    influx_password: str | None = None
    influx_org: str | None = None
    influx_bucket: str | None = None
    influx_token: str | None = None
    influx_timeout: float = 10.0
    token: str | None = None
    max_body_bytes: int = 1024 * 1024
    default_points: int = 1000
    max_points: int = 10_000
    card_window: int = 2000
    max_events: int = 10_000
    allowed_hosts: tuple[str, ...] = ()
    public_url: str | None = None
    stall_after_s: float = 600.0
    """RLVITALS_STALL_AFTER_S, as the exporter reads it (`exporter.Lifecycle`)."""
    ended_after_s: float = 3600.0
    """RLVITALS_ENDED_AFTER_S, as the exporter reads it."""
    allow_edit: bool | None = None
    """Whether runs may be deleted, renamed, noted and tagged over HTTP (`api_manage`):
    RLVITALS_DATASOURCE_EDIT (1/0); unset (None) is off, except that `rlvitals serve` bound to
    a loopback address turns it on: only this machine's user reaches that, while a datasource
    bound for a team (compose, a reverse proxy) would let anyone who reaches it, with no token
    set, delete what everyone logged."""
    """Where browsers reach this server (`RLVITALS_PUBLIC_URL`, the address the bundle's links
    start with): its host is answered too, as a reverse proxy in front forwards it."""
    following: tuple[str, ...] = ()
    """The LOGDIRs `rlvitals serve LOGDIR...` imports and follows into `store`, as given on its
    command line (the run list names them); empty when it serves an existing store."""
    alert_webhook_secret: str | None = None
    """RLVITALS_ALERT_WEBHOOK_SECRET: the key Grafana signs its alert notifications with (its
    webhook contact point's HMAC signature); without it `POST /api/alert-notifications` takes
    nothing (`api_alert_notifications`)."""

    def __post_init__(self) -> None:
        try:
            self.lifecycle  # noqa: B018  (its windows are checked where it is built)
        except ValueError as exc:
            raise ConfigError(f"RLVITALS_STALL_AFTER_S / RLVITALS_ENDED_AFTER_S: {exc}") from None
        if self.public_url is not None:
            host = urllib.parse.urlsplit(self.public_url).hostname
            if not self.public_url.startswith(("http://", "https://")) or not host:
                raise ConfigError(
                    f"RLVITALS_PUBLIC_URL={self.public_url!r} must be the address browsers "
                    "reach rlvitals at, e.g. http://localhost:8686 or https://rl.example.org"
                )
        for setting, secret in (
            (TOKEN_SETTING, self.token),
            (WEBHOOK_SECRET_SETTING, self.alert_webhook_secret),
        ):
            problem = None if secret is None else weakness(secret, setting)
            if problem is not None:
                raise ConfigError(problem)
        if isinstance(self.allowed_hosts, str):  # would be read letter by letter
            raise ConfigError("allowed_hosts takes a tuple of host names, not one string")
        if isinstance(self.following, str):
            raise ConfigError("following takes a tuple of folders, not one string")
        # frozen: the canonical names replace the given ones once, here
        object.__setattr__(self, "allowed_hosts", tuple(_allowed(n) for n in self.allowed_hosts))
        if self.influx_api not in ("v1", "v2"):
            raise ConfigError(f"RLVITALS_INFLUX_API={self.influx_api!r} must be v1 or v2")
        problem = None if self.influx_url is None else influx_url_problem(self.influx_url)
        if problem is not None:
            raise ConfigError(problem)
        if self.influx_url and self.influx_api == "v2" and not self.influx_token:
            raise ConfigError("InfluxDB v2 needs RLVITALS_INFLUX_TOKEN to be set")
        if self.max_body_bytes < 1024:
            raise ConfigError("RLVITALS_DATASOURCE_MAX_BODY must be at least 1024 bytes")
        if not 2 <= self.max_points <= MAX_POINTS_LIMIT:
            raise ConfigError(
                f"RLVITALS_DATASOURCE_MAX_POINTS must be between 2 and {MAX_POINTS_LIMIT}"
            )
        if not 2 <= self.default_points <= self.max_points:
            raise ConfigError(
                "RLVITALS_DATASOURCE_POINTS must be between 2 and RLVITALS_DATASOURCE_MAX_POINTS"
            )
        if self.card_window < 8:
            raise ConfigError("RLVITALS_DATASOURCE_CARD_WINDOW must be at least 8 points")
        if self.influx_timeout <= 0:
            raise ConfigError("RLVITALS_INFLUX_TIMEOUT must be positive")
        if self.max_events < 1:
            raise ConfigError("RLVITALS_DATASOURCE_MAX_EVENTS must be at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> DatasourceConfig:
        """Every `RLVITALS_*` setting the datasource reads; missing ones take their defaults."""
        d = cls()
        api = (_str(environ, "RLVITALS_INFLUX_API") or d.influx_api).lower()
        return cls(
            store=Path(_str(environ, "RLVITALS_STORE") or d.store),
            influx_url=_str(environ, "RLVITALS_INFLUX_URL"),
            influx_api=api,  # type: ignore[arg-type]  # checked in __post_init__
            influx_database=_str(environ, "RLVITALS_INFLUX_DATABASE")
            or _str(environ, "RLVITALS_INFLUX_BUCKET")
            or d.influx_database,
            influx_username=_str(environ, "RLVITALS_INFLUX_USERNAME"),
            influx_password=_str(environ, "RLVITALS_INFLUX_PASSWORD"),
            influx_org=_str(environ, "RLVITALS_INFLUX_ORG"),
            influx_bucket=_str(environ, "RLVITALS_INFLUX_BUCKET"),
            influx_token=_token(environ),
            influx_timeout=_float(environ, "RLVITALS_INFLUX_TIMEOUT", d.influx_timeout),
            token=_str(environ, TOKEN_SETTING),
            alert_webhook_secret=_str(environ, WEBHOOK_SECRET_SETTING),
            max_body_bytes=_int(environ, "RLVITALS_DATASOURCE_MAX_BODY", d.max_body_bytes),
            default_points=_int(environ, "RLVITALS_DATASOURCE_POINTS", d.default_points),
            max_points=_int(environ, "RLVITALS_DATASOURCE_MAX_POINTS", d.max_points),
            card_window=_int(environ, "RLVITALS_DATASOURCE_CARD_WINDOW", d.card_window),
            max_events=_int(environ, "RLVITALS_DATASOURCE_MAX_EVENTS", d.max_events),
            allowed_hosts=_names(environ, HOSTS_SETTING),
            public_url=_str(environ, "RLVITALS_PUBLIC_URL"),
            stall_after_s=_float(environ, "RLVITALS_STALL_AFTER_S", d.stall_after_s),
            ended_after_s=_float(environ, "RLVITALS_ENDED_AFTER_S", d.ended_after_s),
            allow_edit=_flag(environ, "RLVITALS_DATASOURCE_EDIT"),
        )

    @property
    def lifecycle(self) -> Lifecycle:
        return Lifecycle(self.stall_after_s, self.ended_after_s)

    def replace(self, **changes: object) -> DatasourceConfig:
        """A copy with some settings changed (flags override the environment this way)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def allows_host(self, header: str | None) -> bool:
        """Whether a request whose `Host` header is `header` is addressed to this server: its
        name (without the port) is loopback or one of `allowed_hosts`. A missing or malformed
        header is refused, as HTTP/1.1 requires (RFC 9112, section 3.2)."""
        if ANY_HOST in self.allowed_hosts:
            return True
        name = None if header is None else _host_of_header(header)
        public = (
            None
            if self.public_url is None
            else _host_of_header(urllib.parse.urlsplit(self.public_url).netloc)
        )
        return name is not None and (
            name in LOOPBACK_HOSTS or name in self.allowed_hosts or name == public
        )

    def accepts_token(self, authorization: str | None) -> bool:
        """Whether an `Authorization` header value carries the bearer token; True when no token
        is configured. Constant-time, so the comparison does not leak how much of it matched."""
        if self.token is None:
            return True
        sent = (authorization or "").encode("utf-8", "replace")
        return hmac.compare_digest(sent, f"Bearer {self.token}".encode())

    def session_value(self) -> str | None:
        """What the sign-in cookie holds: an HMAC of the token (None without a token). Derived,
        not the token itself, so the cookie is no bearer token for Grafana's datasource."""
        if self.token is None:
            return None
        return hmac.new(self.token.encode(), b"rlvitals dashboard session 1", "sha256").hexdigest()

    def accepts_session(self, cookie: str | None) -> bool:
        """Whether a sign-in cookie is this token's (constant-time); False without a token."""
        value = self.session_value()
        return value is not None and hmac.compare_digest((cookie or "").encode(), value.encode())

    @property
    def uses_influx(self) -> bool:
        return self.influx_url is not None

    @property
    def outbox_path(self) -> Path:
        return self.store / "outbox.sqlite"

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            shown = "'***'" if f.name in _SECRETS and value is not None else repr(value)
            parts.append(f"{f.name}={shown}")
        return f"DatasourceConfig({', '.join(parts)})"

    __str__ = __repr__


def _token(environ: Mapping[str, str]) -> str | None:
    try:
        return influx_token_from(environ)
    except _ExporterConfigError as exc:
        raise ConfigError(str(exc)) from None


def _names(environ: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = environ.get(key, "").strip()
    return tuple(part.strip() for part in raw.split(",")) if raw else ()


def _canonical(name: str) -> str | None:
    """A host name or address in the form `Host` headers are compared in, or None."""
    name = name.strip().lower()
    bracketed = name.startswith("[") and name.endswith("]")
    if bracketed or ":" in name:
        try:
            return str(ipaddress.IPv6Address(name[1:-1] if bracketed else name))
        except ValueError:
            return None
    name = name.removesuffix(".")
    return name if _NAME.fullmatch(name) else None


def _allowed(raw: str) -> str:
    """One `allowed_hosts` entry, canonical; ConfigError saying how to write it otherwise."""
    name = raw.strip()
    if name == ANY_HOST:
        return name
    if not name:
        raise ConfigError(
            f"{_HOSTS_WHERE} has an empty host name (two commas in a row, or one at the end?); "
            "list names separated by commas, e.g. datasource,grafana.example.org"
        )
    canonical = _canonical(name)
    if canonical is not None:
        return canonical
    if "/" in name or "://" in name:
        bare = urllib.parse.urlsplit(name if "://" in name else f"//{name}").hostname
        hint = f", e.g. {bare!r}" if bare else ""
        raise ConfigError(
            f"{_HOSTS_WHERE}: {name!r} is a URL, not a host name; give only the name clients "
            f"put in the Host header, without scheme, port or path{hint}"
        )
    host, _, port = name.rpartition(":")
    if port.isascii() and port.isdigit() and _canonical(host) is not None:
        raise ConfigError(
            f"{_HOSTS_WHERE}: {name!r} has a port; the port is not compared (any port of an "
            f"allowed name is answered), so give the name alone: {host!r}"
        )
    raise ConfigError(
        f"{_HOSTS_WHERE}: {name!r} is not a host name; use letters, digits, '-', '_' and '.', "
        f"an IPv4 or IPv6 address, or {ANY_HOST!r} alone to answer any Host (only behind a "
        "reverse proxy that checks Host itself)"
    )


def _host_of_header(header: str) -> str | None:
    """The canonical name in a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`), or
    None when the header is not of that shape."""
    value = header.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    else:
        host, _, port = value.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        return None
    return _canonical(host) if host else None
