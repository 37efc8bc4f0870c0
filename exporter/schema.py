"""Which transform each stored field went through, recorded per run so a value can be shown with
what was done to it ("train/value_loss × 0.5", "train/entropy_loss negated").

The record is one JSON text in the run's `run_config` point at step 0 (field `transforms_json`),
so it travels with the run to InfluxDB like the rest of its configuration:
`{field: [{"name", "kind", "factor", "framework"}, ...]}`, one entry per logged name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["TRANSFORMS_FIELD", "FieldTransform", "transforms_from_json"]

TRANSFORMS_FIELD = "transforms_json"
"""Field of the `run_config` point (step 0) recording which transform each stored field went
through (JSON, see `FieldTransform`), so a value can be shown with what was done to it."""


@dataclass(frozen=True)
class FieldTransform:
    """A logged name whose values were transformed on the way to a stored field."""

    field: str
    name: str
    kind: str
    factor: float
    framework: str | None

    @property
    def note(self) -> str:
        """How the stored value relates to the logged one: `train/value_loss × 0.5`."""
        if self.kind == "negate":
            return f"{self.name} negated"
        if self.kind == "scale":
            return f"{self.name} × {self.factor:g}"
        if self.kind == "reciprocal":
            return f"{self.factor:g} / {self.name}"
        return self.name

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "factor": self.factor,
            "framework": self.framework,
        }


def transforms_from_json(text: str) -> dict[str, tuple[FieldTransform, ...]]:
    """The `transforms_json` field read back (malformed entries are skipped, never raised)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, tuple[FieldTransform, ...]] = {}
    if not isinstance(data, dict):
        return out
    for field, entries in data.items():
        found = []
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                continue
            factor = e.get("factor", 1.0)
            found.append(
                FieldTransform(
                    str(field),
                    e["name"],
                    str(e.get("kind", "identity")),
                    float(factor) if isinstance(factor, int | float) else 1.0,
                    e.get("framework") if isinstance(e.get("framework"), str) else None,
                )
            )
        if found:
            out[str(field)] = tuple(found)
    return out
