"""Plain datasource queries as SDK builders (the SDK has no InfluxDB or Infinity query builder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grafana_foundation_sdk.cog import builder, variants

__all__ = ["Target"]


class _Query(variants.Dataquery):
    def __init__(self, body: Mapping[str, Any]) -> None:
        self._body = dict(body)

    def to_json(self) -> dict[str, Any]:
        return dict(self._body)


class Target(builder.Builder[variants.Dataquery]):
    """A datasource query given as its JSON fields (InfluxQL, PromQL or Infinity)."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self._body = dict(body)

    def build(self) -> variants.Dataquery:
        return _Query(self._body)
