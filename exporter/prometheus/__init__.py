"""Prometheus: the exporter's live state, served on `/metrics` for alerting in wall time.

- `metrics_endpoint`: `MetricsEndpoint`, per-run gauges on its own `CollectorRegistry` (latest
  value per metric, step, steps/s, last activity, the exporter's own health and counts).
- `live_states`: the registry's alert and rule states, counted in step space by
  `registry.diagnosis` from the outbox on each scrape, as 0/1 gauges the generated Grafana rules
  compare.

May import: `registry`, `exporter.counts`, `.errors`, `exporter.store` (`live_states` reads the
outbox). Never translation or InfluxDB.
"""

from .live_states import ALERT_GAUGE, attach
from .metrics_endpoint import LiveSource, MetricsEndpoint, RuleState, RuleStates

__all__ = ["ALERT_GAUGE", "LiveSource", "MetricsEndpoint", "RuleState", "RuleStates", "attach"]
