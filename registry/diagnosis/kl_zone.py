"""Policy KL against the PPO clip epsilon: how close an update is to the edge of the trust region."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DANGER_RATIO", "WARNING_RATIO", "KlZone", "kl_zone"]

WARNING_RATIO = 0.5
DANGER_RATIO = 0.8

Zone = Literal["safe", "warning", "danger"]


@dataclass(frozen=True)
class KlZone:
    kl: float
    clip_epsilon: float
    ratio: float
    zone: Zone

    def to_dict(self) -> dict[str, object]:
        return {
            "kl": self.kl,
            "clip_epsilon": self.clip_epsilon,
            "ratio": self.ratio,
            "zone": self.zone,
        }


def kl_zone(kl: float, clip_epsilon: float | None) -> KlZone | None:
    """safe below 0.5 x clip epsilon, warning from 0.5 to 0.8, danger at 0.8 and above.

    None when clip epsilon is unknown (not positive) or KL is not a finite number.
    """
    if clip_epsilon is None or not clip_epsilon > 0 or kl != kl or abs(kl) == float("inf"):
        return None
    ratio = kl / clip_epsilon
    zone: Zone = "safe"
    if ratio >= DANGER_RATIO:
        zone = "danger"
    elif ratio >= WARNING_RATIO:
        zone = "warning"
    return KlZone(kl, clip_epsilon, ratio, zone)
