"""What every handler needs (config, registry, history store), attached to the Flask app."""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Flask, current_app

import registry
from exporter.lifecycle import Lifecycle

from .config import DatasourceConfig
from .history import HistoryStore

__all__ = ["Services", "attach", "services"]

_KEY = "rlvitals"


@dataclass(frozen=True)
class Services:
    config: DatasourceConfig
    registry: registry.Registry
    store: HistoryStore
    lifecycle: Lifecycle = field(default_factory=Lifecycle)


def attach(app: Flask, svc: Services) -> None:
    app.extensions[_KEY] = svc


def services() -> Services:
    """The services of the app handling the current request."""
    svc: Services = current_app.extensions[_KEY]
    return svc
