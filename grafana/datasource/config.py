"""Datasource settings: one frozen dataclass built from `RLVITALS_*` variables (or flags) in main."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exporter.config import influx_token_from, influx_url_problem
from exporter.errors import ConfigError as _ExporterConfigError

__all__ = ["ConfigError", "DatasourceConfig", "InfluxApi"]

InfluxApi = Literal["v1", "v2"]
_SECRETS = ("influx_password", "influx_token", "token")
MAX_POINTS_LIMIT = 100_000


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
    on `/api/health`). Secrets never appear in `repr`.
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

    def __post_init__(self) -> None:
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
            token=_str(environ, "RLVITALS_DATASOURCE_TOKEN"),
            max_body_bytes=_int(environ, "RLVITALS_DATASOURCE_MAX_BODY", d.max_body_bytes),
            default_points=_int(environ, "RLVITALS_DATASOURCE_POINTS", d.default_points),
            max_points=_int(environ, "RLVITALS_DATASOURCE_MAX_POINTS", d.max_points),
            card_window=_int(environ, "RLVITALS_DATASOURCE_CARD_WINDOW", d.card_window),
            max_events=_int(environ, "RLVITALS_DATASOURCE_MAX_EVENTS", d.max_events),
        )

    def replace(self, **changes: object) -> DatasourceConfig:
        """A copy with some settings changed (flags override the environment this way)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

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
