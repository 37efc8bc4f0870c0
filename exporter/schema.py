"""The stored schema: every name the outbox and InfluxDB keep data under, declared once.

Writers (`translate`, `store`, `influx`) and readers (the datasource's history stores, the
generated dashboards' queries) import these names; no other module spells a measurement or a
rollup name (tests/exporter/test_layout.py checks it).

Points. A sample is a point keyed by training step: InfluxDB's timestamp is the step (precision
`s`: step N at N seconds after the epoch), so re-logging a step overwrites it and every metric of
one step lines up on the x axis. Its tags are `TAGS`: `RUN_TAG`, `PROJECT_TAG`, `RANK_TAG` where
given and `GPU_TAG` for per-device metrics (events add `KIND_TAG`), its fields the canonical metric
ids plus `POINT_FIELDS` (`STEP_FIELD`, `WALL_TIME_FIELD`). Steps and values are never tags. The
outbox keys the same points by (run, rank, step, measurement, gpu, field) and stores `NO_RANK`
for a run logged without a rank.

Ranks. The ranks of one job are one run (`exporter.job`): each rank's rows carry its rank, so
two ranks never overwrite each other's point of one step, and Grafana splits a series by
`RANK_TAG`. Each rank's end is an `EVENTS` point of kind `RANK_END` at its last step (field
`STATE_FIELD`: finished, crashed or ended; the text says why), which is how a reader of
InfluxDB, where no lease is kept, tells the run's life (`exporter.lifecycle`).

Measurements:
- one per registry group (`registry.Metric.group`), holding that group's metrics;
- `RUN_CONFIG`: the run's hyperparameters at step 0, `CONFIG_FIELD` (all of them, JSON), every
  numeric one as a field of its own, and `TRANSFORMS_FIELD` (see `FieldTransform`);
- `SPREAD`: `<field>/count`, `<field>/min` and `<field>/max` at a step that logged several values
  of one name (the field itself holds their mean);
- `UNREGISTERED`: names the registry does not know, stored as logged (policy `warn`);
- `EVENTS`: one point per (run, rank, step, kind), fields `TEXT_FIELD`, step, wall time and the
  event's own fields;
- in InfluxDB only, `rollup_measurement(level)` per level of `ROLLUP_LEVELS` and `ROLLUP_MARKER`
  (the outbox keeps its rollups in tables of its own: `store.running_stats`).

Rollups. Blocks of `ROLLUP_LEVELS` steps (block = step // level) hold, per field, `ROLLUP_STATS`
of the block's finite values under `rollup_key(stat, field)`, and its mean (`ROLLUP_MEAN`); a level is kept for a series only
where its blocks hold `MIN_BLOCK_POINTS` values on average (`unkept_key` marks the others in the
run's `ROLLUP_MARKER` point, whose `MARKER_VERSION_FIELD` says its rollups are complete).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "AUTO_MAPPED",
    "CONFIG_FIELD",
    "CONFIG_SOURCES",
    "EVENTS",
    "GPU_TAG",
    "INFLUX_MAX_STEP",
    "KIND_TAG",
    "MARKER_VERSION_FIELD",
    "MAX_STEP",
    "MIN_BLOCK_POINTS",
    "NONFINITE_SUFFIX",
    "NOT_METRICS",
    "NO_RANK",
    "POINT_FIELDS",
    "PROJECT_TAG",
    "RANK_END",
    "RANK_TAG",
    "ROLLUP_LEVELS",
    "ROLLUP_MARKER",
    "ROLLUP_MEAN",
    "ROLLUP_STATS",
    "RUN_CONFIG",
    "RUN_TAG",
    "SPREAD",
    "STATE_FIELD",
    "STEP_FIELD",
    "TAGS",
    "TEXT_FIELD",
    "TRANSFORMS_FIELD",
    "UNREGISTERED",
    "WALL_TIME_FIELD",
    "EventRow",
    "FieldTransform",
    "PendingPoints",
    "SampleBlock",
    "SampleRow",
    "SourcePosition",
    "is_rollup_measurement",
    "nonfinite_field",
    "read_by_itself",
    "rollup_key",
    "rollup_measurement",
    "transforms_from_json",
    "unkept_key",
    "unkept_level",
]

# Measurements.
RUN_CONFIG = "run_config"
"""The run's hyperparameters, one point at step 0."""
SPREAD = "spread"
"""`<field>/count`, `<field>/min` and `<field>/max` for a step that logged several values of one
name (one per finishing episode); the field itself holds their mean. `<field>/nonfinite`: how
many NaN/Inf values of a registry metric a step logged (they are not stored as values), so a
reader can tell "every value was NaN" from "nothing was logged"."""
NONFINITE_SUFFIX = "/nonfinite"
"""The `SPREAD` field `<field>/nonfinite` (see `nonfinite_field`)."""
UNREGISTERED = "unregistered"
"""Names the registry does not know, stored as logged."""
EVENTS = "events"
"""Step-keyed events (checkpoint, resume, health, ...), tag `KIND`."""
ROLLUP_MARKER = "rlvitals_rollups"
"""InfluxDB: one point per run (`MARKER_VERSION_FIELD`) once its rollups cover every point it has."""
_ROLLUP_PREFIX = "rlvitals_rollup_"
NOT_METRICS = frozenset({RUN_CONFIG, SPREAD, UNREGISTERED})
"""Sample measurements that hold no registry metric."""

