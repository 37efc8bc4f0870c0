"""The forwarder reads and renders the next batch while InfluxDB takes the last one: whatever
happens to the write in flight, every row is sent, and none is marked sent that was not."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from exporter import Outbox
from exporter.counts import RunCounters
from exporter.errors import WriteError
from exporter.influx.forwarder import Forwarder
from exporter.schema import NO_RANK


class _SlowWriter:
    """Takes a while per request (a server on another core), refuses the requests numbered in
    `fail` (a server gone for a moment), and keeps the lines it took."""

    def __init__(self, fail: set[int], delay: float = 0.02) -> None:
        self.fail, self.delay = fail, delay
        self.calls = 0
        self.steps: list[int] = []
        self.overlapped = 0  # requests during which the forwarder read the next batch
        self.in_flight = threading.Event()
        self.lock = threading.Lock()

    def write(self, body: bytes) -> None:
        with self.lock:
            self.calls += 1
            call = self.calls
        self.in_flight.set()
        time.sleep(self.delay)
        self.in_flight.clear()
        if call in self.fail:
            raise WriteError("InfluxDB went away", retryable=True)
        with self.lock:
            self.steps += [int(line.rsplit(b" ", 1)[1]) for line in body.splitlines()]

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "a slow test server"


def _fill(path: Path, steps: int) -> None:
    box = Outbox(path)
    box.write(
        [
            ("r", NO_RANK, s, "policy", "", f, float(s), 1000.0 + s)
            for s in range(steps)
            for f in "ab"
        ]
    )
    box.close()


def test_every_row_is_sent_and_marked_once_when_writes_overlap_the_next_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    _fill(path, 500)  # 1,000 rows: ten batches of 100
    writer = _SlowWriter(fail=set())
    forwarder = Forwarder(path, writer, RunCounters(), batch_size=100, idle_wait=0.05)
    box = Outbox(path)
    reads_during_write = []
    original = box.pending_points

    def pending_points(limit: int, after: int | None = None):  # type: ignore[no-untyped-def]
        reads_during_write.append(writer.in_flight.is_set())
        return original(limit, after)

    box.pending_points = pending_points  # type: ignore[method-assign]
    while forwarder._forward_once(box):
        pass
    assert sorted(writer.steps) == list(range(500))  # each step's one line, once
    assert box.backlog() == 0
    # the reads after the first were made while a write was in flight
    assert sum(reads_during_write) >= 9


def test_a_write_failing_in_flight_drops_the_batch_read_ahead_and_sends_both_later(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.sqlite"
    _fill(path, 500)
    writer = _SlowWriter(fail={3, 4})
    counters = RunCounters()
    forwarder = Forwarder(path, writer, counters, batch_size=100, idle_wait=0.05)
    forwarder.start()
    try:
        assert forwarder.flush(30)
    finally:
        forwarder.stop()
    box = Outbox(path)
    assert box.backlog() == 0
    # nothing the failed requests carried, nor what was read while they were in flight, was
    # marked sent without reaching the server: every step arrived
    assert set(writer.steps) == set(range(500))
    assert counters.write_errors == 2 and counters.sent == 1000
    # with nothing left to send, the forwarder marked the rows its watermark had passed
    db = sqlite3.connect(path)
    (unmarked,) = db.execute("SELECT count(*) FROM points WHERE sent = 0").fetchone()
    db.close()
    assert unmarked == 0
