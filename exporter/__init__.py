"""rlvitals exporter: log RL training metrics by step into a durable outbox and on to InfluxDB.

run = exporter.init("ppo-cartpole-1", project="cartpole", config={"clip_range": 0.2})
run.log(step, {"train/approx_kl": 0.01, "train/entropy_loss": -0.6})
run.event(step, "checkpoint", "saved ckpt-1000")
run.finish()
"""

from .config import POLICIES, ExporterSettings, Policy
from .errors import ConfigError, ExporterError, InvalidSample, OutboxError, WriteError
from .forwarder import Forwarder, render_lines
from .lifecycle import Lifecycle, RunStatus
from .lineprotocol import format_line
from .metrics_endpoint import LiveSource, MetricsEndpoint, RuleState, RuleStates
from .outbox import EventRecord, Outbox, RunRecord
from .run import Run, init
from .stats import LiveState, RunStats
from .writers import InfluxV1Writer, InfluxV2Writer, Writer, make_writer

__all__ = [
    "POLICIES",
    "ConfigError",
    "EventRecord",
    "ExporterError",
    "ExporterSettings",
    "Forwarder",
    "InfluxV1Writer",
    "InfluxV2Writer",
    "InvalidSample",
    "Lifecycle",
    "LiveSource",
    "LiveState",
    "MetricsEndpoint",
    "Outbox",
    "OutboxError",
    "Policy",
    "RuleState",
    "RuleStates",
    "Run",
    "RunRecord",
    "RunStats",
    "RunStatus",
    "WriteError",
    "Writer",
    "format_line",
    "init",
    "make_writer",
    "render_lines",
]
