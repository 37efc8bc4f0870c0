"""How long the worker lets a batch gather: the commit interval, stretched only after a write that
spent most of its time waiting (on the GIL, while a pure-Python training loop holds it)."""

from __future__ import annotations

import pytest

from exporter.run import gather_interval


@pytest.mark.parametrize("interval", [0.01, 0.1, 2.0])
def test_a_write_that_ran_on_its_own_cpu_keeps_the_commit_interval(interval: float) -> None:
    assert gather_interval(interval, wall=0.003, cpu=0.003) == interval
    assert gather_interval(interval, wall=0.012, cpu=0.003) == interval  # 4x: at the edge
    assert gather_interval(interval, wall=0.0, cpu=0.0) == interval


@pytest.mark.parametrize("interval", [0.01, 0.1, 2.0])
def test_a_write_that_mostly_waited_stretches_the_next_gather(interval: float) -> None:
    # measured under a pure-Python loop: writes of 5-7 ms of CPU took 50-117 ms
    assert gather_interval(interval, wall=0.0121, cpu=0.003) == pytest.approx(3 * interval)
    assert gather_interval(interval, wall=0.060, cpu=0.005) == pytest.approx(3 * interval)
    assert gather_interval(interval, wall=0.001, cpu=0.0) == pytest.approx(3 * interval)
