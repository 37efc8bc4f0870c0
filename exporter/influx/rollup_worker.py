"""InfluxDB rollups kept on a thread of their own, for `rlvitals import`.

An import's sender waits on InfluxDB for most of its time, and InfluxDB waits on it while it sums
a batch's rollups and writes them: measured here (`bench/bench_import.py`, 500,000 scalars), that
was 0.3 of the sender's 1.4 s, with InfluxDB idle meanwhile. Here the rollups of batch k are
summed and written (over their own connection) while the sender already sends batch k+1, so
InfluxDB always has a request to work on. Batches are taken in the order they were written, after
they were written, so the rollups' own reasoning about what InfluxDB holds is unchanged: a batch
already in InfluxDB when its predecessor is rolled up is allowed for there (`exporter.
influx_rollups`), by recomputing its blocks on the server. That is correct but costs: measured,
the run's first batches took 0.35 s of queries instead of 0.07 s, because a series first seen
learns the newest step InfluxDB holds, later batches included. So until the rollups know a series,
each batch is rolled up before `sent` returns (and the next batch is sent): the first batch's
series, and a fresh run's marker, are learnt while InfluxDB holds nothing newer of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from .rollups import InfluxRollups, SentPart

__all__ = ["RollupWorker"]

_log = logging.getLogger(__name__)

_FIRST_WAIT = 60.0  # seconds; then it goes on (the later batches' blocks are recomputed)
_Job = tuple[Sequence[SentPart], Mapping[str, str | None], bool, Callable[[], None] | None]


class RollupWorker:
    """Calls `rollups.sent` for the batches handed to `sent`, in order, on its own thread: the
    batches that waited while it was busy in one call. At most `depth` batches wait: `sent`
    blocks beyond that (the batches hold their samples)."""

    def __init__(self, rollups: InfluxRollups, name: str, depth: int = 4) -> None:
        self._rollups = rollups
        self._depth = depth
        self._cond = threading.Condition()
        self._jobs: list[_Job] = []
        self._busy = False
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def sent(
        self,
        parts: Sequence[SentPart],
        projects: Mapping[str, str | None],
        *,
        exact: bool,
        done: Callable[[], None] | None = None,
    ) -> None:
        """As `InfluxRollups.sent(parts=...)`, later; never raises. `done` is called (on the
        worker's thread, before `wait` returns) once the batch is rolled up; never for a batch
        left when the worker closed."""
        with self._cond:
            while len(self._jobs) >= self._depth and self._thread.is_alive():
                self._cond.wait(0.5)
            if not self._thread.is_alive():
                return  # closed: `close` said what was left
            self._jobs.append((parts, projects, exact, done))
            self._cond.notify_all()
        if not self._rollups.knows_series:  # (a run config's batch has no numbers)
            self.wait(_FIRST_WAIT)

    @property
    def idle(self) -> bool:
        """Whether every batch handed over is rolled up (nothing waits, nothing runs)."""
        with self._cond:
            return not self._jobs and not self._busy

    def wait(self, timeout: float) -> bool:
        """Until every batch handed over is rolled up (False on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float) -> None:
        """Roll up what was handed over (up to `timeout`), then stop."""
        self.wait(timeout)
        with self._cond:
            self._stopping = True
            left = len(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
        if left:  # their raw points are written; their rollups are not
            _log.warning(
                "rlvitals: %d batch(es) not rolled up before the import ended; those steps' "
                "rollup blocks are stale until the steps are written again",
                left,
            )
        self._thread.join(max(0.1, timeout))

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stopping:
                    self._cond.wait()
                if not self._jobs:
                    return
                # every batch waiting, rolled up in one call: the parts in the order they were
                # written, as one batch of them would be (a call's requests and sums cost per
                # call; behind a fast sender, up to `depth` batches wait)
                jobs, self._jobs = self._jobs, []
                self._busy = True
                self._cond.notify_all()
            parts = [part for job in jobs for part in job[0]]
            projects = {run: project for job in jobs for run, project in job[1].items()}
            exact = all(job[2] for job in jobs)  # a refused line in any: recompute its blocks
            try:
                self._rollups.sent([], projects, exact=exact, parts=parts)
                for *_, done in jobs:
                    if done is not None:
                        done()
            except Exception as exc:  # `sent` never raises; a bug here must not end the thread
                _log.error("rlvitals rollups: %s: %s", type(exc).__name__, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
