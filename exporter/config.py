"""Exporter settings: one frozen dataclass, built from `RLVITALS_*` variables (or flags) in main."""

from __future__ import annotations

import dataclasses
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from .errors import ConfigError
from .lifecycle import Lifecycle

__all__ = [
    "POLICIES",
    "ExporterSettings",
    "Policy",
    "influx_token_from",
    "influx_url_problem",
    "redact_url",
]

Policy = Literal["strict", "warn", "drop"]
POLICIES: tuple[Policy, ...] = ("strict", "warn", "drop")
_APIS = ("v1", "v2")
_FORWARDERS = ("process", "thread")
_SECRET = "***"


_CREDENTIAL_PARAMS = frozenset({"u", "p", "password", "token", "access_token", "api_key"})


def redact_url(url: str) -> str:
    """The URL with any user:password and credential query parameters replaced by ***."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{_SECRET}@{netloc.rsplit('@', 1)[1]}"
        query = urllib.parse.urlencode(
            [
                (k, _SECRET if k.lower() in _CREDENTIAL_PARAMS else v)
                for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
            ],
            safe="*",
        )
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparsable URL>"


def influx_url_problem(url: str) -> str | None:
    """Why an RLVITALS_INFLUX_URL cannot be used, or None; the message never shows a secret."""
    if not url.startswith(("http://", "https://")):
        return f"RLVITALS_INFLUX_URL={redact_url(url)!r} must start with http:// or https://"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError as exc:
        return f"RLVITALS_INFLUX_URL={redact_url(url)!r} is not a URL ({exc})"
    params = {k.lower() for k, _ in urllib.parse.parse_qsl(parts.query)}
    if "@" in parts.netloc or params & _CREDENTIAL_PARAMS:
        return (
            f"RLVITALS_INFLUX_URL={redact_url(url)!r} holds credentials, which would be printed "
            "wherever the URL is shown; remove them from the URL and set "
            "RLVITALS_INFLUX_USERNAME / RLVITALS_INFLUX_PASSWORD (InfluxDB 1.x) or "
            "RLVITALS_INFLUX_TOKEN (2.x/3.x)"
        )
    return None


def influx_token_from(environ: Mapping[str, str]) -> str | None:
    """RLVITALS_INFLUX_TOKEN, else the content of the file RLVITALS_INFLUX_TOKEN_FILE names (a
    token handed over in a file, as compose does, never shows in the environment)."""
    token = environ.get("RLVITALS_INFLUX_TOKEN", "").strip()
    if token:
        return token
    path = environ.get("RLVITALS_INFLUX_TOKEN_FILE", "").strip()
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError as exc:
        raise ConfigError(
            f"RLVITALS_INFLUX_TOKEN_FILE={path!r} cannot be read ({exc.strerror}); point it at "
            "the file holding the InfluxDB token"
        ) from None
    if not text:
        raise ConfigError(f"RLVITALS_INFLUX_TOKEN_FILE={path!r} is empty")
    return text


def _int(environ: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer; set it to a whole number") from None


def _float(environ: Mapping[str, str], key: str, default: float) -> float:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a number; set it to e.g. 10 or 2.5") from None


def _str(environ: Mapping[str, str], key: str) -> str | None:
    raw = environ.get(key, "").strip()
    return raw or None


@dataclass(frozen=True)
class ExporterSettings:
    """Where samples go and how the exporter treats bad input.

    With `influx_url` unset the outbox under `store` is the only store (the embedded store the
    datasource and report read). `influx_password` and `influx_token` never appear in `repr`.
    """

    store: Path = Path("./rlvitals-data")
    influx_url: str | None = None
    influx_api: Literal["v1", "v2"] = "v1"
    influx_database: str = "rlvitals"
    influx_username: str | None = None
    influx_password: str | None = None
    influx_org: str | None = None
    influx_bucket: str | None = None
    influx_token: str | None = None
    influx_retention_policy: str | None = None
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"
    policy: Policy = "warn"
    disk_budget_mb: float = 1024.0
    batch_size: int = 20_000
    """Rows the forwarder sends a request at most (RLVITALS_BATCH_SIZE): a request's fixed cost
    (a read, a render, an HTTP round trip, InfluxDB's own per-request work) shared by 1,000-2,000
    points, within InfluxDB's suggested 5,000 lines; 5,000 rows sent a backlog 5-10 % slower
    (docs/benchmarks.md, "The forwarder's rate"). A live run's batches are what arrived since the
    last, far fewer."""
    flush_timeout: float = 10.0
    queue_size: int = 100_000
    outage_wait: float = 30.0
    """Seconds `rlvitals import` (direct to InfluxDB) retries an unreachable InfluxDB before it
    stops with exit 1 (RLVITALS_OUTAGE_WAIT)."""
    commit_interval: float = 0.1
    """Seconds a logged step waits at most in memory before the worker writes it to the outbox
    (RLVITALS_COMMIT_INTERVAL): what a `kill -9` of the training can lose. Shorter costs the
    training more: every write is a dozen GIL hand-offs between the worker and the loop."""
    forwarder: Literal["process", "thread"] = "process"
    """Where a run sends its outbox to InfluxDB (RLVITALS_FORWARDER): a child process, so the
    training process's GIL is not shared with it, or a thread (where no process can start)."""
    drain_timeout: float = 600.0
    """Seconds the forwarder goes on sending what is not yet sent after the training process
    exits (RLVITALS_DRAIN_TIMEOUT; 0: it stops with the training). What is left then waits in
    the store for the next run with InfluxDB configured."""
    stall_after_s: float = 600.0
    """Seconds a living writer may store nothing before its run is stalled
    (RLVITALS_STALL_AFTER_S; see `exporter.Lifecycle`)."""
    ended_after_s: float = 3600.0
    """Seconds a followed log may stay quiet before the sidecar records its run ended, and a
    crash alert stays raised (RLVITALS_ENDED_AFTER_S)."""
    prometheus_linger_s: float = 90.0
    """Seconds at most a training process serving its own /metrics waits, once its run ended,
    for Prometheus to scrape that end (RLVITALS_PROMETHEUS_LINGER_S; 0: never waits). It waits
    only when it was scraped before, for one scrape interval and a half as it measured it: a
    process that exits unscraped reads, to the alert rules, as one that was killed."""

    def __post_init__(self) -> None:
        if isinstance(self.store, str | os.PathLike) and not isinstance(self.store, Path):
            # a str or os.PathLike is what a user means by a folder: take it as one
            object.__setattr__(self, "store", Path(self.store))
        if not isinstance(self.store, Path):
            raise ConfigError(
                f"store={self.store!r} ({type(self.store).__name__}) is not a folder path; pass "
                "a str or pathlib.Path (RLVITALS_STORE)"
            )
        if self.policy not in POLICIES:
            raise ConfigError(
                f"RLVITALS_POLICY={self.policy!r} is not a policy; use one of {', '.join(POLICIES)}"
            )
        if self.influx_api not in _APIS:
            raise ConfigError(f"RLVITALS_INFLUX_API={self.influx_api!r} must be v1 or v2")
        problem = None if self.influx_url is None else influx_url_problem(self.influx_url)
        if problem is not None:
            raise ConfigError(problem)
        if self.influx_url and self.influx_api == "v2":
            missing = [
                name
                for name, value in (
                    ("RLVITALS_INFLUX_ORG", self.influx_org),
                    ("RLVITALS_INFLUX_BUCKET", self.influx_bucket),
                    ("RLVITALS_INFLUX_TOKEN", self.influx_token),
                )
                if not value
            ]
            if missing:
                raise ConfigError(f"InfluxDB v2 needs {', '.join(missing)} to be set")
        if self.prometheus_port is not None and not 0 <= self.prometheus_port <= 65535:
            raise ConfigError(f"RLVITALS_PROMETHEUS_PORT={self.prometheus_port} is not a port")
        if self.disk_budget_mb <= 0:
            raise ConfigError("RLVITALS_DISK_BUDGET_MB must be positive")
        if self.batch_size < 1:
            raise ConfigError("RLVITALS_BATCH_SIZE must be at least 1")
        if self.queue_size < 1:
            raise ConfigError("RLVITALS_QUEUE_SIZE must be at least 1")
        if not 0 < self.commit_interval <= 60:
            raise ConfigError(
                f"RLVITALS_COMMIT_INTERVAL={self.commit_interval} must be in (0, 60] seconds"
            )
        if self.forwarder not in _FORWARDERS:
            raise ConfigError(
                f"RLVITALS_FORWARDER={self.forwarder!r} must be one of {', '.join(_FORWARDERS)}"
            )
        if self.outage_wait < 0:
            raise ConfigError("RLVITALS_OUTAGE_WAIT must not be negative")
        try:
            Lifecycle(self.stall_after_s, self.ended_after_s)
        except ValueError as exc:
            raise ConfigError(f"RLVITALS_STALL_AFTER_S / RLVITALS_ENDED_AFTER_S: {exc}") from None
        if self.flush_timeout < 0:
            raise ConfigError("RLVITALS_FLUSH_TIMEOUT must not be negative")
        if not 0 <= self.prometheus_linger_s <= 3600:
            raise ConfigError(
                f"RLVITALS_PROMETHEUS_LINGER_S={self.prometheus_linger_s} must be in [0, 3600] "
                "seconds"
            )
        if self.drain_timeout < 0:
            raise ConfigError("RLVITALS_DRAIN_TIMEOUT must not be negative (0: no draining)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ExporterSettings:
        """Read every `RLVITALS_*` setting; missing ones take their defaults."""
        env = os.environ if environ is None else environ
        default = cls()
        return cls(
            store=Path(_str(env, "RLVITALS_STORE") or default.store),
            influx_url=_str(env, "RLVITALS_INFLUX_URL"),
            influx_api=cast(
                Literal["v1", "v2"], (_str(env, "RLVITALS_INFLUX_API") or "v1").lower()
            ),
            influx_database=_str(env, "RLVITALS_INFLUX_DATABASE") or default.influx_database,
            influx_username=_str(env, "RLVITALS_INFLUX_USERNAME"),
            influx_password=_str(env, "RLVITALS_INFLUX_PASSWORD"),
            influx_org=_str(env, "RLVITALS_INFLUX_ORG"),
            influx_bucket=_str(env, "RLVITALS_INFLUX_BUCKET"),
            influx_token=influx_token_from(env),
            influx_retention_policy=_str(env, "RLVITALS_INFLUX_RETENTION_POLICY"),
            prometheus_port=_int(env, "RLVITALS_PROMETHEUS_PORT", None),
            prometheus_host=_str(env, "RLVITALS_PROMETHEUS_HOST") or default.prometheus_host,
            policy=cast(Policy, (_str(env, "RLVITALS_POLICY") or default.policy).lower()),
            disk_budget_mb=_float(env, "RLVITALS_DISK_BUDGET_MB", default.disk_budget_mb),
            batch_size=_int(env, "RLVITALS_BATCH_SIZE", default.batch_size) or default.batch_size,
            flush_timeout=_float(env, "RLVITALS_FLUSH_TIMEOUT", default.flush_timeout),
            drain_timeout=_float(env, "RLVITALS_DRAIN_TIMEOUT", default.drain_timeout),
            queue_size=_int(env, "RLVITALS_QUEUE_SIZE", default.queue_size) or default.queue_size,
            outage_wait=_float(env, "RLVITALS_OUTAGE_WAIT", default.outage_wait),
            commit_interval=_float(env, "RLVITALS_COMMIT_INTERVAL", default.commit_interval),
            forwarder=cast(
                Literal["process", "thread"],
                (_str(env, "RLVITALS_FORWARDER") or default.forwarder).lower(),
            ),
            stall_after_s=_float(env, "RLVITALS_STALL_AFTER_S", default.stall_after_s),
            ended_after_s=_float(env, "RLVITALS_ENDED_AFTER_S", default.ended_after_s),
            prometheus_linger_s=_float(
                env, "RLVITALS_PROMETHEUS_LINGER_S", default.prometheus_linger_s
            ),
        )

    def replace(self, **changes: object) -> ExporterSettings:
        """A copy with some settings changed (flags override the environment this way)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def lifecycle(self) -> Lifecycle:
        """The run lifecycle's windows these settings give."""
        return Lifecycle(self.stall_after_s, self.ended_after_s)

    @property
    def outbox_path(self) -> Path:
        return self.store / "outbox.sqlite"

    @property
    def disk_budget_bytes(self) -> int:
        return int(self.disk_budget_mb * 1024 * 1024)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("influx_password", "influx_token") and value is not None:
                parts.append(f"{f.name}={_SECRET!r}")
            else:
                parts.append(f"{f.name}={value!r}")
        return f"ExporterSettings({', '.join(parts)})"

    __str__ = __repr__
