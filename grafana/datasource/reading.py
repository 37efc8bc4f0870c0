"""What this server reads: the store (an absolute path, or the InfluxDB URL) and the LOGDIRs
`rlvitals serve` follows into it, with the follower's state; the run list and `/api/health`
show it."""

from __future__ import annotations

import os

from .services import Services

__all__ = ["reading"]


def reading(svc: Services) -> dict[str, object]:
    """`store` and `kind`; with LOGDIRs, `following` (each folder as given and its log count,
    None before the first look) and `follower` (state, restarts, last error and its time)."""
    config = svc.config
    out: dict[str, object] = {
        "kind": "influxdb" if config.uses_influx else "embedded",
        "store": config.influx_url if config.uses_influx else os.path.abspath(config.store),
    }
    if svc.follow_state is not None:
        state = svc.follow_state().as_json()
        out["following"] = state.pop("folders")
        out["follower"] = state
    elif config.following:
        out["following"] = [{"path": p, "logs": None} for p in config.following]
    return out
