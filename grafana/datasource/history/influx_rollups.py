"""Reading the step rollups the exporter keeps in InfluxDB (`exporter.influx.rollups`).

A run the exporter has rolled up carries a point in `ROLLUP_MARKER`; for it, whole-run statistics
are the sums of its 4096-step blocks (a few hundred points at a million steps) and a long series
sums whole blocks of the level `bucket_plan` chose, reading raw points only in the partial blocks
at the edges of the range, as the embedded store does with the outbox's rollups. A level is used
only where the series is dense enough for it (its blocks hold `MIN_BLOCK_POINTS` values on
average, the outbox's rule) and the marker does not say the exporter stopped keeping it for that
field (`unkept_key`: it does so for a field too sparse for the level); otherwise the series is
bucketed, and its whole-run statistics counted, from its raw points, which are few for such a
field. A run without the marker (written before rollups, or through InfluxDB 2.x) is read from
the raw points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter.schema import (
    MIN_BLOCK_POINTS,
    ROLLUP_LEVELS,
    ROLLUP_MARKER,
    rollup_key,
    rollup_measurement,
    unkept_key,
)

from .base import BucketPlan, FieldStats, Points, points_from
from .influx_http import InfluxHttp, ResultSeries, first_number
from .quoting import quote_ident

__all__ = [
    "BOUND_BLOCKS",
    "RollupMarker",
    "RollupSpan",
    "count_statement",
    "marker_statement",
    "read_marker",
    "read_window_bounds",
    "rollup_points",
    "rollup_statements",
    "rollup_stats",
    "window_bounds_statements",
]

BOUND_BLOCKS = 16
"""Newest 4096-step blocks read to bound the cards' windows (`read_window_bounds`)."""


def marker_statement(where: str) -> str:
    return f"SELECT * FROM {quote_ident(ROLLUP_MARKER)} WHERE {where}"


@dataclass(frozen=True)
class RollupMarker:
    """What a run's marker says: whether its rollups are complete, and which levels of which
    fields the exporter does not keep."""

    complete: bool
    unkept: frozenset[str]  # marker fields `unkept_key(level, field)`

    def keeps(self, level: int, field: str) -> bool:
        return self.complete and unkept_key(level, field) not in self.unkept


def read_marker(result: list[ResultSeries]) -> RollupMarker:
    """The marker statement's result."""
    complete = first_number(result, "version") is not None
    unkept: set[str] = set()
    for series in result:
        for row in series.values:
            unkept.update(
                str(c)
                for c, v in zip(series.columns, row, strict=False)
                if v is not None and str(c) != "version" and ":" in str(c)
            )
    return RollupMarker(complete, frozenset(unkept))


def count_statement(where: str, field: str) -> str:
    """The field's whole-run count and sum from its 4096-step blocks."""
    n, total = quote_ident(rollup_key("n", field)), quote_ident(rollup_key("sum", field))
    source = quote_ident(rollup_measurement(ROLLUP_LEVELS[-1]))
    return f'SELECT sum({n}) AS "n", sum({total}) AS "sum" FROM {source} WHERE {where}'


def rollup_stats(
    http: InfluxHttp,
    where: str,
    fields: Sequence[str],
    source: Callable[[str], str],
    run_where: str | None = None,
) -> dict[str, FieldStats] | None:
    """Whole-run statistics of a rolled-up run (None: it is not, or not yet): from the 4096-step
    blocks, or from the raw points in `source(field)` for a field whose blocks are not kept.
    Every field's sums are one statement: InfluxDB allocates about a megabyte for each statement
    it plans (measured on 1.6), and its garbage collections are what slows a request at times.
    `run_where` selects the run's marker when `where` also selects a rank (the marker is the
    run's, written without one)."""
    if not fields:
        return {}
    coarse = ROLLUP_LEVELS[-1]
    sums = ", ".join(
        f"sum({quote_ident(rollup_key(k, f))}) AS {quote_ident(rollup_key(k, f))}"
        for f in fields
        for k in ("n", "sum")
    )
    marker_r, blocks = http.query(
        [
            marker_statement(run_where or where),
            f"SELECT {sums} FROM {quote_ident(rollup_measurement(coarse))} WHERE {where}",
        ]
    )
    marker = read_marker(marker_r)
    if not marker.complete:
        return None
    counted = {
        f: (first_number(blocks, rollup_key("n", f)), first_number(blocks, rollup_key("sum", f)))
        for f in fields
    }
    raw = [f for f in fields if not marker.keeps(coarse, f)]
    if raw:
        again = http.query(
            [
                f'SELECT count({quote_ident(f)}) AS "n", sum({quote_ident(f)}) AS "sum" '
                f"FROM {source(f)} WHERE {where}"
                for f in raw
            ]
        )
        for f, result in zip(raw, again, strict=True):
            counted[f] = (first_number(result, "n"), first_number(result, "sum"))
    out: dict[str, FieldStats] = {}
    for name in fields:
        n, total = counted[name]
        count = int(n or 0)
        out[name] = FieldStats(count, (total or 0.0) / count if count else None)
    return out


@dataclass(frozen=True)
class RollupSpan:
    """A series over its whole run: values counted, first and last step."""

    count: int
    first: int
    last: int

    def dense_enough(self, level: int) -> bool:
        return self.count * level >= MIN_BLOCK_POINTS * (self.last - self.first + 1)