# Tags: the only ones (DESIGN.md, "Scale"): what a series is split by, never a step or a value.
RUN_TAG = "run"
PROJECT_TAG = "project"
RANK_TAG = "rank"
"""The rank of a job's process that logged the point (absent for a single process)."""
GPU_TAG = "gpu"
KIND_TAG = "kind"
"""An event's kind (on `EVENTS` points only)."""
TAGS = (RUN_TAG, PROJECT_TAG, RANK_TAG, GPU_TAG)

# Event kinds the exporter writes itself.
RANK_END = "rank_end"
"""How one rank of a run ended, at its last step (`STATE_FIELD`, the text saying why)."""

# Fields.
STEP_FIELD = "step"
WALL_TIME_FIELD = "wall_time"
POINT_FIELDS = frozenset({STEP_FIELD, WALL_TIME_FIELD})
"""Integer field `step` and float field `wall_time` on every point, beside its metrics: a logged
name that is one of them cannot share the point's line with them."""
TEXT_FIELD = "text"
"""An event's text."""
STATE_FIELD = "state"
"""A `RANK_END` event's field: the rank's end (finished, crashed, ended)."""
CONFIG_FIELD = "config_json"
"""The `RUN_CONFIG` point's field holding the whole configuration as JSON."""
CONFIG_SOURCES = "config_sources"
"""Run-config key: where an import took the other keys from, `{key: "logs" | "inferred"}`: read
from the logs' own words (a trainer's arguments, a hyperparameter table, a console banner) or
inferred (from which names the logs hold, or a mapping of what they say). A key it does not name
was given (`--config`, `--set`, `init(config=...)`)."""
TRANSFORMS_FIELD = "transforms_json"
"""Field of the `RUN_CONFIG` point (step 0) recording which transform each stored field went
through (JSON, see `FieldTransform`), so a value can be shown with what was done to it."""
MARKER_VERSION_FIELD = "version"
"""The `ROLLUP_MARKER` point's field: the rollups' version, present once they are complete."""

NO_RANK = -1
"""Rank stored for samples logged without a rank (sqlite keys cannot hold NULL uniquely)."""
MAX_STEP = 2**63 - 1
"""The highest step the outbox stores: sqlite integers and numpy int64 stop here."""
INFLUX_MAX_STEP = (2**63 - 2) // 10**9
"""The highest step InfluxDB can store: a step is written as a timestamp in seconds
(precision=s) and the server keeps it as int64 nanoseconds, of which it refuses the top value
(influxdata/influxdb models/time.go: MaxNanoTime = math.MaxInt64 - 1), so 9,223,372,036."""

