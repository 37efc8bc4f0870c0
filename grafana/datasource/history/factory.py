"""Pick the history store the configuration asks for."""

from __future__ import annotations

import registry

from ..config import DatasourceConfig
from .base import HistoryStore
from .embedded import EmbeddedHistory
from .influx_http import InfluxHttp
from .influxql import InfluxHistory

__all__ = ["open_history"]


def open_history(config: DatasourceConfig, reg: registry.Registry) -> HistoryStore:
    """InfluxDB when `RLVITALS_INFLUX_URL` is set, else the exporter's outbox under the store."""
    if config.influx_url is None:
        return EmbeddedHistory(config.outbox_path)
    http = InfluxHttp(
        url=config.influx_url,
        database=config.influx_database,
        api=config.influx_api,
        username=config.influx_username,
        password=config.influx_password,
        token=config.influx_token,
        timeout=config.influx_timeout,
    )
    return InfluxHistory(http, reg)
