"""Metric history stores the datasource reads: the embedded sqlite outbox or InfluxDB."""

from .base import (
    BUCKET_LEVELS,
    BucketPlan,
    Event,
    FieldStats,
    HistoryError,
    HistoryStore,
    HistoryUnavailable,
    Latest,
    Points,
    RankSpread,
    RunInfo,
    bucket_plan,
    bucket_size,
    empty_points,
    points_from,
)
from .embedded import EmbeddedHistory
from .factory import open_history
from .fields import FAMILY_MEMBER, metric_of_field
from .influx_http import InfluxHttp
from .influxql import InfluxHistory, UnknownField, UnknownRun, measurement_of
from .memory import MemoryHistory, downsample
from .quoting import UnsafeName, quote_ident, quote_string

__all__ = [
    "BUCKET_LEVELS",
    "FAMILY_MEMBER",
    "BucketPlan",
    "EmbeddedHistory",
    "Event",
    "FieldStats",
    "HistoryError",
    "HistoryStore",
    "HistoryUnavailable",
    "InfluxHistory",
    "InfluxHttp",
    "Latest",
    "MemoryHistory",
    "Points",
    "RankSpread",
    "RunInfo",
    "UnknownField",
    "UnknownRun",
    "UnsafeName",
    "bucket_plan",
    "bucket_size",
    "downsample",
    "empty_points",
    "measurement_of",
    "metric_of_field",
    "open_history",
    "points_from",
    "quote_ident",
    "quote_string",
]
