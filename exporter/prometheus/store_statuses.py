"""The statuses of the runs in a store, for a sidecar's `/metrics`: what `rlvitals tail --follow`
pages on besides the logs it follows (a training process logging through `exporter.init` into the
same store records its crash there, and its writer lease tells a hang or a `kill -9`).

Only statuses that can page are served: `live` and `stalled` runs, and `crashed` or
`incomplete` ones for `Lifecycle.ended_after_s` after it happened (the crash alert is raised
once, then resolves); finished and ended history is left out, so a store of many old runs costs
nothing per scrape.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..lifecycle import Lifecycle, RunStatus, Status
from ..store.outbox import Outbox

__all__ = ["store_statuses"]

_RECENT = (RunStatus.CRASHED, RunStatus.INCOMPLETE)


def store_statuses(
    outbox_path: Path | str, lifecycle: Lifecycle, now: float | None = None
) -> list[tuple[str, Status]]:
    path = Path(outbox_path)
    if not path.exists():
        return []
    at = time.time() if now is None else now
    out = []
    with Outbox(path) as outbox:
        for record in outbox.runs():
            status = lifecycle.status(record.recorded, at)
            if status.status in (RunStatus.LIVE, RunStatus.STALLED) or (
                status.status in _RECENT
                and (status.since is None or at - status.since < lifecycle.ended_after_s)
            ):
                out.append((record.run, status))
    return out
