"""Which rank's points a run's series is read from, when several ranks of a job logged it.

The ranks of one job are one run (DESIGN.md, "Scale"), each rank's points keyed by its rank.
Training metrics usually come from rank 0 (the others log the same quantity of their own shard,
or nothing), so a series several ranks logged is read from the lowest of them, rank 0: the run
page's charts, the diagnosis cards and the whole-run statistics all read that rank. A series
only one rank logged (a rank-0-only metric, or a run of one process) is that rank's. How the
ranks differ (step time, throughput, gradient norm: each rank's own reading) is the spread
`/api/series` adds beside the line, and one rank's series is `/api/series?rank=N`.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.schema import NO_RANK

__all__ = ["reading_rank"]


def reading_rank(ranks: Iterable[int]) -> int | None:
    """The rank to read of those that logged a series (`NO_RANK` for points logged without
    one, which are read with it: a run of one process that a job's ranks went on with); None
    when fewer than two ranks did (everything is read)."""
    found = sorted({r for r in ranks if r != NO_RANK})
    return found[0] if len(found) > 1 else None
