"""A run's one decision, per unknown name, of whether it is read as a metric without a `--map`.

The rules are the registry's (`registry/auto_map.py`: the name's leaf is a spelling of exactly one
metric, its prefix says nothing else, its first value is inside the metric's limits); this module
keeps the answer for the run. A name is decided the first time it is logged, with its first
value, and never again: every later value, path (per call, columns, a log's blocks) and restart
stores it the same way. A run going on reads the decision from its stored record (the transforms
record marks the name `AUTO_MAPPED`), not from its new first value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from registry import AutoMap, Registry, Resolution
from registry.loader import map_entry

from ..schema import AUTO_MAPPED, FieldTransform, read_by_itself

__all__ = ["AutoReading"]

_DECIDED = 100_000
"""Unknown names decided per run, at most: a loop that logs a new name every step (`sample_123/x`)
does not grow this without bound; names past it are kept as logged, which is never a change."""


class AutoReading:
    """Per run: which unknown names were read as which metric (None: kept as logged)."""

    def __init__(
        self, registry: Registry, transforms: Mapping[str, Sequence[FieldTransform]]
    ) -> None:
        self._registry = registry
        self._rules: AutoMap | None = None  # built at the first unknown name
        self._decided: dict[str, Resolution | None] = {}
        # a run going on: what its record says each name was read as
        self._recorded = read_by_itself(transforms)

    def decide(
        self,
        name: str,
        value: Callable[[], float | None],
        logged: Callable[[], Iterable[str]],
    ) -> tuple[Resolution | None, bool]:
        """(How `name` is stored: its metric's resolution, or None for as logged; whether this
        call made the decision, so the caller records it). `value`: the name's first value;
        `logged`: the metrics the run logs under names the registry knows."""
        if name in self._decided:
            return self._decided[name], False
        field = self._recorded.get(name)
        if field is None and len(self._decided) >= _DECIDED:
            return None, False  # past the bound every new name stays as logged, every time
        if field is not None:
            metric = field if self._registry.has_metric(field) else None
        else:
            if self._rules is None:
                self._rules = AutoMap.of(self._registry)
            # (the run's metrics are gathered only for a name a rule reads: gathering them for
            # every unknown name of a call was quadratic in its names)
            metric = self._rules.metric_for(name, value(), _lazily(logged))
        found = None
        if metric is not None and name not in self._registry.as_logged:
            found = self._registry.with_map([map_entry(name, metric)]).resolve(name)
        self._decided[name] = found
        return found, field is None and found is not None

    @staticmethod
    def record(res: Resolution, name: str) -> FieldTransform:
        """The transforms record's entry saying `name` was read as `res`'s metric by itself."""
        return FieldTransform(res.field, name, "identity", 1.0, AUTO_MAPPED)


def _lazily(make: Callable[[], Iterable[str]]) -> Iterator[str]:
    """What `make` gives, made when first iterated."""
    yield from make()
