"""One row of the run list: a run's project, framework, lifecycle status, last step and start.

The status is `exporter.lifecycle.Lifecycle`'s, the one definition the exporter's `/metrics` and
the alert rules also use, fed with what the store recorded: the outbox's run record (the recorded
end, when rows last arrived, the writer's lease) or, from InfluxDB, the wall time of the run's
newest point.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import registry
from exporter.lifecycle import Lifecycle, Recorded
from exporter.translate.derive import NONFINITE_FIELD

from .history import HistoryStore, metric_of_field

__all__ = ["name_counts", "run_summary"]


def run_summary(
    store: HistoryStore, lifecycle: Lifecycle, run: str, now: float | None = None
) -> dict[str, Any]:
    info = store.run_info(run)
    latest = store.latest(run)
    activity = info.last_activity if info.last_activity is not None else latest.wall_time
    # a store that records no life (InfluxDB) gives only its newest point's wall time: such a
    # run reads live while points come, then ended, never stalled (nobody is known to hold it)
    recorded = info.recorded if info.recorded is not None else Recorded()
    if recorded.arrived is None:  # a file from before arrivals were recorded
        recorded = replace(recorded, arrived=activity)
    status = lifecycle.status(recorded, time.time() if now is None else now)
    return {
        "run": run,
        "project": info.project,
        "framework": info.framework,
        "status": status.status.value,
        "status_reason": status.reason,
        "last_step": latest.step,
        "last_wall_time": latest.wall_time,
        "started": info.created,
        "finished": info.finished,
        "last_activity": activity,
    }


def name_counts(
    reg: registry.Registry, logged: Mapping[str, str], framework: str | None
) -> dict[str, Any]:
    """How many of the names a run logged the registry recognises (`registry.recognise`): its
    stored fields less those rlvitals computes (derived metrics, `nonfinite_count`); a mapped
    name (`--map`) is stored under its metric id, so it counts as recognised."""
    names = []
    for name in logged:
        metric = metric_of_field(reg, name)
        if name == NONFINITE_FIELD or (metric is not None and metric.kind == "derived"):
            continue
        names.append(name)
    rec = registry.recognise(reg, names, framework)
    return {
        "recognised": len(rec.recognised),
        "total": rec.total,
        "unrecognised": list(rec.unknown),
        "suggestions": [
            {
                "name": s.name,
                "metric": s.metric,
                "also": list(s.alternatives),
                "already_logged": s.already_logged,
            }
            for s in rec.suggestions
        ],
        "text": rec.counts(),
    }
