"""The metrics a benchmark logs per step: 30 registered names, values inside every limit.

Shared by the benchmarks so each measures the same work: SB3's own spellings first (what a real
SB3 run logs, including the inputs of derived metrics), then canonical ids of plain measured
metrics, every one known to the registry (an unregistered name takes another path).
"""

from __future__ import annotations

import registry

__all__ = ["metric_names", "step_values"]


def metric_names(reg: registry.Registry, count: int = 30) -> list[str]:
    """`count` registered keys: SB3's spellings first, then canonical ids."""
    sb3 = [a.key for m in reg.metrics for a in m.aliases if a.framework == "sb3"]
    names = [k for k in dict.fromkeys(sb3) if not k.startswith("time/")][:12]
    taken = {reg.resolve(k, framework="sb3").metric for k in names}
    for m in reg.metrics:
        if len(names) == count:
            break
        if m.kind == "measured" and m.pattern is None and m.id not in taken:
            names.append(m.id)
    return names


def step_values(names: list[str], step: int) -> dict[str, float]:
    """One step's values, in (0, 1): inside every registered metric's physical limits."""
    return {n: 0.01 + 0.0098 * ((step * 7 + i) % 97) for i, n in enumerate(names)}
