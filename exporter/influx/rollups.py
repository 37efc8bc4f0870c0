"""Step rollups kept in InfluxDB 1.x beside the raw points, as the outbox keeps them in sqlite.

For each series (measurement, run, project, rank, gpu: the raw points' tags) and each field, every
block of `ROLLUP_LEVELS` steps (timestamp = the block's first step) holds `n:<field>`,
`sum:<field>`, `min:<field>`, `max:<field>` and `last:<field>` (count, sum, lowest, highest value
and last step of the field's finite values in the block) and `mean:<field>` (`ROLLUP_MEAN`: the
block's sum over its count) in measurement `rollup_measurement(level)`. A reader sums the first
ones over series and blocks: a 1000-point series or a whole-run mean reads a bounded number of
points however long the run. The mean is for the dashboards' charts, which average it over a
bucket's blocks in one flat statement (`grafana.dashboards_gen.queries.rollup_query`). Every path
below writes it beside the others: the Python sums, `mean(f::float)` from the raw points, and
`sum("sum:f") / sum("n:f")` for the 4096-step level from the 64-step one. `ROLLUP_MARKER` holds one point per run whose rollups are
complete (written once every earlier point of the run has been rolled up), and the
`ROLLUP_VERSION` they were written by: a writer finding an older version rolls the run up again
whole, as it does a run without the marker (version 1 had no `mean:<field>`).

Levels a field is too sparse for are not kept. Once a field has spanned `_JUDGE_BLOCKS` blocks
of a level here with fewer than `MIN_BLOCK_POINTS` values per block on average (the outbox's rule,
and the readers': they would not use that level), the writer adds `unkept_key(level, field)` to
the run's marker point, in the request that first leaves those lines out, and writes no more of
them (nor of any finer level). Readers do not use a level a field has that mark for; they read its
raw points, which are few for such a field. Without this a log stepping by 128 or 2048 (PPO's
usual rollout length) would send five rollup fields for every raw value. The marker's fields
merge: for points of one measurement, tag set and timestamp "InfluxDB creates a union of the old
and new field sets" (docs.influxdata.com/influxdb/v2/write-data/best-practices/duplicate-points/;
1.6 here does the same: `tests/grafana/test_datasource_influx_rollups.py` writes a mark beside
the version and reads both), so a mark any rank writes holds for the run. A writer
learns a run's marks at its first batch for it.

How they are kept (`InfluxRollups.sent`, called once after a batch was written, on the writer's
thread):
- the batch's finite numbers are sorted per series and field in numpy, and summed per block of
  each level (a step sent twice counts the value sent last, the one InfluxDB keeps);
- a block this writer knows whole (its steps past the newest step InfluxDB held for that field
  when the writer first saw the series) takes those sums in Python: the series' newest block of
  each level is kept open in memory, and each block touched is written as one line;
- every other block the batch touched (a resume re-logging steps, the block a restarted writer
  goes on in, the first batch of a series in this process, lines InfluxDB refused) is recomputed
  by InfluxDB itself: `SELECT count(f), sum(f::float), ... INTO <rollup> ... GROUP BY time(64s), *`
  over those blocks of the writer's own series (up to the newest step handled), the 4096-step
  level from the 64-step one (from the raw points for a field whose 64-step level is not kept),
  and the open block is read back. Both are idempotent (same timestamps and tags overwrite): a
  re-logged step is recomputed, never added twice;
- a run without the marker (written before rollups existed) is backfilled the same way, whole,
  at its first batch; then the marker is written.
One writer per series is assumed (a trainer process per rank, or one import); several ranks of a
run each keep their own series' rollups, and readers sum them.

Why this and not the alternatives (evidence on this 2-core machine, InfluxDB 1.6.7, other work
running; 30 metrics in 9 measurements):
- Continuous queries (1.x) and tasks (2.x) do not apply: a CQ covers "the time range between
  now() and now() minus the GROUP BY time() interval" of the server's clock
  (docs.influxdata.com/influxdb/v1.1/query_language/continuous_queries/, "Schedule and
  coverage"), while these points are stamped with the training step (1970): they would never
  see a step, nor a resume rewriting old steps; RESAMPLE FOR the whole of 1970 would rescan every
  run at every interval. A 2.x task is a scheduled Flux script whose usual window,
  `range(start: -task.every)`, is relative to the server clock as well (not run here: no 2.x).
- `SELECT ... INTO` for every batch's blocks (no Python sums): 333-step batches of 10,000 values
  took 29.7 ms to write and 39.4 ms (one statement per measurement, whose last step is then per
  measurement, not per field) or 91.9 ms (one per field) to roll up: the import would run at a half
  to a quarter of its speed.
- These Python sums, for `rlvitals import` (`bench/bench_import.py`, quiet machine, against
  POSTing the same bodies): 0.81 of the floor for 200k scalars logged every 128 steps, 0.85 for
  1M, 0.87 for 1M logged at every step, with the rollups on their own thread and connection
  (`exporter.influx.rollup_worker`). Keeping 64-step blocks of the sparse fields too, on the sender's
  thread, it was 0.44: five rollup fields per raw value, summed and rendered in Python.

Failures never reach the writer: a rollup write or query that fails is logged and its blocks are
owed (recomputed by InfluxDB at the next call). Not kept: a process killed between writing a batch
and its rollups leaves those blocks stale until they are written again (an import saves a batch's
read positions only once its rollups are written, so running it again writes those steps again,
and their blocks are recomputed: they are at or before the newest step InfluxDB holds).
InfluxDB 2.x gets no rollups (whether its v1 API runs `SELECT ... INTO` was not checked here):
`make_rollups` returns None and readers use the raw points.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import operator
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..config import ExporterSettings, redact_url
from ..schema import (
    EVENTS,
    GPU_TAG,
    MARKER_VERSION_FIELD,
    MIN_BLOCK_POINTS,
    NO_RANK,
    PROJECT_TAG,
    RANK_TAG,
    ROLLUP_LEVELS,
    ROLLUP_MARKER,
    ROLLUP_MEAN,
    ROLLUP_STATS,
    RUN_CONFIG,
    RUN_TAG,
    PendingPoints,
    SampleRow,
    is_rollup_measurement,
    rollup_key,
    rollup_measurement,
    unkept_key,
    unkept_level,
)
from .lineprotocol import escape_field_key, format_line, join_lines
from .writers import Writer

__all__ = [
    "ROLLUP_VERSION",
    "InfluxRollups",
    "RollupQueryError",
    "SentColumns",
    "SentPart",
    "make_rollups",
    "rollups_wanted",
]

_log = logging.getLogger(__name__)

ROLLUP_VERSION = 2
"""The rollups' layout, in each run's marker: 2 added `mean:<field>` to every block."""
_CACHE_LIMIT = 10_000
_SKIP = frozenset({RUN_CONFIG, EVENTS, ROLLUP_MARKER})
_BACKFILL_STEPS = 16 * ROLLUP_LEVELS[-1]  # steps per backfill statement
_STATEMENTS_PER_REQUEST = 200
_FINE, _COARSE = ROLLUP_LEVELS
_JUDGE_BLOCKS = 8
"""Blocks of a level a field must span, as seen by one writer, before it judges the field too
sparse for that level (at 64 steps: 512 steps, a few values even at a stride of 128)."""


class RollupQueryError(Exception):
    """InfluxDB refused or did not answer a rollup query."""


def _ident(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class _Query:
    """`POST /query` on InfluxDB 1.x with the writer's credentials (basic auth)."""

    url: str
    database: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 30.0

    def run(self, statements: Sequence[str]) -> list[list[dict[str, object]]]:
        body = urllib.parse.urlencode(
            {"q": ";\n".join(statements), "db": self.database, "epoch": "s"}
        ).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.username:
            pair = f"{self.username}:{self.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        request = urllib.request.Request(
            self.url.rstrip("/") + "/query", data=body, headers=headers, method="POST"
        )
        where = f"InfluxDB at {redact_url(self.url)} (database {self.database!r})"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise RollupQueryError(f"{where} answered {exc.code}: {detail}") from exc
        except (OSError, ValueError) as exc:
            raise RollupQueryError(f"{where} did not answer a rollup query: {exc}") from exc
        out: list[list[dict[str, object]]] = [[] for _ in statements]
        for result in payload.get("results") or ():
            if "error" in result:
                raise RollupQueryError(f"{where} refused a rollup query: {result['error']}")
            index = int(result.get("statement_id", 0))
            if 0 <= index < len(out):
                out[index] = list(result.get("series") or ())
        return out


