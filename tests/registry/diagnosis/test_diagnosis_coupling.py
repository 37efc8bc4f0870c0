"""Pearson coupling between a metric and its related metrics over a recent window."""

from __future__ import annotations

import math

import numpy as np
import pytest

from registry.diagnosis.coupling import couplings, pearson
from registry.diagnosis.stats import as_series


def test_strongly_coupled_metrics_are_reported_with_r_and_sorted(rng: np.random.Generator) -> None:
    steps = np.arange(300)
    entropy = 1.0 - 0.002 * steps + rng.normal(0, 0.02, 300)
    others = {
        "kl": as_series((steps, 0.01 + 0.0001 * steps + rng.normal(0, 0.001, 300))),
        "noise": as_series((steps, rng.normal(0, 1, 300))),
        "clip": as_series((steps, -entropy * 2)),
    }
    res = couplings(as_series((steps, entropy)), others, window_steps=200)
    names = [c.metric for c in res]
    assert names[0] == "clip" and res[0].r == pytest.approx(-1.0)
    strong = {c.metric for c in res if c.strong}
    assert strong == {"clip", "kl"}
    assert all(c.points == 200 and c.start_step == 100 for c in res)


def test_series_are_aligned_on_common_finite_steps() -> None:
    a = as_series((np.arange(0, 20), np.arange(0, 20, dtype=float)))
    b_values = np.arange(0, 40, 2, dtype=float) ** 2
    b_values[3] = math.nan
    b = as_series((np.arange(0, 40, 2), b_values))  # only even steps, one NaN
    res = pearson(a, b)
    assert res is not None
    r, n, first, last = res
    assert n == 9 and first == 0 and last == 18
    assert r == pytest.approx(
        float(
            np.corrcoef(
                np.r_[0, 2, 4, 8, 10, 12, 14, 16, 18], np.r_[0, 2, 4, 8, 10, 12, 14, 16, 18] ** 2
            )[0, 1]
        )
    )


def test_constant_or_short_overlaps_give_no_r() -> None:
    a = as_series((np.arange(10), np.arange(10, dtype=float)))
    assert pearson(a, as_series((np.arange(10), np.full(10, 3.0)))) is None
    assert pearson(a, as_series((np.arange(6, 16), np.arange(10, dtype=float)))) is None
    assert couplings(as_series(([], [])), {"x": a}) == ()