def rollup_statements(
    source: str, where: str, field: str, lo: int, hi: int | None, plan: BucketPlan
) -> list[str]:
    """The statements for buckets of `plan` over [lo, hi] (hi None: open end): whole blocks of
    `plan.level` plus the raw points of the partial blocks at the edges (`rollup_points` reads
    their results)."""
    level = plan.level
    b0 = -(-lo // level)
    b1 = None if hi is None else (hi + 1) // level - 1
    group = f"GROUP BY time({plan.size}s, {plan.origin % plan.size}s) fill(none)"
    col = quote_ident(field)
    raw = (
        f'SELECT count({col}) AS "n", sum({col}) AS "s", max("step") AS "l" FROM {source} '
        f"WHERE {where} AND {col} = {col} AND time >= {{lo}}s AND time <= {{hi}}s {group}"
    )
    if b1 is not None and b1 < b0:  # inside one block (or two partial ones): all raw
        assert hi is not None
        return [raw.format(lo=lo, hi=hi)]
    n, s, last = (quote_ident(rollup_key(k, field)) for k in ("n", "sum", "last"))
    upper = "" if b1 is None else f" AND time <= {b1 * level}s"
    statements = [
        f'SELECT sum({n}) AS "n", sum({s}) AS "s", max({last}) AS "l" '
        f"FROM {quote_ident(rollup_measurement(level))} "
        f"WHERE {where} AND time >= {b0 * level}s{upper} {group}"
    ]
    if lo < b0 * level:
        statements.append(raw.format(lo=lo, hi=b0 * level - 1))
    if b1 is not None and hi is not None and hi >= (b1 + 1) * level:
        statements.append(raw.format(lo=(b1 + 1) * level, hi=hi))
    return statements


def rollup_points(
    results: Sequence[list[ResultSeries]], plan: BucketPlan, max_points: int
) -> Points:
    """The buckets from the results of `rollup_statements`: blocks and edge counts and sums of
    one bucket added up, each bucket at the last step a value was logged in it."""
    buckets: dict[int, list[float]] = {}
    for result in results:
        for series in result:
            it, i_n, i_s, i_l = (series.column(c) for c in ("time", "n", "s", "l"))
            if it is None or i_n is None or i_s is None or i_l is None:
                continue
            for row in series.values:
                if not row[i_n]:
                    continue
                cell = buckets.setdefault(int(row[it]), [0.0, 0.0, -1.0])
                cell[0] += float(row[i_n])
                cell[1] += float(row[i_s] or 0.0)
                cell[2] = max(cell[2], float(row[i_l]))
    ordered = sorted(buckets.values(), key=lambda c: c[2])
    total = int(sum(c[0] for c in ordered))
    p = points_from([int(c[2]) for c in ordered], [c[1] / c[0] for c in ordered], plan.size, total)
    return Points(p.steps[:max_points], p.values[:max_points], plan.size, total)


def window_bounds_statements(where: str, fields: Sequence[str]) -> list[str]:
    """What `read_window_bounds` reads: the marker and the newest `BOUND_BLOCKS` 4096-step blocks'
    counts of the fields."""
    counts = ", ".join(quote_ident(rollup_key("n", f)) for f in sorted(set(fields)))
    source = quote_ident(rollup_measurement(ROLLUP_LEVELS[-1]))
    return [
        marker_statement(where),
        f"SELECT {counts} FROM {source} WHERE {where} ORDER BY time DESC LIMIT {BOUND_BLOCKS}",
    ]


def read_window_bounds(
    results: Sequence[list[ResultSeries]], sources: Mapping[str, Sequence[str]], last_n: int
) -> dict[str, int]:
    """For each source (measurement) whose newest `last_n` rows lie within the run's newest
    `BOUND_BLOCKS` 4096-step blocks, the first step of the oldest block needed: its fields' counts
    in those blocks (the rollups' `n`) reach `last_n`. A statement asking for the newest rows
    reads about half as much with that lower bound (measured at 1M steps: 11 -> 5 ms). The counts
    can only be too low (rollups written after the points), which moves a bound back; a bounded
    statement that still returns fewer than `last_n` rows is asked again without it."""
    marker, blocks = results
    fields = {f for names in sources.values() for f in names}
    coarse = ROLLUP_LEVELS[-1]
    held = read_marker(marker)
    kept = {rollup_key("n", f): f for f in fields if held.keeps(coarse, f)}
    per_block: dict[int, dict[str, float]] = {}
    for series in blocks:
        it = series.column("time")
        if it is None:
            continue
        for row in series.values:
            cell = per_block.setdefault(int(row[it]), {})
            for column, value in zip(series.columns, row, strict=False):
                name = kept.get(column)
                if name is not None and isinstance(value, int | float):
                    cell[name] = cell.get(name, 0.0) + float(value)
    bounds: dict[str, int] = {}
    seen: dict[str, float] = {}
    for start in sorted(per_block, reverse=True):
        for name, n in per_block[start].items():
            seen[name] = seen.get(name, 0.0) + n
        for src, names in sources.items():
            if src not in bounds and max((seen.get(f, 0.0) for f in names), default=0) >= last_n:
                bounds[src] = start
    return bounds
