"""The import's rollup thread takes batches in order, survives a failure in one and says so, and
holds the sender back until the rollups know a series (so they learn it before a later batch is
in InfluxDB)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from exporter.influx.rollup_worker import RollupWorker


def _part(i: int) -> Any:
    """A batch (its parts) the stand-in tells apart by number."""
    return [i]


class _Rollups:
    """Stands in for `InfluxRollups` to inject a fault: records what it was given."""

    def __init__(self, fail_on: int | None = None, gate: threading.Event | None = None) -> None:
        self.seen: list[int] = []
        self.calls: list[tuple[list[int], dict[str, Any], bool]] = []
        self.fail_on = fail_on
        self.gate = gate
        self.known = False
        self.entered = threading.Event()

    @property
    def knows_series(self) -> bool:
        return self.known or bool(self.seen)

    def sent(self, rows: Any, projects: Any, *, exact: bool, parts: Any) -> None:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        self.seen.extend(parts)
        self.calls.append((list(parts), dict(projects), exact))
        if self.fail_on in parts:
            raise RuntimeError("boom")


def test_batches_are_rolled_up_in_order_and_a_failure_does_not_end_the_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rollups = _Rollups(fail_on=2)
    worker = RollupWorker(rollups, "t")  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="exporter.influx.rollup_worker"):
        for i in range(6):
            worker.sent(_part(i), {"r": None}, exact=True)
        assert worker.wait(10)
    assert rollups.seen == [0, 1, 2, 3, 4, 5]
    assert "boom" in caplog.text
    worker.close(5)


def test_batches_that_wait_are_rolled_up_in_one_call_in_the_order_they_were_sent() -> None:
    # a sender faster than the rollups: what waits meanwhile costs one call, not one each
    gate = threading.Event()
    rollups = _Rollups(gate=gate)
    rollups.known = True  # (the sender is not held for a first batch here)
    worker = RollupWorker(rollups, "t", depth=8)  # type: ignore[arg-type]
    worker.sent(_part(0), {"a": "p"}, exact=True)
    assert rollups.entered.wait(10)  # batch 0 is being rolled up; the next ones wait
    worker.sent(_part(1), {"b": None}, exact=True)
    worker.sent(_part(2), {"c": None}, exact=False)
    worker.sent(_part(3), {"b": None}, exact=True)
    gate.set()
    assert worker.wait(10)
    # one call for the three, in order; a batch with a line InfluxDB refused (exact False)
    # makes the call recompute its blocks
    assert rollups.calls == [([0], {"a": "p"}, True), ([1, 2, 3], {"b": None, "c": None}, False)]
    worker.close(5)


def test_the_sender_waits_for_the_first_batch_only() -> None:
    gate = threading.Event()
    rollups = _Rollups(gate=gate)
    worker = RollupWorker(rollups, "t")  # type: ignore[arg-type]
    first = threading.Thread(target=worker.sent, args=([0], {}), kwargs={"exact": True})
    first.start()
    first.join(0.3)
    assert first.is_alive()  # held until the rollups know a series
    gate.set()
    first.join(10)
    assert not first.is_alive()
    gate.clear()  # later batches: handed over without waiting for them
    second = threading.Thread(target=worker.sent, args=([1], {}), kwargs={"exact": True})
    second.start()
    second.join(5)
    assert not second.is_alive() and rollups.seen == [0]
    gate.set()
    assert worker.wait(10) and rollups.seen == [0, 1]
    worker.close(5)


def test_close_says_how_many_batches_were_left_unrolled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()
    rollups = _Rollups(gate=gate)
    rollups.seen.append(-1)  # knows a series already: no waiting in `sent`
    worker = RollupWorker(rollups, "t", depth=4)  # type: ignore[arg-type]
    worker.sent(_part(0), {}, exact=True)
    assert rollups.entered.wait(10)  # batch 0 is being rolled up: the next two wait
    for i in (1, 2):
        worker.sent(_part(i), {}, exact=True)
    with caplog.at_level(logging.WARNING, logger="exporter.influx.rollup_worker"):
        closer = threading.Thread(target=worker.close, args=(0.3,))
        closer.start()
        closer.join(2)
        gate.set()
        closer.join(10)
    assert "2 batch(es) not rolled up" in caplog.text
