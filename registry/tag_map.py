"""`--map TAG=METRIC`: a run's own tag names, parsed and checked against the registry.

A mapping is an alias (`loader.map_entry`) that beats the registry's own for that run:
`Registry.with_map(parse_map(items, registry))`. `map_record` is what a run stores of it
(its config's `tag_map`), so a later reader knows which names were mapped.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from .catalog import Registry
from .errors import BadMapping
from .loader import map_entry
from .model import Alias

__all__ = ["MAP_HELP", "RECORD_KEY", "map_record", "parse_kept", "parse_map"]

MAP_HELP = (
    "TAG=METRIC: read the logged name TAG as the registry metric METRIC (repeatable); it beats "
    "the registry's aliases for this run and is recorded in the run's config (tag_map). "
    "TAG= (nothing after =) keeps TAG as logged where rlvitals would read it as a metric by itself"
)
RECORD_KEY = "tag_map"
"""The run-config key a run's mappings are recorded under ({TAG: METRIC})."""


def parse_map(items: Iterable[str], registry: Registry) -> tuple[Alias, ...]:
    """One mapping per `TAG=METRIC` (`TAG=` keeps TAG as logged: `parse_kept`); raises
    BadMapping naming each bad item (no `=`, no TAG, a METRIC that is no metric id, with the
    closest ids)."""
    problems: list[str] = []
    out: list[Alias] = []
    ids = [m.id for m in registry.metrics]
    for item in items:
        tag, sep, metric = item.rpartition("=")
        tag, metric = tag.strip(), metric.strip()
        if not sep or not tag:
            problems.append(
                f"--map {item}: expected TAG=METRIC, e.g. --map perf/return=episodic_return "
                "(or TAG= to keep TAG as logged)"
            )
        elif not metric:
            continue  # kept as logged: parse_kept
        elif not registry.has_metric(metric):
            close = difflib.get_close_matches(metric, ids, n=3, cutoff=0.6)
            hint = f"; close ids: {', '.join(close)}" if close else ""
            problems.append(
                f"--map {item}: {metric!r} is not a registry metric id{hint} "
                "(registry/metrics.yaml lists them)"
            )
        else:
            out.append(map_entry(tag, metric))
    if problems:
        raise BadMapping("; ".join(problems))
    return tuple(out)


def parse_kept(items: Iterable[str]) -> tuple[str, ...]:
    """The TAGs of the `TAG=` items (nothing after `=`): names kept as logged."""
    out = []
    for item in items:
        tag, sep, metric = item.rpartition("=")
        if sep and tag.strip() and not metric.strip():
            out.append(tag.strip())
    return tuple(out)


def map_record(registry: Registry) -> Mapping[str, str | None]:
    """{TAG: METRIC} of every mapping `registry` holds (a user file's and --map's; later wins),
    and {TAG: None} of each name kept as logged (`--map TAG=`)."""
    out: dict[str, str | None] = {a.key: a.metric for a in registry.mapped}
    out.update({name: None for name in sorted(registry.as_logged)})
    return out