# Rollups.
ROLLUP_LEVELS = (64, 4096)
"""Steps per rollup block, finest first; each a multiple of the one before."""
MIN_BLOCK_POINTS = 8
"""Values a level's blocks must hold on average for a series to keep (and a reader to use) it:
below that, reading the raw points costs about as much as reading the blocks."""
ROLLUP_STATS = ("n", "sum", "min", "max", "last")
"""Per field and block: count, sum, lowest and highest finite value, last step (what a reader
sums, or takes the extreme of, over blocks and series)."""
ROLLUP_MEAN = "mean"
"""Per field and block, beside `ROLLUP_STATS`: the block's mean (its sum over its count), so a
chart takes a bucket's mean, moving average and slope of the blocks in one flat InfluxQL
statement (`mean("mean:<field>")`; InfluxQL applies those only to an aggregate of a field).
Not summable: readers that add blocks up use `n` and `sum`."""
_UNKEPT = "unkept"


def rollup_measurement(level: int) -> str:
    """The InfluxDB measurement holding the blocks of `level` steps."""
    return f"{_ROLLUP_PREFIX}{level}"


def is_rollup_measurement(name: str) -> bool:
    """Whether `name` is a rollup measurement or the rollup marker (not a raw point's)."""
    return name == ROLLUP_MARKER or name.startswith(_ROLLUP_PREFIX)


def rollup_key(stat: str, field_name: str) -> str:
    """The rollup field holding `stat` of `field_name`."""
    return f"{stat}:{field_name}"


def unkept_key(level: int, field_name: str) -> str:
    """The marker field saying `field_name`'s blocks of `level` steps are not kept (its value:
    the step from which they are not)."""
    return f"{_UNKEPT}{level}:{field_name}"


def unkept_level(key: str) -> tuple[int, str]:
    """(level, field) of a marker field `unkept_key(level, field)`; (0, "") for another."""
    stat, sep, name = key.partition(":")
    if sep and stat.startswith(_UNKEPT) and stat[len(_UNKEPT) :].isdigit():
        return int(stat[len(_UNKEPT) :]), name
    return 0, ""


# Rows: what translation hands the store.
SampleRow = tuple[str, int, int, str, str, str, float | str, float]
"""(run, rank, step, measurement, gpu, field, value, wall_time); value is float or str."""
EventRow = tuple[str, int, int, str, str, str, float]
"""(run, rank, step, kind, text, fields_json, wall_time)."""


@dataclass(frozen=True)
class SampleBlock:
    """Samples of consecutive log calls that logged the same names, as columns: the value of
    column j at step i is `values[i, j]`. What `SampleRow`s (run, rank, steps[i], *columns[j],
    values[i, j], wall_times[i]) in row-major order would be, without an object per sample.
    Every value is finite, or NaN for a hole: a cell with no sample (a value the translator
    rejected there, or a non-finite one it did not write), which nothing stores or sums."""

    run: str
    rank: int
    steps: Sequence[int]
    wall_times: Sequence[float]
    columns: Sequence[tuple[str, str, str]]  # (measurement, gpu, field)
    values: npt.NDArray[np.float64]  # shape (len(steps), len(columns))

    @property
    def cells(self) -> int:
        """Steps × columns, holes included: the sequence numbers the block takes."""
        return len(self.steps) * len(self.columns)

    @functools.cached_property
    def size(self) -> int:
        """The samples it holds (its cells but the holes)."""
        return self.cells - int(np.count_nonzero(np.isnan(self.values)))

    def rows(self) -> list[SampleRow]:
        """The same samples as rows (for a store that cannot take the block whole)."""
        values = self.values.tolist()
        return [
            (self.run, self.rank, step, measurement, gpu, field, row[j], wall)
            for step, wall, row in zip(self.steps, self.wall_times, values, strict=True)
            for j, (measurement, gpu, field) in enumerate(self.columns)
            if row[j] == row[j]  # a hole (NaN) holds no sample
        ]