_Key = tuple[str, str, int, str]  # measurement, run, rank, gpu
_Acc = dict[str, list[float]]  # field -> [n, sum, min, max, last step]
_Dirty = dict[_Key, dict[int, dict[str, set[int]]]]  # series -> level -> field -> blocks


class _Series:
    """What this writer knows of one series: the newest step InfluxDB holds for it (`learned`
    when first seen, then per field as batches come: a batch may end inside a step's rows) and,
    per level, the open block it has summed whole (None: that block is recomputed by InfluxDB),
    and the block of each field whose newest step is in an older one, summed whole (`lag`)."""

    __slots__ = ("fields", "frontier", "lag", "last", "learned", "open")

    def __init__(self, frontier: int) -> None:
        self.learned = frontier
        self.frontier = frontier  # the newest step of any field
        self.last: dict[str, int] = {}
        self.open: dict[int, tuple[int, _Acc] | None] = dict.fromkeys(ROLLUP_LEVELS)
        # A field that trails the others (a value derived from a step's rows is stored after
        # them, so a batch can end between the two): its block is kept too, or each batch would
        # have InfluxDB recompute it (measured: 26 queries in a 20,000-step run)
        self.lag: dict[int, dict[str, tuple[int, list[float]]]] = {
            level: {} for level in ROLLUP_LEVELS
        }
        # the fields sent for it: a rollup point holds the fields of every measurement of the run
        self.fields: set[str] = set()

    def forget_open(self) -> None:
        """Nothing summed here is known whole any more (recomputed by InfluxDB instead)."""
        self.open = dict.fromkeys(ROLLUP_LEVELS)
        self.lag = {level: {} for level in ROLLUP_LEVELS}


@dataclass(frozen=True)
class _Entry:
    """One field's values in one 64-step block of one batch."""

    field: str
    block: int
    n: float
    total: float
    low: float
    high: float
    first: int
    last: int


_VALUE, _STEP = operator.itemgetter(6), operator.itemgetter(2)
_COMBO = operator.itemgetter(3, 0, 1, 4, 5)  # measurement, run, rank, gpu, field
_SHIFT = 40  # a batch's (series, field) number above the 64-step block number
_MAX_BLOCK = 1 << _SHIFT


@dataclass(frozen=True)
class SentColumns:
    """Samples sent as columns (a direct import's steps read a column at a time): the value of
    column j at `steps[i]` is `values[i, j]`, for run `run` and rank `rank`. Every value is a
    finite float."""

    run: str
    rank: int
    steps: npt.NDArray[np.int64]
    columns: Sequence[tuple[str, str, str]]  # (measurement, gpu, field)
    values: npt.NDArray[np.float64]


SentPart = Sequence[SampleRow] | SentColumns | PendingPoints
"""What one request carried, in the order it carried it: rows, samples as columns, or points as
the store read them."""


@dataclass(frozen=True)
class _Batch:
    """A batch's finite numbers, one per (series, field, step): the value sent last where a key
    was sent twice (InfluxDB keeps that one), sorted by (series and field, step)."""

    combos: list[tuple[str, str, int, str, str]]  # measurement, run, rank, gpu, field
    codes: npt.NDArray[np.int64]  # index into combos
    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]

    def sums(
        self, level: int, keep: npt.NDArray[np.bool_] | None = None
    ) -> dict[_Key, list[_Entry]]:
        """Sums per series, field and block of `level` steps (of the combos `keep` marks)."""
        codes, steps, values = self.codes, self.steps, self.values
        if keep is not None and not keep.all():
            chosen = keep[codes]
            codes, steps, values = codes[chosen], steps[chosen], values[chosen]
        if codes.size == 0:
            return {}
        group = (codes << _SHIFT) | (steps // level)  # sorted already: codes, then steps
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], group.size]
        out: dict[_Key, list[_Entry]] = {}
        combos = self.combos
        for g, n, total, low, high, first, last in zip(
            group[starts].tolist(),
            (ends - starts).tolist(),
            np.add.reduceat(values, starts).tolist(),
            np.minimum.reduceat(values, starts).tolist(),
            np.maximum.reduceat(values, starts).tolist(),
            steps[starts].tolist(),
            steps[ends - 1].tolist(),
            strict=True,
        ):
            measurement, run, rank, gpu, name = combos[g >> _SHIFT]
            out.setdefault((measurement, run, rank, gpu), []).append(
                _Entry(name, g & (_MAX_BLOCK - 1), float(n), total, low, high, first, last)
            )
        return out

    def spans(self) -> list[tuple[int, int, int, int]]:
        """(combo, count, first step, last step) of each combo the batch holds."""
        codes, steps = self.codes, self.steps
        if codes.size == 0:
            return []
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        ends = np.r_[starts[1:], codes.size]
        return list(
            zip(
                codes[starts].tolist(),
                (ends - starts).tolist(),
                steps[starts].tolist(),
                steps[ends - 1].tolist(),
                strict=True,
            )
        )


