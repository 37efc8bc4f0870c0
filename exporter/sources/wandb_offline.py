"""A W&B run folder (`wandb/offline-run-<date>-<id>/`, or `run-<date>-<id>/` of a run that
was online), read from its transaction log `run-<id>.wandb` as one log.

The log's framing is read by `leveldb_log.py`; each record is decoded with the wandb package's
own protobuf class, `wandb.proto.wandb_internal_pb2.Record` (wandb is an optional extra,
`pip install 'rlvitals[trackers]'`, imported only when such a folder is read). Checked against
wandb 0.31.0, whose offline runs write no `files/config.yaml` or `wandb-summary.json` (those
come with `wandb sync`): everything is in the log. What is read, by record type:

- `history`: one row per W&B step; each item is `key` (older writers) or `nested_key` (0.31:
  `["actor/pg_loss"]`, a nested dict's `["a", "b"]`, named `a.b` as W&B shows it) with a JSON
  value (`NaN`/`Infinity` bare). Numbers are read; media are not: a key group with a `_type`
  child (tables, images, histograms: `table-file`, `histogram`, ...) is dropped, and so are
  W&B's own `_runtime`, `_timestamp` (the row's wall time) and `_step`. A number is read as
  `lines.as_value` reads one in every log (an integer too large for a float is as far out as
  infinity, counted non-finite). Any other value (text, a list, an object, null, true/false)
  is not stored, and said once per file per key and kind with its count of rows.
  Booleans are not stored as 1/0: the other readers (`jsonl.py`, `trainer_state.py`, `lines.py`
  `as_value`) take true/false for no metric, and a flag logged as a number is stored as one.
- The row's wall time: `_timestamp` (seconds). One that is not a finite number is taken as
  absent (said once per file, with its count): the row is stored with the time it is read, as
  a log without times is.
- The step: `_step`, unless the run defined a step metric for the row's keys
  (`define_metric("*", step_metric="train/global_step")`, what the Hugging Face Trainer's and
  OpenRLHF's W&B loggers do: they call `wandb.log` without `step`, so `_step` counts calls):
  then that metric's value in the row, which is not stored as a metric. A row lacking the step
  metric defined for its keys, or whose `_step` is not a whole number >= 0 (or is beyond the
  largest storable step), is reported with its position among the history rows and not placed.
- `run` and `config`: the run's name (`display_name`) and config, for its run context.
- `exit`: exit code 0 is a normal end.

Not read: media, tables and histograms (their files under `files/media/`), artifacts, the run
summary (its last values; HF's end-of-run `train_runtime` lives only there), system metrics
(`stats` records: CPU, memory, GPU), and `files/output.log`, the captured console: the history
holds the same metrics with their steps, so it is the run's one source (a console log holds what
the trainer printed, not always every logged key, and rounded).

A new process reads the run from its start again: the records needed to place its steps (the
step metric's definition) come first in the log, and its steps are stored again at the same steps.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..schema import MAX_STEP, SourcePosition
from .errors import SourceError
from .leveldb_log import RecordLog
from .lines import as_value, shown
from .mlflow_files import RunIdentity
from .record import Malformed, Record

__all__ = ["MissingWandb", "WandbRunSource", "is_wandb_log", "wandb_identity"]

_LOG = re.compile(r"^run-([A-Za-z0-9]+)\.wandb$")
_FOLDER = re.compile(r"^(?:offline-)?run-(\d{8}_\d{6})-([A-Za-z0-9]+)$")
_INTERNAL = ("_step", "_runtime", "_timestamp")
_NAME_SCAN = 64  # records looked at for the run record when naming a run


class MissingWandb(SourceError):
    """A W&B run log found without the wandb package installed to decode it."""


def is_wandb_log(path: Path) -> bool:
    """Whether `path` is a W&B run's transaction log (`run-<id>.wandb`)."""
    return _LOG.match(path.name) is not None