@dataclass(frozen=True)
class PendingPoints:
    """Unsent points as the store reads them for the forwarder: by their numbers, a column per
    attribute (row i is `run_fields[i]`, `tag_sets[i]`, `steps[i]`, ...), and the names of the
    numbers they hold. Rendering and the rollups' sums work on the columns, so a row costs no
    Python object of its own; `rows` names them (a refused line's rows, a caller that wants
    `SampleRow`s). Every run field and tag set a row holds is named (the store drops rows whose
    run was deleted between its two reads)."""

    seq_range: tuple[int, int]
    run_fields: Sequence[int]
    tag_sets: Sequence[int]
    steps: Sequence[int]
    values: Sequence[float | str]
    wall_times: Sequence[float]
    fields: Mapping[int, tuple[str, str]]  # run field -> (run, field)
    tags: Mapping[int, tuple[str, int, str]]  # tag set -> (measurement, rank, gpu)

    def __len__(self) -> int:
        return len(self.steps)

    @functools.cached_property
    def numbers(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(run fields, tag sets, steps) as arrays, made once for the batch's render, spans
        and rollups."""
        count = len(self.steps)
        return (
            np.fromiter(self.run_fields, np.int64, count),
            np.fromiter(self.tag_sets, np.int64, count),
            np.fromiter(self.steps, np.int64, count),
        )

    @functools.cached_property
    def rows(self) -> list[SampleRow]:
        """The points as `SampleRow`s, in the order read."""
        fields, tags = self.fields, self.tags
        out: list[SampleRow] = []
        for f, t, step, value, wall in zip(
            self.run_fields, self.tag_sets, self.steps, self.values, self.wall_times, strict=True
        ):
            run, field = fields[f]
            measurement, rank, gpu = tags[t]
            out.append((run, rank, step, measurement, gpu, field, value, wall))
        return out


@dataclass(frozen=True)
class SourcePosition:
    """How far a log source has read one file, and what identifies that file (stored beside the
    samples read up to there, so a reader goes on from it).

    `offset` is the byte offset after the last record read, `lines` the lines (or records) read,
    `head` the file's first line (text) or first bytes (TensorBoard) and `mark` the bytes just
    before `offset`: a file is the same one when its device, inode, `head` and `mark` all match.
    """

    path: str
    dev: int
    ino: int
    offset: int
    lines: int
    head: bytes
    mark: bytes


# The transforms record: which transform each stored field went through, one JSON text in the
# run's `RUN_CONFIG` point at step 0 (`TRANSFORMS_FIELD`), so it travels with the run to InfluxDB
# like the rest of its configuration: `{field: [{"name", "kind", "factor", "framework"}, ...]}`,
# one entry per logged name.


AUTO_MAPPED = "auto-mapped"
"""A transforms record's `framework` for a name read as a metric by itself (registry/auto_map.py):
not a framework's spelling and not a `--map`, the run's own decision at the name's first value."""


@dataclass(frozen=True)
class FieldTransform:
    """A logged name whose values were transformed on the way to a stored field."""

    field: str
    name: str
    kind: str
    factor: float
    framework: str | None

    @property
    def note(self) -> str:
        """How the stored value relates to the logged one: `train/value_loss × 0.5`."""
        if self.kind == "negate":
            return f"{self.name} negated"
        if self.kind == "scale":
            return f"{self.name} × {self.factor:g}"
        if self.kind == "reciprocal":
            return f"{self.factor:g} / {self.name}"
        if self.framework == AUTO_MAPPED:
            return f"{self.name} (read as this metric by itself: --map {self.name}= keeps it)"
        return self.name

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "factor": self.factor,
            "framework": self.framework,
        }


def read_by_itself(transforms: Mapping[str, Sequence[FieldTransform]]) -> dict[str, str]:
    """{logged name: field} of the names a run's transforms record says were read as a metric
    by themselves (`AUTO_MAPPED`)."""
    return {t.name: t.field for ts in transforms.values() for t in ts if t.framework == AUTO_MAPPED}


def transforms_from_json(text: str) -> dict[str, tuple[FieldTransform, ...]]:
    """The `transforms_json` field read back (malformed entries are skipped, never raised)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, tuple[FieldTransform, ...]] = {}
    if not isinstance(data, dict):
        return out
    for field, entries in data.items():
        found = []
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                continue
            factor = e.get("factor", 1.0)
            found.append(
                FieldTransform(
                    str(field),
                    e["name"],
                    str(e.get("kind", "identity")),
                    float(factor) if isinstance(factor, int | float) else 1.0,
                    e.get("framework") if isinstance(e.get("framework"), str) else None,
                )
            )
        if found:
            out[str(field)] = tuple(found)
    return out


def nonfinite_field(field: str) -> str:
    """The `SPREAD` field counting the non-finite values `field` logged at a step."""
    return field + NONFINITE_SUFFIX