def _block_sums(
    rows: Sequence[SampleRow], columns: Sequence[SentColumns] = ()
) -> dict[_Key, list[_Entry]]:
    """`_part_sums` of `rows`, then `columns`."""
    return _part_sums([rows, *columns])


def _part_sums(parts: Sequence[SentPart]) -> dict[_Key, list[_Entry]]:
    """The finite numbers of a batch summed per series, field and 64-step block."""
    batch = _batch(parts)
    return {} if batch is None else batch.sums(_FINE)


def _batch(parts: Sequence[SentPart]) -> _Batch | None:
    """The finite numbers the parts hold, in numpy (a sort and a few reductions: no Python work
    per row beyond transposing the batch). A key sent twice counts with the value of the later
    part (InfluxDB keeps the value sent last). None when there are none."""
    codes_parts: list[npt.NDArray[np.int64]] = []
    steps_parts: list[npt.NDArray[np.int64]] = []
    values_parts: list[npt.NDArray[np.float64]] = []
    usable_parts: list[npt.NDArray[np.bool_]] = []
    index: dict[tuple[str, str, int, str, str], int] = {}
    for part in parts:
        if isinstance(part, SentColumns):
            _add_columns(part, index, codes_parts, steps_parts, values_parts, usable_parts)
            continue
        if isinstance(part, PendingPoints):
            _add_points(part, index, codes_parts, steps_parts, values_parts, usable_parts)
            continue
        rows = part
        if not rows:
            continue
        values, usable = _finite(list(map(_VALUE, rows)))
        row_combos = list(map(_COMBO, rows))
        for c in dict.fromkeys(row_combos):
            index.setdefault(c, len(index))
        codes_parts.append(
            np.fromiter(map(index.__getitem__, row_combos), dtype=np.int64, count=len(rows))
        )
        steps_parts.append(np.fromiter(map(_STEP, rows), dtype=np.int64, count=len(rows)))
        values_parts.append(values)
        usable_parts.append(usable)
    if not codes_parts:
        return None
    combos = list(index)
    codes = np.concatenate(codes_parts)
    steps = np.concatenate(steps_parts)
    values = np.concatenate(values_parts)
    usable = np.concatenate(usable_parts)
    skip = np.array([c[0] in _SKIP for c in combos], dtype=bool)
    usable &= ~skip[codes] & (steps >= 0) & (steps // _FINE < _MAX_BLOCK)
    if not usable.all():
        codes, steps, values = codes[usable], steps[usable], values[usable]
    if codes.size == 0:
        return None
    order = np.lexsort((steps, codes))  # stable: a step's rows stay in the order they were sent
    codes, steps, values = codes[order], steps[order], values[order]
    # a field logged twice at one step in a batch: InfluxDB keeps the value sent last
    last_of_step = np.r_[(codes[1:] != codes[:-1]) | (steps[1:] != steps[:-1]), True]
    if not last_of_step.all():
        codes, steps, values = codes[last_of_step], steps[last_of_step], values[last_of_step]
    return _Batch(combos, codes, steps, values)


def _add_columns(
    part: SentColumns,
    index: dict[tuple[str, str, int, str, str], int],
    codes_parts: list[npt.NDArray[np.int64]],
    steps_parts: list[npt.NDArray[np.int64]],
    values_parts: list[npt.NDArray[np.float64]],
    usable_parts: list[npt.NDArray[np.bool_]],
) -> None:
    width, height = len(part.columns), len(part.steps)
    if not width or not height:
        return
    codes = np.array(
        [index.setdefault((m, part.run, part.rank, g, f), len(index)) for m, g, f in part.columns],
        dtype=np.int64,
    )
    # row-major, as the lines were sent: step by step, each step's columns in order
    codes_parts.append(np.tile(codes, height))
    steps_parts.append(np.repeat(np.asarray(part.steps, dtype=np.int64), width))
    values_parts.append(np.asarray(part.values, dtype=np.float64).reshape(-1))
    usable_parts.append(np.ones(width * height, dtype=bool))


def _add_points(
    part: PendingPoints,
    index: dict[tuple[str, str, int, str, str], int],
    codes_parts: list[npt.NDArray[np.int64]],
    steps_parts: list[npt.NDArray[np.int64]],
    values_parts: list[npt.NDArray[np.float64]],
    usable_parts: list[npt.NDArray[np.bool_]],
) -> None:
    if not len(part):
        return
    fields, tags, steps = part.numbers
    # a series and field per (run field, tag set) pair the batch holds: named once each
    width = int(tags.max()) + 1
    pairs, of_row = np.unique(fields * width + tags, return_inverse=True)
    codes = np.empty(len(pairs), dtype=np.int64)
    for k, pair in enumerate(pairs.tolist()):
        run, name = part.fields[pair // width]
        measurement, rank, gpu = part.tags[pair % width]
        codes[k] = index.setdefault((measurement, run, rank, gpu, name), len(index))
    values, usable = _finite(part.values)
    codes_parts.append(codes[of_row.reshape(-1)])
    steps_parts.append(steps)
    values_parts.append(values)
    usable_parts.append(usable)


def _finite(
    values: Sequence[object],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """A part's values as floats, and which of them are finite numbers (rolled up)."""
    array = np.array(values)
    if array.dtype == np.float64:
        return array, np.isfinite(array)
    # text among the numbers (numpy would read "1.5" as a number: a string field), or a NULL
    numbers = [_numeric(v) for v in values]
    usable = np.array([v is not None for v in numbers])
    return np.array([math.nan if v is None else v for v in numbers], dtype=np.float64), usable


def _numeric(value: object) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int:
        return float(value)
    return None


def _capped(
    state: _Series | None, name: str, blocks: set[int], level: int
) -> list[tuple[int, int]]:
    """`_ranges` of the blocks up to the field's newest step this writer handled."""
    newest = None if state is None else state.last.get(name, state.frontier)
    cap = _MAX_BLOCK * _FINE if newest is None else newest + 1
    return [(lo, min(hi, cap)) for lo, hi in _ranges(blocks, level) if lo < cap]


def _ranges(blocks: Iterable[int], level: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) step ranges covering the blocks."""
    out: list[tuple[int, int]] = []
    for b in sorted(set(blocks)):
        lo, hi = b * level, (b + 1) * level
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


class InfluxRollups:
    """Keeps the rollups of what one writer sends; call `sent` after each successful write."""

    def __init__(self, query: _Query, writer: Writer, retention_policy: str | None = None) -> None:
        self._query = query
        self._writer = writer
        self._rp = f"{_ident(retention_policy)}." if retention_policy else ""
        self._series: dict[_Key, _Series] = {}
        self._covered: set[str] = set()  # runs whose marker this writer has seen or written
        # blocks to recompute on the server: (measurement, run, rank, gpu) -> level -> field -> blocks
        self._owed: _Dirty = {}  # blocks a failed call left to recompute
        self._failing = False
        self._prefixes: dict[tuple[object, ...], str] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        # (run, field) -> levels not kept (in the run's marker, or about to be written there)
        self._unkept: dict[tuple[str, str], set[int]] = {}
        self._seen: dict[tuple[str, str], list[int]] = {}  # (run, field) -> count, first, last
        self._unsent_marks: dict[str, dict[str, int]] = {}  # run -> marker field -> step

    def sent(
        self,
        rows: Sequence[SampleRow],
        projects: Mapping[str, str | None],
        *,
        exact: bool = True,
        parts: Sequence[SentPart] | None = None,
    ) -> None:
        """`rows` were written, or with `parts` what they hold in their order (`exact` False:
        some of their lines may have been refused, so their blocks are recomputed from what
        InfluxDB holds). Never raises."""
        self._apply([rows] if parts is None else parts, projects, exact)

    @property
    def knows_series(self) -> bool:
        """Whether a batch with numbers was rolled up (its series' newest steps learnt)."""
        return bool(self._series)

    def keeps(self, run: str, field_name: str, level: int) -> bool:
        """Whether this writer keeps `level` blocks of the field (False once it found the field
        too sparse for them: see the module's docstring)."""
        return level not in self._unkept.get((run, field_name), ())

    def _apply(
        self, parts: Sequence[SentPart], projects: Mapping[str, str | None], exact: bool
    ) -> None:
        try:
            self._sent(parts, projects, exact)
            if self._failing:
                self._failing = False
                _log.warning("rlvitals: InfluxDB rollups up to date again")
        except Exception as exc:  # the raw points are written; rollups are owed, not fatal
            if not self._failing:
                self._failing = True
                _log.warning(
                    "rlvitals: step rollups not written (%s: %s); their blocks are recomputed "
                    "by InfluxDB at the next write",
                    type(exc).__name__,
                    exc,
                )

    # -- internals -----------------------------------------------------------------------------

    def _sent(
        self, parts: Sequence[SentPart], projects: Mapping[str, str | None], exact: bool
    ) -> None:
        batch = _batch(parts)
        if batch is None and not self._owed and not self._unsent_marks:
            return
        dirty, self._owed = self._owed, {}
        grouped: dict[_Key, dict[int, list[_Entry]]] = {}
        lasts: dict[_Key, dict[str, int]] = {}
        try:
            backfilled: set[str] = set()
            fresh: set[str] = set()
            if batch is not None:
                for run in sorted({c[1] for c in batch.combos} - self._covered):
                    found = self._cover(run, batch if exact else None)
                    if found == "fresh":
                        fresh.add(run)
                    elif found == "backfilled":
                        backfilled.add(run)
                spans = batch.spans()
                self._judge(batch, spans)
                for code, _, _, last in spans:
                    m, run, rank, gpu, name = batch.combos[code]
                    lasts.setdefault((m, run, rank, gpu), {})[name] = last
                for level in ROLLUP_LEVELS:
                    keep = np.array([self.keeps(c[1], c[4], level) for c in batch.combos])
                    for key, entries in batch.sums(level, keep).items():
                        grouped.setdefault(key, {lv: [] for lv in ROLLUP_LEVELS})[level] = entries
            new = [k for k in grouped if k not in self._series and k[1] not in fresh]
            if new:
                self._learn(new)
            for key in grouped:
                if key[1] in fresh:  # InfluxDB holds nothing of it but this batch
                    self._series.setdefault(key, _Series(-1))
            lines = self._mark_lines()
            for key, by_level in grouped.items():
                state = self._series[key]
                for entries in by_level.values():
                    state.fields.update(e.field for e in entries)
                if key in new or not exact:
                    # what InfluxDB held in these blocks before this batch is unknown here
                    if key[1] not in backfilled:  # (a backfill just summed all of it)
                        for level, entries in by_level.items():
                            _owe(dirty, key, level, entries)
                    state.forget_open()
                    _advance(state, lasts[key])
                    continue
                lines += self._fold(key, state, by_level, lasts[key], projects.get(key[1]), dirty)
            # complete once this request is in
            lines += [
                _marker_line(run, {MARKER_VERSION_FIELD: ROLLUP_VERSION}) for run in sorted(fresh)
            ]
            if lines:
                self._writer.write(join_lines(lines))
            self._unsent_marks.clear()
            if dirty:
                self._recompute(dirty)
            self._reopen(dirty, [k for k in grouped if k[1] in backfilled])
        except Exception:
            # blocks summed here are no longer known whole either: owe every block touched
            for key, by_level in grouped.items():
                for level, entries in by_level.items():
                    _owe(dirty, key, level, entries)
                known = self._series.get(key)
                if known is not None:
                    known.forget_open()
            self._owed = dirty
            self._covered -= fresh  # its marker may not be written: looked at again next time
            raise

    def _judge(self, batch: _Batch, spans: list[tuple[int, int, int, int]]) -> None:
        """Stop keeping a level of a field once it has spanned `_JUDGE_BLOCKS` blocks of it here
        with fewer than `MIN_BLOCK_POINTS` values per block on average: readers would not use
        that level (`RollupSpan.dense_enough`), so its lines would only cost the import and
        InfluxDB. A field too sparse for a level is too sparse for every finer one."""
        for code, n, first, last in spans:
            _, run, _, _, name = batch.combos[code]
            seen = self._seen.get((run, name))
            if seen is None:
                self._seen[(run, name)] = [n, first, last]
                continue
            seen[0] += n
            seen[1], seen[2] = min(seen[1], first), max(seen[2], last)
        for code, _, _, _ in spans:
            _, run, _, _, name = batch.combos[code]
            count, first, last = self._seen[(run, name)]
            width = last - first + 1
            unkept = self._unkept.get((run, name), set())
            for i, level in enumerate(ROLLUP_LEVELS):
                if level in unkept or width < _JUDGE_BLOCKS * level:
                    continue
                if count * level < MIN_BLOCK_POINTS * width:
                    for finer in ROLLUP_LEVELS[: i + 1]:
                        if finer not in unkept:
                            self._unkeep(run, name, finer, last)
                    unkept = self._unkept[(run, name)]

    def _unkeep(self, run: str, name: str, level: int, step: int) -> None:
        self._unkept.setdefault((run, name), set()).add(level)
        self._unsent_marks.setdefault(run, {})[unkept_key(level, name)] = step
        for key, state in self._series.items():
            held = state.open[level]
            if key[1] == run and held is not None:
                held[1].pop(name, None)
            if key[1] == run:
                state.lag[level].pop(name, None)

    def _mark_lines(self) -> list[str]:
        """The marker's fields for levels newly not kept: sent before (in the same request as)
        the first lines that leave them out, and again after a failed request."""
        return [_marker_line(run, marks) for run, marks in self._unsent_marks.items()]

    def _fold(
        self,
        key: _Key,
        state: _Series,
        by_level: Mapping[int, list[_Entry]],
        lasts: Mapping[str, int],
        project: str | None,
        dirty: _Dirty,
    ) -> list[str]:
        """Add the batch's block sums where this writer knows the block whole; note the other
        blocks in `dirty`."""
        _, run, rank, gpu = key
        top = max(state.frontier, max(lasts.values()))
        levels = dirty.setdefault(key, {})
        tags = _tags(run, project, rank, gpu)
        lines: list[str] = []
        for level, entries in by_level.items():
            owed = levels.setdefault(level, {})
            bad = _bad(entries, state, level)
            accs = _carry(state, level, bad, owed)
            touched: set[int] = set()
            for e in entries:
                if e.block in bad:
                    owed.setdefault(e.field, set()).add(e.block)
                    continue
                _merge(
                    accs.setdefault(e.block, {}), {e.field: [e.n, e.total, e.low, e.high, e.last]}
                )
                touched.add(e.block)
            prefix = self._prefix(level, tags)
            for b in sorted(touched):
                lines.append(f"{prefix} {self._render(accs[b])} {b * level}")
            newest = top // level
            state.open[level] = (newest, accs[newest]) if newest in accs else None
            # each field whose newest step is in an older block keeps that block's sums
            lag: dict[str, tuple[int, list[float]]] = {}
            for b, acc in accs.items():
                if b == newest:
                    continue
                for name, cell in acc.items():
                    if max(lasts.get(name, -1), state.last.get(name, state.learned)) // level == b:
                        lag[name] = (b, cell)
            state.lag[level] = lag
        _advance(state, lasts)
        return lines

    def _prefix(self, level: int, tags: dict[str, str | None]) -> str:
        """The escaped `measurement,tags` of a rollup series' lines (cached)."""
        key = (level, *sorted((k, v) for k, v in tags.items() if v))
        prefix = self._prefixes.get(key)
        if prefix is None:
            if len(self._prefixes) >= _CACHE_LIMIT:
                self._prefixes.clear()
            line = format_line(rollup_measurement(level), tags, {"x": 0})
            assert line is not None
            prefix = self._prefixes[key] = line[: -len(" x=0i")]
        return prefix

    def _render(self, acc: _Acc) -> str:
        """A block's fields: sums, extremes and mean as floats (the server's `::float` ones
        are), the count and last step as integers (as `count()` and `max("step")` give them)."""
        parts: list[str] = []
        for name, (n, total, low, high, last) in acc.items():
            keys = self._keys.get(name)
            if keys is None:
                if len(self._keys) >= _CACHE_LIMIT:
                    self._keys.clear()
                keys = self._keys[name] = tuple(
                    escape_field_key(rollup_key(stat, name))
                    for stat in (*ROLLUP_STATS, ROLLUP_MEAN)
                )
            parts.append(
                f"{keys[0]}={int(n)}i,{keys[1]}={float(total)!r},{keys[2]}={float(low)!r},"
                f"{keys[3]}={float(high)!r},{keys[4]}={int(last)}i,{keys[5]}={total / n!r}"
            )
        return ",".join(parts)

    def _learn(self, keys: list[_Key]) -> None:
        """The newest step InfluxDB holds for each new series (this batch included)."""
        statements = [
            f'SELECT last("step") FROM {self._rp}{_ident(m)} WHERE {_series_where(run, rank, gpu)}'
            for m, run, rank, gpu in keys
        ]
        results = self._query.run(statements)
        for key, result in zip(keys, results, strict=True):
            last = _first(result, "last")
            self._series[key] = _Series(int(last) if isinstance(last, int | float) else -1)

    def _reopen(self, dirty: _Dirty, backfilled: list[_Key]) -> None:
        """Read back the block at each series' newest step where InfluxDB has just summed it:
        from there on this writer knows it whole and goes on summing it here."""
        wanted: list[tuple[_Series, int, set[str], str]] = []
        for key in dict.fromkeys([*dirty, *backfilled]):
            state = self._series.get(key)
            if state is None or state.frontier < 0:
                continue
            _, run, rank, gpu = key
            levels = dirty.get(key, {})
            for level in ROLLUP_LEVELS:
                redone = set().union(*levels.get(level, {}).values())
                edge = state.frontier // level
                if state.open[level] is None and (edge in redone or key in backfilled):
                    kept = {f for f in state.fields if self.keeps(run, f, level)}
                    wanted.append(
                        (
                            state,
                            level,
                            kept,
                            f"SELECT * FROM {self._rp}{_ident(rollup_measurement(level))} "
                            f"WHERE {_series_where(run, rank, gpu)} AND time = {edge * level}s",
                        )
                    )
        if not wanted:
            return
        results = self._query.run([q for *_, q in wanted])
        for (state, level, kept, _), result in zip(wanted, results, strict=True):
            acc = _read_acc(result, kept)
            if acc is not None:
                state.open[level] = (state.frontier // level, acc)

    def _cover(self, run: str, batch: _Batch | None) -> str:
        """Learn the run's marker: the levels of its fields not kept, and whether its rollups are
        complete ("covered"). A run without it is either new, InfluxDB holding nothing of it but
        `batch` ("fresh": its rollups are summed here from the batch, and the marker written with
        them), or has points from before rollups: all of them are rolled up once ("backfilled")."""
        where = f'"run" = {_literal(run)}'
        (marker,) = self._query.run(
            [f"SELECT * FROM {self._rp}{_ident(ROLLUP_MARKER)} WHERE {where}"]
        )
        for key, value in _first_row(marker).items():
            level, name = unkept_level(key)
            if level in ROLLUP_LEVELS and value is not None:
                self._unkept.setdefault((run, name), set()).add(level)
        self._covered.add(run)
        version = _first(marker, MARKER_VERSION_FIELD)
        if isinstance(version, int | float) and version >= ROLLUP_VERSION:
            return "covered"
        if version is not None:  # rolled up by an older exporter: again, whole
            _log.info(
                "rlvitals: run %r was rolled up by rollups version %s; rolling it up again as "
                "version %s",
                run,
                version,
                ROLLUP_VERSION,
            )
            batch = None
        if batch is not None and self._holds_only(run, batch):
            return "fresh"
        self._backfill(run)
        self._writer.write(join_lines([_marker_line(run, {MARKER_VERSION_FIELD: ROLLUP_VERSION})]))
        return "backfilled"

    def _holds_only(self, run: str, batch: _Batch) -> bool:
        """Whether InfluxDB's points of the run are exactly the lines of `batch` (all written):
        as many lines per measurement as the batch has distinct (series, step) keys there. A
        line the batch does not see (only text, or from elsewhere) makes it False."""
        combos = batch.combos
        chosen = [i for i, c in enumerate(combos) if c[1] == run and c[0] not in _SKIP]
        if not chosen:
            return False
        series: dict[tuple[str, int, str], int] = {}
        sid = np.full(len(combos), -1, dtype=np.int64)
        for i in chosen:
            sid[i] = series.setdefault((combos[i][0], combos[i][2], combos[i][3]), len(series))
        ids = sid[batch.codes]
        mine = ids >= 0
        keys = np.unique(np.stack([ids[mine], batch.steps[mine]]), axis=1)
        measurement_of = [m for m, _, _ in series]
        ours: dict[str, int] = {}
        for s in keys[0].tolist():
            ours[measurement_of[s]] = ours.get(measurement_of[s], 0) + 1
        (counted,) = self._query.run(
            [f'SELECT count("step") FROM {self._rp}/.*/ WHERE "run" = {_literal(run)}']
        )
        held: dict[str, int] = {}
        for s in counted:
            name = str(s.get("name"))
            if name in _SKIP or is_rollup_measurement(name):
                continue
            value = _first([s], "count")
            held[name] = int(value) if isinstance(value, int | float) else 0
        return held == ours

    @property
    def owes(self) -> bool:
        """Whether blocks a failed call left are still to be recomputed (or the last call
        failed): what the writer has sent is not all rolled up yet."""
        return bool(self._owed) or self._failing or bool(self._unsent_marks)

    def recompute(self, run: str, lo: int, hi: int) -> None:
        """Recompute every block of both levels holding steps `lo`..`hi` of the run from the raw
        points InfluxDB holds (whole blocks; idempotent): what a writer that died, or whose
        rollup write failed before it could retry, still owed. Raises what InfluxDB answered."""
        self._backfill(run, lo, hi)

    def check(self, run: str) -> list[str]:
        """Where the run's rollups disagree with its raw points: per field, the count and sum of
        its finite values against what each kept level's blocks hold (empty: they agree)."""
        where = f'"run" = {_literal(run)}'
        (names,) = self._query.run([f"SHOW MEASUREMENTS WHERE {where}"])
        measurements = [
            str(row[0])
            for s in names
            for row in _values(s)
            if row and str(row[0]) not in _SKIP and not is_rollup_measurement(str(row[0]))
        ]
        (marker,) = self._query.run(
            [f"SELECT * FROM {self._rp}{_ident(ROLLUP_MARKER)} WHERE {where}"]
        )
        unkept: dict[str, set[int]] = {}
        for key, value in _first_row(marker).items():
            level, name = unkept_level(key)
            if level in ROLLUP_LEVELS and value is not None:
                unkept.setdefault(name, set()).add(level)
        problems: list[str] = []
        version = _first(marker, MARKER_VERSION_FIELD)
        if isinstance(version, int | float) and version < ROLLUP_VERSION:
            problems.append(
                f"rolled up by rollups version {version} (now {ROLLUP_VERSION}: its blocks have "
                "no mean:<field>, so the dashboards read its raw points)"
            )
        raw: dict[str, tuple[int, float]] = {}
        results = self._query.run(
            [
                f"SELECT count(*), sum(*) FROM {self._rp}{_ident(m)} WHERE {where}"
                for m in measurements
            ]
        )
        for result in results:
            for column, value in _first_row(result).items():
                if not column.startswith("count_") or not isinstance(value, int | float):
                    continue
                name = column[len("count_") :]
                if name in ("step", "wall_time"):
                    continue
                total = _first_row(result).get(f"sum_{name}")
                if not isinstance(total, int | float):
                    continue  # not a number field (text)
                n0, t0 = raw.get(name, (0, 0.0))
                raw[name] = (n0 + int(value), t0 + float(total))
        for level in ROLLUP_LEVELS:
            (held,) = self._query.run(
                [
                    f"SELECT sum(/^n:/), sum(/^sum:/) FROM {self._rp}"
                    f"{_ident(rollup_measurement(level))} WHERE {where}"
                ]
            )
            row = _first_row(held)
            for name, (n, total) in sorted(raw.items()):
                if level in unkept.get(name, ()):
                    continue
                got_n = row.get(f"sum_{rollup_key('n', name)}")
                got_sum = row.get(f"sum_{rollup_key('sum', name)}")
                n_ok = isinstance(got_n, int | float) and int(got_n) == n
                sum_ok = isinstance(got_sum, int | float) and math.isclose(
                    float(got_sum), total, rel_tol=1e-9, abs_tol=1e-9
                )
                if not (n_ok and sum_ok):
                    problems.append(
                        f"{name}: {n} raw value(s), the {level}-step blocks hold "
                        f"{got_n if got_n is not None else 0}"
                    )
        return problems

    def repair(self, run: str) -> None:
        """Recompute every block of the run from its raw points (see `recompute`); a marker of
        an older `ROLLUP_VERSION` then says the current one."""
        self._backfill(run)
        (marker,) = self._query.run(
            [f'SELECT * FROM {self._rp}{_ident(ROLLUP_MARKER)} WHERE "run" = {_literal(run)}']
        )
        version = _first(marker, MARKER_VERSION_FIELD)
        if isinstance(version, int | float) and version < ROLLUP_VERSION:
            self._writer.write(
                join_lines([_marker_line(run, {MARKER_VERSION_FIELD: ROLLUP_VERSION})])
            )

    def _backfill(self, run: str, lo: int = 0, hi: int | None = None) -> None:
        where = f'"run" = {_literal(run)}'
        (names,) = self._query.run([f"SHOW MEASUREMENTS WHERE {where}"])
        measurements = [
            str(row[0])
            for s in names
            for row in _values(s)
            if row and str(row[0]) not in _SKIP and not is_rollup_measurement(str(row[0]))
        ]
        if not measurements:
            return
        keys = self._query.run([f"SHOW FIELD KEYS FROM {_ident(m)}" for m in measurements])
        lasts = self._query.run(
            [f'SELECT last("step") FROM {self._rp}{_ident(m)} WHERE {where}' for m in measurements]
        )
        statements: list[str] = []  # in one request: each costs InfluxDB a write of its own
        for m, fields_r, last_r in zip(measurements, keys, lasts, strict=True):
            last = _first(last_r, "last")
            if not isinstance(last, int | float):
                continue
            # whole blocks of the coarse level: a block summed from part of its steps would
            # overwrite the whole one
            start = lo - lo % _COARSE
            end = (
                int(last) + 1
                if hi is None
                else min(int(last) + 1, -(-(hi + 1) // _COARSE) * _COARSE)
            )
            names_m = [
                str(row[0])
                for s in fields_r
                for row in _values(s)
                if len(row) > 1
                and row[1] in ("float", "integer")
                and row[0] not in ("step", "wall_time")
            ]
            for first in range(start, end, _BACKFILL_STEPS):
                # nothing past the step it learnt: a later batch may be in InfluxDB already
                upto = min(first + _BACKFILL_STEPS, end)
                statements += [
                    self._raw_into(m, where, name, first, upto, _FINE) for name in names_m
                ]
                statements.append(self._coarse_into(where, names_m, first, upto))
                if len(statements) >= _STATEMENTS_PER_REQUEST:
                    self._query.run(statements)
                    statements = []
        if statements:
            self._query.run(statements)
        if lo == 0 and hi is None:
            _log.info("rlvitals: rolled up run %r from its raw points", run)

    def _recompute(self, dirty: _Dirty) -> None:
        fine: list[str] = []
        coarse: list[str] = []
        for key, levels in dirty.items():
            measurement, run, rank, gpu = key
            where = _series_where(run, rank, gpu)
            # Only up to the newest step handled here: another batch may be in InfluxDB already
            # (its steps are summed when it comes here).
            state = self._series.get(key)
            for name, blocks in levels.get(_FINE, {}).items():
                if self.keeps(run, name, _FINE):
                    for lo, hi in _capped(state, name, blocks, _FINE):
                        fine.append(self._raw_into(measurement, where, name, lo, hi, _FINE))
            by_blocks: dict[frozenset[int], list[str]] = {}
            for name, blocks in levels.get(_COARSE, {}).items():
                if not blocks or not self.keeps(run, name, _COARSE):
                    continue
                if self.keeps(run, name, _FINE):
                    by_blocks.setdefault(frozenset(blocks), []).append(name)
                else:  # the 64-step level is not kept whole: from the raw points
                    for lo, hi in _capped(state, name, blocks, _COARSE):
                        coarse.append(self._raw_into(measurement, where, name, lo, hi, _COARSE))
            for same, names in by_blocks.items():
                for lo, hi in _ranges(same, _COARSE):
                    coarse.append(self._coarse_into(where, sorted(names), lo, hi))
        if fine:
            self._query.run(fine)
        if coarse:  # after the fine level (and the lines written before): it is summed from it
            self._query.run(coarse)

    def _raw_into(
        self, measurement: str, where: str, name: str, lo: int, hi: int, level: int
    ) -> str:
        col = _ident(name)
        parts = ", ".join(
            f"{fn}({col}{cast}) AS {_ident(rollup_key(stat, name))}"
            for fn, cast, stat in (
                ("count", "", "n"),
                ("sum", "::float", "sum"),
                ("min", "::float", "min"),
                ("max", "::float", "max"),
                ("mean", "::float", ROLLUP_MEAN),
            )
        )
        return (
            f'SELECT {parts}, max("step") AS {_ident(rollup_key("last", name))} '
            f"INTO {self._rp}{_ident(rollup_measurement(level))} FROM {self._rp}{_ident(measurement)} "
            f"WHERE {where} AND {col} = {col} AND time >= {lo}s AND time < {hi}s "
            f"GROUP BY time({level}s), *"
        )

    def _coarse_into(self, where: str, names: Sequence[str], lo: int, hi: int) -> str:
        lo, hi = lo - lo % _COARSE, -(-hi // _COARSE) * _COARSE
        parts = ", ".join(
            f"{fn}({_ident(rollup_key(stat, name))}) AS {_ident(rollup_key(stat, name))}"
            for name in names
            for fn, stat in (
                ("sum", "n"),
                ("sum", "sum"),
                ("min", "min"),
                ("max", "max"),
                ("max", "last"),
            )
        )
        # the block's mean: an expression of two aggregates, which SELECT ... INTO writes as a
        # field of its own (InfluxDB 1.6: tests/exporter/influx/test_influx_rollups.py checks it)
        parts += "".join(
            f", sum({_ident(rollup_key('sum', name))}) / sum({_ident(rollup_key('n', name))})"
            f" AS {_ident(rollup_key(ROLLUP_MEAN, name))}"
            for name in names
        )
        return (
            f"SELECT {parts} INTO {self._rp}{_ident(rollup_measurement(_COARSE))} "
            f"FROM {self._rp}{_ident(rollup_measurement(_FINE))} "
            f"WHERE {where} AND time >= {lo}s AND time < {hi}s GROUP BY time({_COARSE}s), *"
        )


def _bad(entries: list[_Entry], state: _Series, level: int) -> set[int]:
    """Blocks of `level` the batch touches that this writer cannot sum: one holding a re-logged
    step of a field (at or before the newest one InfluxDB held), or the block a field goes on in
    that was started before this writer (not one it holds open: the series' newest, or the
    field's own where it trails)."""
    held = state.open[level]
    known = None if held is None else held[0]
    lag = state.lag[level]
    bad: set[int] = set()
    for e in entries:
        newest = state.last.get(e.field, state.learned)
        if e.first <= newest:
            bad.add(e.block)
        elif newest >= 0 and e.block == newest // level and known != e.block:
            trailing = lag.get(e.field)
            if trailing is None or trailing[0] != e.block:
                bad.add(e.block)
    return bad


def _advance(state: _Series, lasts: Mapping[str, int]) -> None:
    for name, last in lasts.items():
        if last > state.last.get(name, state.learned):
            state.last[name] = last
        if last > state.frontier:
            state.frontier = last


def _carry(state: _Series, level: int, bad: set[int], owed: dict[str, set[int]]) -> dict[int, _Acc]:
    """The open blocks summed so far (the series' newest, and each trailing field's), unless
    this batch touched one where it is not known."""
    accs: dict[int, _Acc] = {}
    held = state.open[level]
    if held is not None:
        if held[0] in bad:
            for name in held[1]:
                owed.setdefault(name, set()).add(held[0])
        else:
            accs[held[0]] = held[1]
    for name, (block, cell) in state.lag[level].items():
        if block in bad:
            owed.setdefault(name, set()).add(block)
        else:
            accs.setdefault(block, {})[name] = cell
    return accs


def _read_acc(result: list[dict[str, object]], fields: set[str]) -> _Acc | None:
    """A block's sums of `fields` as InfluxDB holds them (summed over the series' tag sets), or
    None when one of them lacks a part."""
    acc: _Acc = {}
    for series in result:
        columns = series.get("columns")
        if not isinstance(columns, list):
            continue
        for row in _values(series):
            parts: dict[str, dict[str, float]] = {}
            for column, value in zip(columns, row, strict=False):
                stat, sep, name = str(column).partition(":")
                if (
                    sep
                    and stat in ROLLUP_STATS
                    and name in fields
                    and isinstance(value, int | float)
                ):
                    parts.setdefault(name, {})[stat] = float(value)
            for name, got in parts.items():
                if len(got) != len(ROLLUP_STATS):
                    return None
                _merge(acc, {name: [got[k] for k in ROLLUP_STATS]})
    return acc


def _merge(into: _Acc, more: _Acc) -> None:
    for name, (n, total, low, high, last) in more.items():
        cell = into.get(name)
        if cell is None:
            into[name] = [n, total, low, high, last]
            continue
        cell[0] += n
        cell[1] += total
        cell[2] = min(cell[2], low)
        cell[3] = max(cell[3], high)
        cell[4] = max(cell[4], last)


def _owe(dirty: _Dirty, key: _Key, level: int, entries: Iterable[_Entry]) -> None:
    """Every block of `level` the entries touch is to be recomputed by InfluxDB."""
    blocks = dirty.setdefault(key, {}).setdefault(level, {})
    for e in entries:
        blocks.setdefault(e.field, set()).add(e.block)


def _series_where(run: str, rank: int, gpu: str) -> str:
    rank_text = "" if rank == NO_RANK else str(rank)
    return (
        f'"{RUN_TAG}" = {_literal(run)} AND "{RANK_TAG}" = {_literal(rank_text)} '
        f'AND "{GPU_TAG}" = {_literal(gpu)}'
    )


def _tags(run: str, project: str | None, rank: int, gpu: str) -> dict[str, str | None]:
    tags: dict[str, str | None] = {RUN_TAG: run, PROJECT_TAG: project}
    if rank != NO_RANK:
        tags[RANK_TAG] = str(rank)
    if gpu:
        tags[GPU_TAG] = gpu
    return tags


def _values(series: dict[str, object]) -> list[list[object]]:
    values = series.get("values")
    return [list(v) for v in values] if isinstance(values, list) else []


def _marker_line(run: str, fields: Mapping[str, int]) -> str:
    """A line of the run's marker point (its fields merge with those written before)."""
    line = format_line(ROLLUP_MARKER, {"run": run}, dict(fields), 0)
    assert line is not None
    return line


def _first_row(result: list[dict[str, object]]) -> dict[str, object]:
    """The first row of a result as column -> value."""
    for s in result:
        columns = s.get("columns")
        if isinstance(columns, list):
            for row in _values(s):
                return dict(zip(map(str, columns), row, strict=False))
    return {}


def _first(result: list[dict[str, object]], column: str) -> object:
    for s in result:
        columns = s.get("columns")
        if not isinstance(columns, list) or column not in columns:
            continue
        i = columns.index(column)
        for row in _values(s):
            if row[i] is not None:
                return row[i]
    return None


def rollups_wanted(settings: ExporterSettings) -> bool:
    """Whether rollups are kept: InfluxDB 1.x only (2.x's v1 API has no `SELECT ... INTO`)."""
    return bool(settings.influx_url) and settings.influx_api == "v1"


def make_rollups(settings: ExporterSettings, writer: Writer) -> InfluxRollups | None:
    """Rollups when `rollups_wanted`, else None (readers then use the raw points). `writer`
    carries the rollup lines: the raw points' writer when called from its thread, or one of
    their own (the import's `RollupWorker`)."""
    url = settings.influx_url
    if not url or not rollups_wanted(settings):
        return None
    query = _Query(
        url,
        settings.influx_database,
        settings.influx_username,
        settings.influx_password,
        max(30.0, settings.flush_timeout),
    )
    return InfluxRollups(query, writer, settings.influx_retention_policy)
