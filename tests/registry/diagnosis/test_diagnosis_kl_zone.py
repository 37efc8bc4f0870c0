"""Policy KL against clip epsilon."""

from __future__ import annotations

import math

import pytest

from registry.diagnosis.kl_zone import kl_zone


@pytest.mark.parametrize(
    ("kl", "zone"),
    [
        (0.0, "safe"),
        (0.0099, "safe"),
        (0.01, "warning"),
        (0.0159, "warning"),
        (0.016, "danger"),
        (0.5, "danger"),
    ],
)
def test_zone_boundaries_are_half_and_eight_tenths_of_clip_epsilon(kl: float, zone: str) -> None:
    res = kl_zone(kl, 0.02)
    assert res is not None and res.zone == zone
    assert res.ratio == pytest.approx(kl / 0.02)


def test_the_seed_example_042_over_005_is_danger() -> None:
    res = kl_zone(0.042, 0.05)
    assert res is not None and res.zone == "danger" and res.ratio == pytest.approx(0.84)


@pytest.mark.parametrize("eps", [None, 0.0, -0.2])
def test_no_zone_without_a_known_clip_epsilon(eps: float | None) -> None:
    assert kl_zone(0.01, eps) is None


def test_no_zone_for_a_non_finite_kl() -> None:
    assert kl_zone(math.nan, 0.2) is None
    assert kl_zone(math.inf, 0.2) is None
