"""Registry units -> Grafana unit ids (a registry unit without a mapping is an error, not a guess)."""

from __future__ import annotations

from types import MappingProxyType

from registry import Metric

__all__ = ["UNIT_IDS", "grafana_unit"]

UNIT_IDS = MappingProxyType(
    {
        "none": "none",
        "reward": "none",
        "ratio": "percentunit",
        "percent": "percent",
        "nats": "suffix: nats",
        "nats_per_kstep": "suffix: nats/1k steps",
        "tokens": "suffix: tokens",
        "steps": "short",
        "count": "short",
        "samples_per_second": "suffix: samples/s",
        "tokens_per_second": "suffix: tokens/s",
        "seconds": "s",
        "gibibytes": "gbytes",
        "watts": "watt",
        "celsius": "celsius",
    }
)


def grafana_unit(metric: Metric) -> str:
    """The Grafana unit id for a metric's registry unit."""
    try:
        return UNIT_IDS[metric.unit]
    except KeyError:
        raise KeyError(
            f"metric {metric.id!r} has unit {metric.unit!r}, which has no Grafana unit id; "
            "add it to grafana/dashboards_gen/units.py"
        ) from None
