"""Which stored field names the registry vouches for: metric ids and members of metric families."""

from __future__ import annotations

import re

import registry

__all__ = ["FAMILY_MEMBER", "metric_of_field"]

FAMILY_MEMBER = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
"""The `<name>` in `<family>/<name>`: a short plain word, nothing a query language treats specially."""


def metric_of_field(reg: registry.Registry, field: str) -> registry.Metric | None:
    """The registry metric a field belongs to, or None for a name the registry does not vouch for."""
    if reg.has_metric(field):
        return reg.metric(field)
    prefix, sep, name = field.partition("/")
    if sep and reg.has_metric(prefix):
        metric = reg.metric(prefix)
        if metric.pattern is not None and FAMILY_MEMBER.match(name):
            return metric
    return None
