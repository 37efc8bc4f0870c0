"""One row of the run list: a run's project, framework, lifecycle status, last step and start.

The status is `exporter.store.lifecycle.Lifecycle`'s, the one definition the exporter's `/metrics` and
the stalled-training alert also use, fed with what the store knows: the outbox's run record
(`finished`, `last_activity`) or, from InfluxDB, the wall time of the run's newest point.
"""

from __future__ import annotations

import time
from typing import Any

from exporter.store.lifecycle import Lifecycle

from .history import HistoryStore

__all__ = ["run_summary"]


def run_summary(
    store: HistoryStore, lifecycle: Lifecycle, run: str, now: float | None = None
) -> dict[str, Any]:
    info = store.run_info(run)
    latest = store.latest(run)
    activity = info.last_activity if info.last_activity is not None else latest.wall_time
    status = lifecycle.status(
        finished_at=info.finished,
        last_activity=activity,
        now=time.time() if now is None else now,
    )
    return {
        "run": run,
        "project": info.project,
        "framework": info.framework,
        "status": status.value,
        "last_step": latest.step,
        "last_wall_time": latest.wall_time,
        "started": info.created,
        "finished": info.finished,
        "last_activity": activity,
    }
