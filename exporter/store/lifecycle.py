"""A run's lifecycle in wall time: `live`, `stalled` or `finished`.

One definition, read by everything that shows or alerts on it: the datasource's run list, the
exporter's `/metrics` and the generated "training stalled" alert rule.

- `finished`: the run said so (`Run.finish()`, or the sidecar saw its logs end), or nothing new
  arrived for `ended_after_s`. A job that exits without calling `finish()` (a crash, a killed
  notebook) must not be reported as stalled forever: after that long we call it ended.
- `stalled`: not finished and nothing new for `stall_after_s`. The job may be hung (deadlock, NCCL
  wait, data loader) or paused; this is what the alert exists for.
- `live`: anything newer.

Activity is the wall time of the latest step the run logged (the training's own clock for the
Python API and followed logs), so an old log imported today reads as finished, not live.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Lifecycle", "RunStatus"]


class RunStatus(StrEnum):
    LIVE = "live"
    STALLED = "stalled"
    FINISHED = "finished"


@dataclass(frozen=True)
class Lifecycle:
    """How long a run may go quiet before it is stalled, and then before it counts as ended.

    10 minutes: longer than a checkpoint save or an evaluation pass of a typical job (which log
    nothing while they run), short enough that a hung job is noticed within a coffee break.
    1 hour: a job quiet that long is not coming back on its own; alerting on it for ever after
    would bury the alerts that matter.
    """

    stall_after_s: float = 600.0
    ended_after_s: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.stall_after_s < self.ended_after_s:
            raise ValueError(
                f"lifecycle windows must satisfy 0 < stall_after_s ({self.stall_after_s}) < "
                f"ended_after_s ({self.ended_after_s})"
            )

    def status(
        self, *, finished_at: float | None, last_activity: float | None, now: float
    ) -> RunStatus:
        if finished_at is not None and (last_activity is None or last_activity <= finished_at):
            return RunStatus.FINISHED
        if last_activity is None:
            # Recorded but nothing logged yet: a job still starting up.
            return RunStatus.LIVE
        idle = now - last_activity
        if idle >= self.ended_after_s:
            return RunStatus.FINISHED
        if idle >= self.stall_after_s:
            return RunStatus.STALLED
        return RunStatus.LIVE
