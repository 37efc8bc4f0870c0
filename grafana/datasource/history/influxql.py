"""History read from InfluxDB with InfluxQL (1.x directly, 2.x through its v1-compatible API).

Data model (DESIGN.md): one measurement per registry group, tag `run`, fields = canonical field
names, timestamp = step in seconds. So downsampling is `GROUP BY time(<bucket>s, <offset>s)` in
step space (the buckets of `bucket_plan`) and the step of a bucket is the last step of the field in
it. A run the exporter keeps step rollups for (`influx_rollups`) is read from them: long series and
whole-run statistics cost the same at any run length. Any other run is read from its raw points:
whole-run statistics folded incrementally (`influx_stats`), series bucketed by InfluxDB. Every identifier that reaches a query is
checked first (fields against the registry, runs against the runs InfluxDB lists) and then quoted
by `quoting`; numbers are formatted from ints.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import registry
from exporter.lifecycle import RankRecord, Recorded
from exporter.schema import (
    CONFIG_FIELD,
    EVENTS,
    KIND_TAG,
    NONFINITE_SUFFIX,
    PROJECT_TAG,
    RANK_END,
    RANK_TAG,
    ROLLUP_LEVELS,
    RUN_CONFIG,
    RUN_TAG,
    SPREAD,
    STATE_FIELD,
    TEXT_FIELD,
    UNREGISTERED,
    WALL_TIME_FIELD,
)

from .base import (
    BucketPlan,
    Event,
    FieldStats,
    FloatArray,
    HistoryError,
    IntArray,
    Latest,
    Points,
    RankSpread,
    RunInfo,
    bucket_means,
    bucket_plan,
    empty_points,
    points_from,
)
from .fields import metric_of_field
from .influx_http import InfluxHttp, ResultSeries
from .influx_rollups import (
    RollupMarker,
    RollupSpan,
    count_statement,
    marker_statement,
    read_marker,
    read_window_bounds,
    rollup_points,
    rollup_statements,
    rollup_stats,
    window_bounds_statements,
)
from .influx_stats import IncrementalStats
from .quoting import quote_ident, quote_string
from .ranks import reading_rank
from .recent import Recent

__all__ = ["InfluxHistory", "UnknownField", "UnknownRun", "measurement_of"]

_MAX_STEP = 2**62 // 10**9  # InfluxDB timestamps are int64 nanoseconds
_NUMBERS = (int, float)
_WINDOW_REQUESTS = 9  # the newest rows of each measurement: heavy, so one request each at once
_SHORT_RANGE = 4096  # steps: a range this short is read point by point (`_short_series`)
_EVENT_SKIP = frozenset({"time", "run", "project", "kind", "text", "step", "wall_time"})


class UnknownField(HistoryError):
    """A field the registry does not declare (never put into a query)."""


class UnknownRun(HistoryError):
    """A run InfluxDB does not list (never put into a query)."""


def measurement_of(reg: registry.Registry, field: str) -> str:
    """The measurement the exporter writes a field to: the group of its registry metric."""
    metric = metric_of_field(reg, field)
    if metric is not None:
        return metric.group
    raise UnknownField(f"{field!r} is not a metric id in the registry")


def _merge_duplicates(steps: IntArray, values: FloatArray) -> Points:
    """Rows of several ranks at one step averaged (what the embedded store does in SQL)."""
    p = points_from(steps, values)
    if p.steps.size < 2 or np.all(np.diff(p.steps) > 0):
        return p
    uniq, inverse = np.unique(p.steps, return_inverse=True)
    finite = np.isfinite(p.values)
    sums = np.bincount(inverse, weights=np.where(finite, p.values, 0.0))
    counts = np.bincount(inverse, weights=finite.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return Points(uniq.astype(np.int64), means.astype(np.float64), 1, int(p.steps.size))


def _every_point(steps: IntArray, values: FloatArray) -> Points:
    """A series read point by point: ranks at one step averaged, every point counted."""
    merged = _merge_duplicates(steps, values)
    return Points(merged.steps, merged.values, 1, int(steps.size))


def _rank_records(
    tag_values: list[ResultSeries], ends: list[ResultSeries]
) -> tuple[RankRecord, ...]:
    """The ranks a run's points carry, each with its `RANK_END` event's end where it has one."""
    seen: dict[int, RankRecord] = {}
    for s in tag_values:
        for row in s.values:
            if len(row) > 1 and str(row[1]).isdigit():
                seen[int(row[1])] = RankRecord(int(row[1]))
    for s in ends:
        state_i, text_i = s.column(STATE_FIELD), s.column(TEXT_FIELD)
        wall_i, rank_i = s.column(WALL_TIME_FIELD), s.column(RANK_TAG)
        for row in s.values:
            rank = None if rank_i is None else row[rank_i]
            state = None if state_i is None else row[state_i]
            if rank is None or not str(rank).isdigit() or not isinstance(state, str):
                continue
            wall = None if wall_i is None else row[wall_i]
            seen[int(rank)] = RankRecord(
                int(rank),
                state,
                None if text_i is None or row[text_i] is None else str(row[text_i]),
                float(wall) if isinstance(wall, int | float) else None,
            )
    return tuple(seen[r] for r in sorted(seen))


def _first_value(series: list[ResultSeries], column: str) -> Any:
    for s in series:
        i = s.column(column)
        if i is not None:
            for row in s.values:
                if row[i] is not None:
                    return row[i]
    return None


@dataclass(frozen=True)
class InfluxHistory:
    http: InfluxHttp
    registry: registry.Registry
    folded: IncrementalStats = field(default_factory=IncrementalStats, compare=False, repr=False)
    recent: Recent = field(default_factory=Recent, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return "influxdb"

    # -- quoting helpers: every query text goes through these ----------------------------------

    def _from(self, field: str) -> str:
        base = field.removesuffix(NONFINITE_SUFFIX)
        if base != field and metric_of_field(self.registry, base) is not None:
            return quote_ident(SPREAD)  # a metric's per-step non-finite count
        if metric_of_field(self.registry, field) is None and field in self._unregistered():
            return quote_ident(UNREGISTERED)
        return quote_ident(measurement_of(self.registry, field))

    def _unregistered(self) -> frozenset[str]:
        """Field keys InfluxDB holds under `unregistered` (names the registry does not know)."""
        (result,) = self.http.query([f"SHOW FIELD KEYS FROM {quote_ident(UNREGISTERED)}"])
        names = {str(row[0]) for s in result for row in s.values if row}
        return frozenset(names - {"step", "wall_time"})

    def _sources(self) -> str:
        groups = sorted({m.group for m in self.registry.metrics})
        return ", ".join(quote_ident(g) for g in groups)

    def _run_filter(self, run: str) -> str:
        if run not in self.runs():
            raise UnknownRun(f"run {run!r} is not in InfluxDB")
        return f"{quote_ident(RUN_TAG)} = {quote_string(run)}"

    @staticmethod
    def _time(lo: int, hi: int) -> str:
        return f"time >= {int(lo)}s AND time <= {int(hi)}s"

    # -- the store ------------------------------------------------------------------------------

    def runs(self) -> tuple[str, ...]:
        listed: tuple[str, ...] = self.recent.get("runs", self._list_runs)
        return listed

    def _list_runs(self) -> tuple[str, ...]:
        (result,) = self.http.query([f"SHOW TAG VALUES WITH KEY = {quote_ident(RUN_TAG)}"])
        names = {str(row[1]) for s in result for row in s.values if len(row) > 1}
        return tuple(sorted(names))

    def run_config(self, run: str) -> Mapping[str, Any]:
        where = self._run_filter(run)
        (result,) = self.http.query(
            [
                f"SELECT last({quote_ident(CONFIG_FIELD)}) FROM {quote_ident(RUN_CONFIG)} WHERE {where}"
            ]
        )
        raw = _first_value(result, "last")
        try:
            config = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            return {}
        return config if isinstance(config, dict) else {}

    def fields(self, run: str) -> tuple[str, ...]:
        self._run_filter(run)
        groups = {m.group for m in self.registry.metrics}
        (result,) = self.http.query(["SHOW FIELD KEYS"])
        names = {str(row[0]) for s in result if s.name in groups for row in s.values}
        return tuple(sorted(names - {"step", "wall_time"}))

    def series(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> Points:
        return self.series_many(run, [field], start, end, max_points)[field]

    def series_many(
        self,
        run: str,
        fields: Sequence[str],
        start: int | None,
        end: int | None,
        max_points: int,
    ) -> Mapping[str, Points]:
        """`series` of each field over one range, in at most two requests whatever the number of
        fields: the fields' edges first (which decide how each is read), then every field's
        buckets; a short range in one (`_short_series`)."""
        return self._series_many(run, fields, start, end, max_points, None)

    def rank_series(
        self, run: str, field: str, rank: int, start: int | None, end: int | None, max_points: int
    ) -> Points:
        return self._series_many(run, [field], start, end, max_points, rank)[field]

    def _ranks_in(self, run: str, source: str) -> tuple[int, ...]:
        """The ranks whose points a measurement holds for a run (kept for a moment)."""

        def read() -> tuple[int, ...]:
            (result,) = self.http.query(
                [
                    f"SHOW TAG VALUES FROM {source} WITH KEY = {quote_ident(RANK_TAG)} "
                    f"WHERE {self._run_filter(run)}"
                ]
            )
            found = {str(row[1]) for s in result for row in s.values if len(row) > 1}
            return tuple(sorted(int(r) for r in found if r.isdigit()))

        ranks: tuple[int, ...] = self.recent.get(("ranks", run, source), read)
        return ranks

    def _where(self, run: str, source: str, rank: int | None = None) -> str:
        """The run's points in `source` of the rank read (`history.ranks`), or of `rank`. The
        ranks are those of the measurement: a field only a higher rank logged beside fields
        rank 0 logs reads empty from rank 0 (one query per field would find it)."""
        where = self._run_filter(run)
        chosen = reading_rank(self._ranks_in(run, source)) if rank is None else rank
        if chosen is None:
            return where
        tag = quote_ident(RANK_TAG)
        if rank is not None:
            return f"{where} AND {tag} = {quote_string(str(chosen))}"
        # points logged without a rank (no tag: it reads as '') are read with rank 0's
        return f"{where} AND ({tag} = {quote_string(str(chosen))} OR {tag} = '')"

    def _series_many(
        self,
        run: str,
        fields: Sequence[str],
        start: int | None,
        end: int | None,
        max_points: int,
        rank: int | None,
    ) -> Mapping[str, Points]:
        names = list(dict.fromkeys(fields))
        where = self._run_filter(run)
        sources = {f: self._from(f) for f in names}
        wheres = {src: self._where(run, src, rank) for src in set(sources.values())}
        lo = 0 if start is None else max(0, start)
        hi = _MAX_STEP if end is None else min(end, _MAX_STEP)
        if not names or hi < lo:
            return {f: empty_points() for f in names}
        if start is not None and end is not None and hi - lo < _SHORT_RANGE:
            return self._short_series(wheres, sources, lo, hi, max_points)
        edge_statements = [marker_statement(where)]
        for f, source in sources.items():
            col = quote_ident(f)
            scope = f"FROM {source} WHERE {wheres[source]} AND {self._time(lo, hi)}"
            whole = f"FROM {source} WHERE {wheres[source]}"
            edge_statements += [
                f"SELECT {col} {scope} ORDER BY time ASC LIMIT 1",
                f"SELECT {col} {scope} ORDER BY time DESC LIMIT 1",
                f"SELECT {col} {whole} ORDER BY time ASC LIMIT 1",
                f"SELECT {col} {whole} ORDER BY time DESC LIMIT 1",
                count_statement(wheres[source], f),
            ]
        edges = self.http.query(edge_statements)
        marker = read_marker(edges[0])
        out: dict[str, Points] = {}
        reads: list[tuple[str, list[str], Callable[[list[list[ResultSeries]]], Points]]] = []
        for i, f in enumerate(names):
            first_in, last_in, first_all, last_all, counted = edges[1 + 5 * i : 6 + 5 * i]
            if _first_value(first_in, "time") is None:
                out[f] = empty_points()
                continue
            span = RollupSpan(
                int(_first_value(counted, "n") or 0),
                int(_first_value(first_all, "time")),
                int(_first_value(last_all, "time")),
            )
            data = (int(_first_value(first_in, "time")), int(_first_value(last_in, "time")))
            statements, read = self._series_read(
                sources[f],
                wheres[sources[f]],
                f,
                (lo, hi),
                (start, end),
                max_points,
                data,
                marker,
                span,
            )
            reads.append((f, statements, read))
        results = self.http.query([q for _, statements, _ in reads for q in statements])
        at = 0
        for f, statements, read in reads:
            out[f] = read(results[at : at + len(statements)])
            at += len(statements)
        return {f: out[f] for f in names}

    def _short_series(
        self,
        wheres: Mapping[str, str],
        sources: Mapping[str, str],
        lo: int,
        hi: int,
        max_points: int,
    ) -> dict[str, Points]:
        """Series over a range of at most `_SHORT_RANGE` steps (the cards' early-stage sketches):
        the raw points of each measurement's fields in one statement, bucketed here as InfluxDB
        buckets them. Measured on 1.6 at 1M steps, edge and aggregate statements made InfluxDB
        allocate 51 MB for the seven sketches of a request of all cards, and its garbage
        collections are what slows some of those requests; 2000 raw rows cost about 1.5 MB."""
        by_source: dict[str, list[str]] = {}
        for f, src in sources.items():
            by_source.setdefault(src, []).append(f)
        scope = self._time(lo, hi)
        results = self.http.query(
            [
                f"SELECT {', '.join(quote_ident(f) for f in names)} FROM {src} "
                f"WHERE {wheres[src]} "
                f"AND {scope}"
                for src, names in by_source.items()
            ]
        )
        out: dict[str, Points] = {}
        for (_, names), rows in zip(by_source.items(), results, strict=True):
            for f, (steps, values) in self._columns(rows, names).items():
                if not steps.size:
                    out[f] = empty_points()
                elif int(steps.max()) - int(steps.min()) + 1 <= max_points:
                    out[f] = _every_point(steps, values)
                else:
                    p = points_from(steps, values)
                    out[f] = bucket_means(p.steps, p.values, bucket_plan(lo, hi, max_points))
        return out

    def _series_read(
        self,
        source: str,
        where: str,
        field: str,
        scope_range: tuple[int, int],
        asked: tuple[int | None, int | None],
        max_points: int,
        data: tuple[int, int],
        marker: RollupMarker,
        span: RollupSpan,
    ) -> tuple[list[str], Callable[[list[list[ResultSeries]]], Points]]:
        """How one field's series over [lo, hi] is read, given where its points in the range
        start and end (`data`): its statements and what makes its points of their results."""
        col = quote_ident(field)
        (lo, hi), (start, end) = scope_range, asked
        data_first, data_last = data
        if data_last - data_first + 1 <= max_points:
            scope = f"FROM {source} WHERE {where} AND {self._time(lo, hi)}"
            return [f"SELECT {col} {scope}"], lambda r: _every_point(*self._column(r[0], field))
        first = data_first if start is None else lo
        last = data_last if end is None else hi
        plan = bucket_plan(first, last, max_points)
        # the outbox's rule: a level only where its blocks hold enough values on average
        if (
            plan.level in ROLLUP_LEVELS
            and marker.keeps(plan.level, field)
            and span.dense_enough(plan.level)
        ):
            statements = rollup_statements(
                source, where, field, lo, None if end is None else hi, plan
            )
            return statements, lambda results: rollup_points(results, plan, max_points)
        size = plan.size

        def raw_buckets(results: list[list[ResultSeries]]) -> Points:
            count = int(_first_value(results[0], "count") or 0)
            steps_out: list[int] = []
            values_out: list[float] = []
            for s in results[1]:
                it, ist, iv = s.column("time"), s.column("step"), s.column("value")
                for row in s.values:
                    value = None if iv is None else row[iv]
                    if value is None:
                        continue
                    step = row[ist] if ist is not None and row[ist] is not None else row[it or 0]
                    steps_out.append(int(step))
                    values_out.append(float(value))
            p = points_from(steps_out, values_out, size, count)
            return Points(p.steps[:max_points], p.values[:max_points], size, count)

        statements = [
            f"SELECT count({col}) FROM {source} WHERE {where} AND {self._time(lo, hi)}",
            f'SELECT last("step") AS "step", mean({col}) AS "value" '
            f"FROM {source} WHERE {where} AND {col} = {col} AND {self._time(first, last)} "
            f"GROUP BY time({size}s, {plan.origin % size}s) fill(none)",
        ]
        return statements, raw_buckets

    @staticmethod
    def _column(rows: list[ResultSeries], field: str) -> tuple[IntArray, FloatArray]:
        return InfluxHistory._columns(rows, [field])[field]

    @staticmethod
    def _columns(
        rows: list[ResultSeries], fields: Sequence[str]
    ) -> dict[str, tuple[IntArray, FloatArray]]:
        """Each field's (step, value) pairs in a statement's result, rows without a number in
        the field left out."""
        steps: dict[str, list[int]] = {f: [] for f in fields}
        values: dict[str, list[float]] = {f: [] for f in fields}
        for s in rows:
            it = s.column("time")
            if it is None or not s.values:
                continue
            columns = list(zip(*s.values, strict=False))  # the rows turned once, in C
            times = columns[it]
            for f in fields:
                iv = s.column(f)
                if iv is None:
                    continue
                cells = columns[iv]
                # `type(...) in`: a bool is no number here (and `isinstance` per value is slow)
                kept = [i for i, v in enumerate(cells) if type(v) in _NUMBERS]
                if len(kept) == len(cells):
                    steps[f] += times
                    values[f] += cells
                else:
                    steps[f] += [times[i] for i in kept]
                    values[f] += [cells[i] for i in kept]
        return {
            f: (np.asarray(steps[f], dtype=np.int64), np.asarray(values[f], dtype=np.float64))
            for f in fields
        }

    def window(self, run: str, field: str, last_n: int) -> Points:
        return self.windows(run, [field], last_n)[field]

    def windows(self, run: str, fields: Sequence[str], last_n: int) -> Mapping[str, Points]:
        where = self._run_filter(run)
        names = list(dict.fromkeys(fields))
        if not names:
            return {}
        # The fields of one measurement in one statement: its newest `last_n` rows hold each
        # field's newest `last_n` values unless the field is logged less often than the others
        # (fewer values while the rows reached the limit); only such a field is asked alone.
        located = {f: self._from(f) for f in names}
        marker, blocks, keys = self.http.query(
            [*window_bounds_statements(where, names), "SHOW FIELD KEYS"]
        )
        # a field no run has logged into its measurement has no window: not asked for (every
        # statement costs InfluxDB about a megabyte of garbage, whatever it finds)
        held = {(quote_ident(s.name), str(row[0])) for s in keys for row in s.values if row}
        nothing = (np.zeros(0, np.int64), np.zeros(0, np.float64))
        found = {f: nothing for f, src in located.items() if (src, f) not in held}
        by_source: dict[str, list[str]] = {}
        for f, src in located.items():
            if f not in found:
                by_source.setdefault(src, []).append(f)
        limit = f"ORDER BY time DESC LIMIT {int(last_n)}"
        sources = list(by_source)
        bounds = read_window_bounds([marker, blocks], by_source, last_n)

        def newest(src: str, bounded: bool) -> str:
            since = f" AND time >= {bounds[src]}s" if bounded and src in bounds else ""
            columns = ", ".join(quote_ident(f) for f in by_source[src])
            return f"SELECT {columns} FROM {src} WHERE {self._where(run, src)}{since} {limit}"

        results = self.http.query_spread([newest(src, True) for src in sources], _WINDOW_REQUESTS)
        short = [
            i
            for i, src in enumerate(sources)
            if src in bounds and sum(len(r.values) for r in results[i]) < last_n
        ]
        if short:  # a bound too tight (rollups behind the points): without it
            again = self.http.query([newest(sources[i], False) for i in short])
            for i, rows in zip(short, again, strict=True):
                results[i] = rows
        alone: list[tuple[str, str]] = []
        for src, rows in zip(sources, results, strict=True):
            full = sum(len(r.values) for r in rows) >= last_n
            for f, (steps, values) in self._columns(rows, by_source[src]).items():
                if full and len(steps) < last_n:
                    alone.append((src, f))
                else:
                    found[f] = (steps, values)
        if alone:
            again = self.http.query(
                [
                    f"SELECT {quote_ident(f)} FROM {src} WHERE {self._where(run, src)} {limit}"
                    for src, f in alone
                ]
            )
            for (_, f), rows in zip(alone, again, strict=True):
                found[f] = self._column(rows, f)
        return {f: _merge_duplicates(*found[f]) for f in names}

    def stats(self, run: str, fields: Sequence[str]) -> Mapping[str, FieldStats]:
        where = self._run_filter(run)
        names = list(dict.fromkeys(fields))
        if not names:
            return {}
        # the marker is read with the blocks, not kept for a moment: a level the exporter stops
        # keeping must be read from the raw points from then on. Fields are read from the rank
        # their measurement's points are read from (`history.ranks`): grouped by it.
        groups: dict[str, list[str]] = {}
        for name in names:
            groups.setdefault(self._where(run, self._from(name)), []).append(name)
        out: dict[str, FieldStats] = {}
        for chosen, group in groups.items():
            rolled = rollup_stats(self.http, chosen, group, self._from, where)
            if rolled is None:
                rolled = dict(self.folded.stats(self.http, run, chosen, group, self._from))
            out.update(rolled)
        return {name: out[name] for name in names}

    def events(self, run: str, limit: int) -> tuple[Event, ...]:
        where = self._run_filter(run)
        (result,) = self.http.query(
            [
                f"SELECT * FROM {quote_ident(EVENTS)} WHERE {where} ORDER BY time ASC LIMIT {int(limit)}"
            ]
        )
        events: list[Event] = []
        for s in result:
            for row in s.values:
                record = dict(zip(s.columns, row, strict=False))
                extra = {k: v for k, v in record.items() if k not in _EVENT_SKIP and v is not None}
                events.append(
                    Event(
                        int(record.get("time") or 0),
                        str(record.get("kind") or s.tags.get("kind") or ""),
                        str(record.get("text") or ""),
                        extra,
                    )
                )
        events.sort(key=lambda e: e.step)
        return tuple(events)

    def logged_fields(self, run: str) -> Mapping[str, str]:
        # InfluxDB keeps field keys per measurement, not per run: a field another run logged is
        # listed too and its series here is empty.
        self._run_filter(run)
        groups = {m.group for m in self.registry.metrics} | {UNREGISTERED}
        (result,) = self.http.query(["SHOW FIELD KEYS"])
        out: dict[str, str] = {}
        for s in result:
            if s.name not in groups:
                continue
            for row in s.values:
                name = str(row[0])
                if name not in ("step", "wall_time") and (
                    s.name != UNREGISTERED or name not in out
                ):
                    out[name] = s.name
        return dict(sorted(out.items()))

    def run_info(self, run: str) -> RunInfo:
        # InfluxDB holds points, not the outbox's run record: activity is the wall time of the
        # run's newest point, its start that of its oldest. A run several ranks logged has its
        # ranks' ends as `RANK_END` events (no leases: a rank without an end is judged by the
        # run's activity).
        where = self._run_filter(run)
        sources = self._sources()
        first_r, last_r, project_r, rank_r, end_r = self.http.query(
            [
                f'SELECT first("wall_time") FROM {sources} WHERE {where}',
                f'SELECT last("wall_time") FROM {sources} WHERE {where}',
                f"SHOW TAG VALUES WITH KEY = {quote_ident(PROJECT_TAG)} WHERE {where}",
                f"SHOW TAG VALUES WITH KEY = {quote_ident(RANK_TAG)} WHERE {where}",
                f"SELECT {quote_ident(STATE_FIELD)}, {quote_ident(TEXT_FIELD)}, "
                f"{quote_ident(WALL_TIME_FIELD)}, {quote_ident(RANK_TAG)} "
                f"FROM {quote_ident(EVENTS)} WHERE {where} "
                f"AND {quote_ident(KIND_TAG)} = {quote_string(RANK_END)}",
            ]
        )
        firsts = [float(r[1]) for s in first_r for r in s.values if len(r) > 1 and r[1] is not None]
        lasts = [float(r[1]) for s in last_r for r in s.values if len(r) > 1 and r[1] is not None]
        projects = sorted({str(r[1]) for s in project_r for r in s.values if len(r) > 1})
        ranks = _rank_records(rank_r, end_r)
        return RunInfo(
            project=projects[0] if projects else None,
            created=min(firsts) if firsts else None,
            last_activity=max(lasts) if lasts else None,
            recorded=Recorded(ranks=ranks) if ranks else None,
        )

    def rank_spread(
        self, run: str, field: str, start: int | None, end: int | None, max_points: int
    ) -> RankSpread:
        source = self._from(field)
        logged = self._ranks_in(run, source)
        if len(logged) < 2:
            return RankSpread(logged)
        col, every = quote_ident(field), self._run_filter(run)
        lo = 0 if start is None else max(0, start)
        hi = _MAX_STEP if end is None else min(end, _MAX_STEP)
        # the plan `series` reads the line with (its rank's first and last step in the range)
        scope = f"FROM {source} WHERE {self._where(run, source)} AND {self._time(lo, hi)}"
        first_r, last_r = self.http.query(
            [
                f"SELECT {col} {scope} ORDER BY time ASC LIMIT 1",
                f"SELECT {col} {scope} ORDER BY time DESC LIMIT 1",
            ]
        )
        first, last = _first_value(first_r, "time"), _first_value(last_r, "time")
        if first is None or last is None:
            return RankSpread(logged)
        if int(last) - int(first) + 1 <= max_points:
            plan = BucketPlan(int(first), 1)
        else:
            plan = bucket_plan(
                int(first) if start is None else lo, int(last) if end is None else hi, max_points
            )
        top = int(last) if end is None else hi
        (rows,) = self.http.query(
            [
                f'SELECT min({col}) AS "low", max({col}) AS "high" FROM {source} '
                f"WHERE {every} AND {self._time(max(lo, plan.origin), top)} "
                f"GROUP BY time({plan.size}s, {plan.origin % plan.size}s) fill(none)"
            ]
        )
        steps: list[int] = []
        lows: list[float] = []
        highs: list[float] = []
        for s in rows:
            it, il, ih = s.column("time"), s.column("low"), s.column("high")
            if it is None or il is None or ih is None:
                continue
            for row in s.values:
                if row[il] is not None and row[ih] is not None:
                    steps.append(int(row[it]))
                    lows.append(float(row[il]))
                    highs.append(float(row[ih]))
        return RankSpread(
            logged,
            plan.origin,
            plan.size,
            np.asarray(steps, dtype=np.int64),
            np.asarray(lows, dtype=np.float64),
            np.asarray(highs, dtype=np.float64),
        )

    def clock(self, run: str, field: str, samples: int) -> Points:
        source, where = self._from(field), self._run_filter(run)
        col = quote_ident(field)
        first_r, last_r = self.http.query(
            [
                f"SELECT first({col}) FROM {source} WHERE {where}",
                f"SELECT last({col}) FROM {source} WHERE {where}",
            ]
        )
        first, last = _first_value(first_r, "time"), _first_value(last_r, "time")
        if first is None or last is None:
            return empty_points()
        size = max(1, -(-(int(last) - int(first) + 1) // max(1, samples)))
        # The first point of each bucket (the store's clock starts at the series' first step, as
        # the embedded store's does) and the series' last point.
        rows, tail = self.http.query(
            [
                f'SELECT first("step") AS "step", first("wall_time") AS "wall" FROM {source} '
                f"WHERE {where} AND {self._time(int(first), int(last))} "
                f"GROUP BY time({size}s, {int(first) % size}s) fill(none)",
                f'SELECT last("step") AS "step", last("wall_time") AS "wall" FROM {source} '
                f"WHERE {where}",
            ]
        )
        rows = rows + tail
        steps: list[int] = []
        walls: list[float] = []
        for s in rows:
            ist, iw = s.column("step"), s.column("wall")
            if ist is None or iw is None:
                continue
            for row in s.values:
                if row[ist] is not None and row[iw] is not None:
                    steps.append(int(row[ist]))
                    walls.append(float(row[iw]))
        return points_from(steps, walls)

    def latest(self, run: str) -> Latest:
        where = self._run_filter(run)
        groups = sorted({m.group for m in self.registry.metrics})
        sources = ", ".join(quote_ident(g) for g in groups)
        (result,) = self.http.query([f'SELECT last("step") FROM {sources} WHERE {where}'])
        steps = [int(row[0]) for s in result for row in s.values if row and row[0] is not None]
        return Latest(max(steps) if steps else None)
