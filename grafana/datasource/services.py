"""What every handler needs (config, registry, history store, the log follower's state), attached
to the Flask app."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from flask import Flask, current_app

import registry
from exporter.ingest.background import FollowState
from exporter.lifecycle import Lifecycle

from .config import DatasourceConfig
from .history import HistoryStore
from .login_guard import LoginGuard
from .stage_memo import StageMemo

__all__ = ["Services", "attach", "services"]

_KEY = "rlvitals"


@dataclass(frozen=True)
class Services:
    config: DatasourceConfig
    registry: registry.Registry
    store: HistoryStore
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    follow_state: Callable[[], FollowState] | None = None
    """What `serve LOGDIR`'s log follower is doing now (None when nothing is followed)."""
    logins: LoginGuard = field(default_factory=LoginGuard)
    """Wrong tokens counted and slowed, per client and in all (`login_guard`)."""
    connection_stats: Callable[[], Mapping[str, int]] | None = None
    """What the server's connection guard has closed and holds open (`grafana.serving`; None
    under a server without it, a test client)."""
    stages: StageMemo = field(default_factory=StageMemo)
    """The stages of the runs asked about lately (`stage_memo`)."""


def attach(app: Flask, svc: Services) -> None:
    app.extensions[_KEY] = svc


def services() -> Services:
    """The services of the app handling the current request."""
    svc: Services = current_app.extensions[_KEY]
    return svc
