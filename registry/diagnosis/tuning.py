"""The engine's judgement levels that a corpus could move, in one place.

Each default has a reason that holds beyond any corpus (written beside it); `GRID` lists the
values `rlvitals evaluate --leave-one-family-out` may choose among when it tunes on some
families and reports the held-out one. Every other number the engine uses is the registry's
(`metrics.yaml`, `rules.yaml`) or a definition (ln n, 2R²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["GRID", "Tuning"]


@dataclass(frozen=True)
class Tuning:
    # A critic loss past the 2R² bound is critical once it has also grown this many times over
    # its early level (two orders of magnitude: a scaled reward starts large, it does not grow
    # a hundredfold); a warning at this growth while within two orders of the bound.
    value_growth_critical: float = 100.0
    value_growth_warning: float = 1000.0
    value_bound_warning: float = 0.01
    # A Gaussian policy's std per action dimension: grown tenfold (entropy + ln 10 nats) is a
    # warning, a hundredfold critical; shrunk a thousandfold a collapse (healthy continuous
    # policies converge by about one order of magnitude).
    spread_warning_nats: float = math.log(10.0)
    spread_critical_nats: float = math.log(100.0)
    collapse_warning_nats: float = math.log(1000.0)
    # The return below its start by a tenth of the start's magnitude (besides the noise) is a
    # regression a person acts on; "never improved" once half the planned run has passed after
    # the first update, or 40 logged points when the plan is unknown.
    return_margin: float = 0.1
    never_fraction: float = 0.5
    never_points: int = 40

    def with_values(self, values: dict[str, Any]) -> Tuning:
        return replace(self, **values)

    def to_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


GRID: dict[str, tuple[float, ...]] = {
    "value_growth_critical": (10.0, 100.0, 1000.0),
    "value_growth_warning": (100.0, 1000.0, 10000.0),
    "value_bound_warning": (0.001, 0.01, 0.1),
    "spread_warning_nats": (math.log(3.0), math.log(10.0), math.log(30.0)),
    "spread_critical_nats": (math.log(30.0), math.log(100.0), math.log(1000.0)),
    "collapse_warning_nats": (math.log(100.0), math.log(1000.0), math.log(10000.0)),
    "return_margin": (0.05, 0.1, 0.2),
    "never_fraction": (0.25, 0.5, 0.75),
    "never_points": (20, 40, 80),
}
