"""Every field a run logged, placed as the live dashboard lists them: the registry's core
metrics first (registry order), then its other metrics, then the framework's bookkeeping keys
(`time/iterations`, `epoch`: counters and clocks the registry declares as such), then names the
registry does not know (by name). A member of a metric family (`reward_component/<name>`) follows
its family's entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import registry
from exporter.schema import UNREGISTERED

from .history import metric_of_field

__all__ = [
    "BOOKKEEPING",
    "CORE",
    "REGISTERED",
    "UNREGISTERED_GROUP",
    "FieldEntry",
    "ordered_fields",
]

CORE = "core"
REGISTERED = "registered"
BOOKKEEPING = "bookkeeping"
UNREGISTERED_GROUP = "unregistered"


@dataclass(frozen=True)
class FieldEntry:
    field: str
    measurement: str
    group: str
    metric: registry.Metric | None
    bookkeeping: registry.BookkeepingKey | None = None


def ordered_fields(
    reg: registry.Registry, logged: Mapping[str, str], framework: str | None = None
) -> list[FieldEntry]:
    """`logged` (field -> measurement) in the dashboard's order; `framework`, when the run's is
    known, decides which framework's bookkeeping keys a name is (else any framework's)."""
    order = {m.id: i for i, m in enumerate(reg.metrics)}
    known: list[tuple[int, int, str, FieldEntry]] = []
    kept: list[FieldEntry] = []
    unknown: list[FieldEntry] = []
    for name, measurement in logged.items():
        metric = None if measurement == UNREGISTERED else metric_of_field(reg, name)
        if metric is None:
            key = reg.bookkeeping_key(name, framework)
            if key is not None:
                kept.append(FieldEntry(name, measurement, BOOKKEEPING, None, key))
            else:
                unknown.append(FieldEntry(name, measurement, UNREGISTERED_GROUP, None))
            continue
        group = CORE if metric.core else REGISTERED
        entry = FieldEntry(name, measurement, group, metric)
        # The family's own id sorts before its members ("" < any member name).
        member = "" if name == metric.id else name
        known.append((0 if metric.core else 1, order[metric.id], member, entry))
    known.sort(key=lambda k: k[:3])
    kept.sort(key=lambda e: e.field)
    unknown.sort(key=lambda e: e.field)
    return [k[3] for k in known] + kept + unknown