def _record_class(path: Path) -> Any:
    try:
        module = importlib.import_module("wandb.proto.wandb_internal_pb2")
    except ImportError as exc:
        raise MissingWandb(
            f"{path}: reading a W&B run needs the wandb package: pip install "
            "'rlvitals[trackers]' (or name only the folders of the other logs)"
        ) from exc
    return module.Record


def _not_a_number(value: Any) -> str | None:
    """What a history value is when it is not a storable number (None: it is one)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return None
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a JSON object"
    return "null" if value is None else type(value).__name__


def _items(items: Iterable[Any], problem: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = item.key or ".".join(item.nested_key)
        try:
            out[key] = json.loads(item.value_json)
        except ValueError:
            problem(f"{key}: value {item.value_json[:40]!r} is not JSON")
    return out


def wandb_identity(path: Path) -> RunIdentity:
    """The run's name (its run record's `display_name`; None when it has none, or wandb is
    not installed to read it), id and start (the folder's date, else the file's mtime)."""
    found = _LOG.match(path.name)
    run_id = found.group(1) if found else path.stem
    folder = _FOLDER.match(path.parent.name)
    if folder is not None:
        started = folder.group(1)
    else:
        try:
            started = f"{path.stat().st_mtime:>20.3f}"
        except OSError:
            started = ""
    name = None
    try:
        cls = _record_class(path)
    except MissingWandb:
        return RunIdentity(None, run_id, started)
    log = RecordLog(path, lambda _: None)
    for count, payload in enumerate(log.poll(), 1):
        record = cls()
        try:
            record.ParseFromString(payload)
        except Exception:  # protobuf's DecodeError; the source reports it
            break
        if record.WhichOneof("record_type") == "run":
            name = record.run.display_name or None
            run_id = record.run.run_id or run_id
            break
        if count >= _NAME_SCAN:
            break
    return RunIdentity(name, run_id, started)


class WandbRunSource:
    """Reads the history of one W&B run log incrementally."""

    def __init__(self, path: Path, report: Callable[[Malformed], None]) -> None:
        self.path = path
        self._report = report
        self._log = RecordLog(path, self._problem)
        self._cls = _record_class(path)  # without wandb: MissingWandb, said before reading
        self._config: dict[str, Any] = {}
        self._step_metrics: list[tuple[str, str]] = []  # (key glob, its step metric)
        self._step_source: str | None = None
        self._exit: int | None = None
        self._rows = 0  # history rows placed
        self._history = 0  # history records read: a row's number in messages
        self._unstored: Counter[tuple[str, str]] = Counter()  # (key, kind): rows
        self._bad_times: Counter[str] = Counter()  # a `_timestamp` not a time, by kind: rows
        self._said: set[tuple[str, str]] = set()  # (key, kind) said already

    def _problem(self, reason: str, *, kept: bool = False, part: bool = False) -> None:
        self._report(Malformed(str(self.path), 0, reason, kept=kept, part=part))

    def close(self) -> None:
        """Nothing is held open: each poll opens the log."""

    def position(self) -> SourcePosition | None:
        if not self._log.offset:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return SourcePosition(
            str(self.path), st.st_dev, st.st_ino, self._log.offset, self._rows, b"", b""
        )

    def resume(self, position: SourcePosition) -> bool:
        """Always read from the start (see the module docstring)."""
        return False

    def facts(self) -> dict[str, object]:
        """The run's config (for its run context), where its steps came from, and whether W&B
        recorded a normal exit."""
        out: dict[str, object] = {"tracker_config": dict(self._config)}
        if self._step_source is not None:
            out["step_source"] = self._step_source
        if self._exit == 0:
            out["closed"] = "W&B recorded the run's exit with code 0"
        return out

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """The history rows written since the last poll, one Record each."""
        for payload in self._log.poll(final=final):
            record = self._cls()
            try:
                record.ParseFromString(payload)
            except Exception:  # protobuf's DecodeError (the payload passed its checksum)
                self._problem(f"record {self._log.records} is not a W&B record; skipped")
                continue
            kind = record.WhichOneof("record_type")
            if kind == "history":
                row = self._row(record.history)
                if row is not None:
                    yield row
            elif kind == "run":
                self._config.update(_items(record.run.config.update, self._problem))
            elif kind == "config":
                self._config.update(_items(record.config.update, self._problem))
            elif kind == "metric" and record.metric.step_metric:
                glob = record.metric.glob_name or record.metric.name
                self._step_metrics.append((glob, record.metric.step_metric))
            elif kind == "exit":
                self._exit = record.exit.exit_code
        self._config.pop("_wandb", None)
        self._say_unstored(final)

    def _say_unstored(self, final: bool) -> None:
        """Each key holding values that are not numbers, and each kind of wall time that is
        not one, said once per file with the rows it was in (per row would flood the output:
        a text key is usually logged at every step)."""
        so_far = "" if final else " so far"
        for (key, kind), rows in sorted(self._unstored.items()):
            if (key, kind) not in self._said:
                self._said.add((key, kind))
                self._problem(
                    f"key {key!r} holds {kind}, not a storable number, in {rows} history row(s){so_far}; "
                    "not stored (only numbers are: log a number to chart it)",
                    part=True,
                )
        for time_seen, rows in sorted(self._bad_times.items()):
            if ("_timestamp", time_seen) not in self._said:
                self._said.add(("_timestamp", time_seen))
                self._problem(
                    f"_timestamp is {time_seen}, not a time, in {rows} history row(s){so_far}; "
                    "their values are stored with the time they were read instead",
                    kept=True,
                )

    def _row(self, history: Any) -> Record | None:
        self._history += 1
        items = _items(history.item, self._problem)
        media = {key[: -len("._type")] for key in items if key.endswith("._type")}
        values: dict[str, float] = {}
        for key, value in items.items():
            if key.startswith("_"):
                continue
            if key in media or any(key.startswith(group + ".") for group in media):
                continue
            kind = _not_a_number(value)
            number = as_value(value) if kind is None else None
            if number is None:
                self._unstored[key, kind or "no number"] += 1
                continue
            values[key] = number
        if not values.keys() - {metric for _, metric in self._step_metrics}:
            return None  # a row of media or text only (said above), or a step metric W&B copied
        step = self._step(values, items.get("_step", history.step.num))
        if step is None:
            return None
        for _, metric in self._step_metrics:
            values.pop(metric, None)
        self._rows += 1
        return Record(step=step, values=values, wall_time=self._wall(items))

    def _wall(self, items: dict[str, Any]) -> float | None:
        """The row's `_timestamp`; None (the time it is read, downstream) when it has none or
        one that is no time: a NaN or infinite one cannot be stored as a point's time."""
        if "_timestamp" not in items:
            return None
        at = items["_timestamp"]
        wall = as_value(at) if _not_a_number(at) is None else None
        if wall is not None and math.isfinite(wall):
            return wall
        self._bad_times[shown(at)] += 1
        return None

    def _step(self, values: dict[str, float], counter: Any) -> int | None:
        """The row's step: the step metric defined for its keys, else W&B's `_step`."""
        wanted = None
        for glob, metric in self._step_metrics:
            if not any(fnmatchcase(key, glob) for key in values if key != metric):
                continue
            value = values.get(metric)
            if (
                value is not None
                and math.isfinite(value)
                and 0 <= value <= MAX_STEP
                and value.is_integer()
            ):
                self._step_source = self._step_source or f"{metric} (the run's W&B step metric)"
                return int(value)
            wanted = wanted or metric
        if wanted is not None:
            self._problem(
                f"history row {self._history} has no whole {wanted}, the step its keys are "
                "logged against; not placed"
            )
            return None
        step = counter
        if isinstance(counter, float) and math.isfinite(counter) and counter.is_integer():
            step = int(counter)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            self._problem(
                f"history row {self._history}: _step {shown(counter)} is not a whole number "
                ">= 0; not placed"
            )
            return None
        if step > MAX_STEP:
            self._problem(
                f"history row {self._history}: _step {step} is beyond the largest storable step "
                f"{MAX_STEP} (2**63 - 1); not placed"
            )
            return None
        self._step_source = self._step_source or "_step (W&B's step)"
        return step
