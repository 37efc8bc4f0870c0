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
    # A TD / critic loss is critical once past the 2R² bound for two points, whatever its history
    # (a physical fact); before that, grown this many times over its early level while within
    # two orders of magnitude of the bound is a warning (it is heading there). A healthy critic's
    # loss grows with the Q values it fits (the corpus' DQN on Acrobot: 735x, far inside the
    # bound), so growth alone never flags.
    value_growth_warning: float = 1000.0
    value_bound_warning: float = 0.01
    # A Gaussian policy's std per action dimension against where it started: a policy-gradient
    # learner narrows as it learns, so tripled (entropy + ln 3 nats a dimension) it is being paid
    # to be random, a warning; tenfold critical (its actions are then noise clipped at the action
    # bounds); shrunk a thousandfold a collapse (healthy continuous policies narrow by about one
    # order of magnitude over a whole run).
    spread_warning_nats: float = math.log(3.0)
    spread_critical_nats: float = math.log(10.0)
    collapse_warning_nats: float = math.log(1000.0)
    # The return below its start by a tenth of the start's magnitude (besides the noise) is a
    # regression a person acts on; "never improved" once half the planned run has passed after
    # the learning began (the registry's mid stage), or, with no plan, 20 logged points after it
    # (the registry's early stage in points).
    return_margin: float = 0.1
    never_fraction: float = 0.5
    never_points: int = 20

    def with_values(self, values: dict[str, Any]) -> Tuning:
        return replace(self, **values)

    def to_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


GRID: dict[str, tuple[float, ...]] = {
    "value_growth_warning": (100.0, 1000.0, 10000.0),
    "value_bound_warning": (0.001, 0.01, 0.1),
    "spread_warning_nats": (math.log(2.0), math.log(3.0), math.log(5.0)),
    "spread_critical_nats": (math.log(5.0), math.log(10.0), math.log(100.0)),
    "collapse_warning_nats": (math.log(100.0), math.log(1000.0), math.log(10000.0)),
    "return_margin": (0.05, 0.1, 0.2),
    "never_fraction": (0.25, 0.5, 0.75),
    "never_points": (10, 20, 40),
}
