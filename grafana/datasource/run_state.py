"""A run's vital numbers as of now, or as of its end once it ended: the Overview's health stats.

`GET /api/run_state?run=R[&lang=en|zh]` answers one row: the run, its lifecycle status (the one
definition, `exporter.lifecycle`) and that status in words, its last step, its rate over its
last logged stretch (steps per second of the trainer's own clock, between the last logged step
and one about a tenth of the run earlier), the non-finite values it logged in all, and how many
of its diagnosis cards read warning or critical at its last step. Read from the store (embedded
or InfluxDB), so a finished, imported or demo run reads what it ended with, where Prometheus, which
holds only what live processes serve, has nothing ("No data").
"""

from __future__ import annotations

import math
import time
from typing import Any

from exporter.translate.derive import NONFINITE_FIELD

from .cards import run_cards
from .run_summary import run_summary
from .services import Services

__all__ = ["LIFECYCLE_WORDS", "run_state"]

LIFECYCLE_WORDS: dict[str, dict[str, str]] = {
    "en": {
        "live": "live",
        "stalled": "stalled",
        "quiet": "quiet",
        "finished": "finished",
        "crashed": "crashed",
        "incomplete": "incomplete",
        "ended": "ended",
        "unknown": "unknown",
    },
    "zh": {
        "live": "运行中",
        "stalled": "停滞",
        "quiet": "静默",
        "finished": "已完成",
        "crashed": "崩溃",
        "incomplete": "未完成",
        "ended": "已结束",
        "unknown": "未知",
    },
}
_RATE_SAMPLES = 11
"""(step, wall time) pairs read over the run: its rate is taken over the last tenth."""


def _rate(svc: Services, run: str) -> float | None:
    clock = svc.store.clock(run, NONFINITE_FIELD, _RATE_SAMPLES)
    steps, walls = clock.steps, clock.values
    ok = [i for i in range(len(steps)) if math.isfinite(float(walls[i]))]
    if len(ok) < 2:
        return None
    a, b = ok[-2], ok[-1]
    seconds = float(walls[b] - walls[a])
    if seconds <= 0:
        return None
    return float(steps[b] - steps[a]) / seconds


def run_state(svc: Services, run: str, lang: str, now: float | None = None) -> dict[str, Any]:
    summary = run_summary(svc.store, svc.lifecycle, run, time.time() if now is None else now)
    status = str(summary["status"])
    stats = svc.store.stats(run, [NONFINITE_FIELD]).get(NONFINITE_FIELD)
    nonfinite = None
    if stats is not None and stats.mean is not None:
        nonfinite = round(stats.mean * stats.count)
    cards = run_cards(svc.registry, svc.store, run, None, lang, svc.config.card_window)
    alerts = sum(1 for c in cards if c.status in ("warning", "critical"))
    words = LIFECYCLE_WORDS.get(lang, LIFECYCLE_WORDS["en"])
    return {
        "run": run,
        "status": status,
        "status_label": words.get(status, status),
        "as_of": "now" if status in ("live", "stalled", "quiet") else "end",
        "step": summary["last_step"],
        "steps_per_second": _rate(svc, run),
        "nonfinite": nonfinite,
        "alerts": alerts,
    }
