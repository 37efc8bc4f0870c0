"""Turn one `log()` call into outbox rows: resolve names, apply transforms, apply the bad-input policy.

This runs on the worker thread; the caller's thread only copies the dict. The `*_problem`
helpers are shared with the `strict` call-site checks so both sides give the same messages.
"""

from __future__ import annotations

import json
import logging
import math
import operator
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from registry import AmbiguousName, Registry, Resolution, ResolveError

from ..config import Policy
from ..counts import RunCounters
from ..schema import (
    CONFIG_FIELD,
    MAX_STEP,
    NO_RANK,
    RUN_CONFIG,
    SPREAD,
    TRANSFORMS_FIELD,
    UNREGISTERED,
    EventRow,
    FieldTransform,
    SampleBlock,
    SampleRow,
    nonfinite_field,
)
from .auto_read import AutoReading
from .derive import StepDeriver

__all__ = [
    "KEPT",
    "RESERVED_EVENT_FIELDS",
    "CallsOut",
    "LoggedValue",
    "Translator",
    "config_rows",
    "event_field_problem",
    "event_problem",
    "limits_problem",
    "name_problem",
    "several",
    "short_repr",
    "step_problem",
    "text_problem",
    "to_number",
    "value_problem",
]

_log = logging.getLogger("exporter")

# A resolved name: (field, group, gpu, transform or None for identity, lowest and highest value
# within the physical limits, resolution, precedence among names for the same field: a canonical
# id first, then aliases in list order, and (field, gpu))
_Target = tuple[
    str, str, str, Callable[[float], float] | None, float, float, Resolution, int, tuple[str, str]
]
_TARGET_CACHE = 10_000
_EVIDENCE = 200  # distinct names the framework is detected from
_WARN_EACH = 20  # warnings said per kind (then one line saying the rest are not)
_WARN_KINDS = {
    "name": "names stored as logged",
    "value": "values rejected",
    "limits": "values outside their metric's limits",
    "event": "events rejected",
}
KEPT = ""
"""The target of a name the registry declares a framework's bookkeeping key: stored under
`unregistered` as any name that is not a metric, without the warning an unknown name gets."""

_PLAIN_NUMBERS = frozenset({float, int})
_PLAIN_JUNK = frozenset({float, int, str, bytes, type(None)})  # what a block rejects itself

CallsOut = tuple[SampleBlock | None, list[SampleRow], list[EventRow], tuple[int, int, int]]
"""What `Translator.log_calls` makes of consecutive calls, in order: a columnar block with rows
stored beside it, or (no block) one call's rows and events from `log`; and the (accepted,
unregistered, events) counts they stand for under `defer_counts` (`take_held`'s)."""


@dataclass(frozen=True)
class _CallsShape:
    """What `log` decides for calls that logged the same names, on the names alone."""

    refused: int  # names refused per call (unknown under `drop`, unstorable)
    refused_cols: frozenset[int]
    unregistered: int
    accepted: int  # registered names per call
    chosen: list[int]  # the column behind each stored column
    stored_as: list[tuple[str, str, str]]  # (measurement, gpu, field) of each stored column
    metrics: list[tuple[tuple[str, str], int]]  # (metric key, stored column)
    contested: frozenset[int]  # columns sharing their metric with another column
    noted: list[tuple[int, str, str, Resolution]]  # transformed columns: (column, field, name)


LoggedValue = float | Sequence[float]
"""What `log()` takes per name: one number, or a list of the several values logged at one step
(one per finishing episode). A list is stored as its mean under the name's field, and its
count, min and max under measurement `SPREAD` as `<field>/count`, `<field>/min`, `<field>/max`."""

# `from_step` is the integer field of `resume` events: a user field of that name would give it
# two types in one measurement, which InfluxDB refuses.
RESERVED_EVENT_FIELDS = frozenset(
    {"text", "step", "wall_time", "run", "project", "kind", "rank", "from_step"}
)


def text_problem(what: str, text: str) -> str | None:
    """Why `text` cannot be stored (a lone surrogate has no UTF-8 form), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        return (
            f"{what} {text!r} holds {bad!r} at index {exc.start}, which is not valid UTF-8 "
            "(a lone surrogate, often from decoding bytes with errors='surrogateescape'); "
            "decode it with errors='replace' or 'backslashreplace'"
        )
    return None


_NAME_LIMIT = 256


def name_problem(what: str, name: str) -> str | None:
    """Why `name` (a tag value or field key: run, project, event kind, metric or event field
    name) cannot be stored exactly, or None. InfluxDB's line protocol has no way to write a
    newline or NUL in a name, nor a name ending in a backslash (the backslash would escape the
    separator after it: InfluxDB 1.6 refuses every escaping of it); rather than store another
    name, the name is refused."""
    problem = text_problem(what, name)
    if problem is not None:
        return problem
    if "\n" in name or "\x00" in name:
        return f"{what} {name!r} holds a newline or NUL, which InfluxDB cannot store in a name"
    if name.endswith("\\"):
        return (
            f"{what} {name!r} ends in a backslash, which InfluxDB cannot store at the end of a "
            "name; drop or replace the trailing backslash"
        )
    if len(name) > _NAME_LIMIT:
        return f"{what} {name[:40]!r}... is {len(name)} characters; names stop at {_NAME_LIMIT}"
    return None


def _bounded_repr() -> reprlib.Repr:
    shown = reprlib.Repr()  # attributes, not keywords: Python 3.11's Repr takes none
    shown.maxlevel, shown.maxstring, shown.maxother = 2, 60, 60
    shown.maxlist = shown.maxtuple = shown.maxdict = shown.maxset = 4
    return shown


_REPR = _bounded_repr()


def short_repr(value: object) -> str:
    """`repr` cut to a line: a message must name a bad value without recursing into a deeply
    nested one (RecursionError) or printing a huge one; reprlib bounds depth and length."""
    try:
        return _REPR.repr(value)
    except Exception as exc:  # a __repr__ that raises still gets a message
        return f"<{type(value).__name__} whose repr raised {type(exc).__name__}>"


def step_problem(step: object) -> str | None:
    """Why `step` cannot be a training step, or None."""
    if isinstance(step, bool):
        return f"step {step} is a bool; pass the integer training step"
    try:
        value = operator.index(step)  # type: ignore[arg-type]
    except TypeError:
        return (
            f"step {short_repr(step)} ({type(step).__name__}) is not an integer; pass the integer "
            "training step (e.g. int(global_step))"
        )
    if value < 0:
        return f"step {value} is negative; training steps count up from 0"
    if value > MAX_STEP:
        return (
            f"step {value} is beyond the largest storable step {MAX_STEP} (2**63 - 1, a 64-bit "
            "integer: InfluxDB timestamps and the outbox stop there)"
        )
    return None


def to_number(value: object) -> float | None:
    """The value as a float, or None when it is not numeric (strings are never numbers here)."""
    if value.__class__ is float:
        return value
    if isinstance(value, str | bytes | bytearray) or value is None:
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def value_problem(name: object, value: object, step: int) -> str | None:
    if not isinstance(name, str) or not name:
        return f"metric name {short_repr(name)} at step {step} is not a non-empty string"
    problem = text_problem("metric name", name)
    if problem is not None:
        return f"{problem} (at step {step})"
    values = several(value)
    if values is not None:
        if not len(values):
            return f"{name!r} at step {step} is an empty list; log at least one value"
        if _members(values) is None:
            return (
                f"{name!r} at step {step} is a list holding a non-number; a list means several "
                "values at one step and must hold only numbers"
            )
        return None
    if to_number(value) is None:
        return (
            f"value {short_repr(value)} ({type(value).__name__}) of {name!r} at step {step} is not "
            "a number; "
            "log floats, ints, numpy scalars or 0-d tensors"
        )
    return None


def limits_problem(
    registry: Registry, res: Resolution, name: str, value: float, step: int
) -> str | None:
    metric = registry.metric(res.metric)
    if math.isfinite(value) and not metric.limits.contains(value):
        shown = "" if name == res.field else f" (from {name!r}, {res.transform.describe()})"
        return (
            f"{res.field}={value!r}{shown} at step {step} is outside its physical limits "
            f"[{metric.limits.min}, {metric.limits.max}]: {metric.limits.reason}"
        )
    return None


def event_field_problem(key: object, value: object) -> str | None:
    if not isinstance(key, str) or not key:
        return f"event field name {short_repr(key)} is not a non-empty string"
    if key in RESERVED_EVENT_FIELDS:
        return f"event field {key!r} is reserved; use another name"
    if not isinstance(value, str | int | float | bool):
        return f"event field {key}={short_repr(value)} must be a str, int, float or bool"
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)  # event numbers are stored as floats
        except OverflowError:
            return (
                f"event field {key!r} holds an integer of {value.bit_length()} bits, beyond a float"
            )
    problem = name_problem("event field name", key)
    if problem is None and isinstance(value, str):
        problem = text_problem(f"event field {key!r} value", value)
    return problem


def event_problem(step: object, kind: object, text: object) -> str | None:
    """Why an event's step, kind or text cannot be stored, or None (fields: `event_field_problem`)."""
    problem = step_problem(step)
    if problem is None and (not isinstance(kind, str) or not kind.strip()):
        problem = f"event kind {short_repr(kind)} must be a non-empty string"
    if problem is None:
        assert isinstance(kind, str)
        problem = name_problem("event kind", kind.strip())
    if problem is None:
        problem = text_problem("event text", text if isinstance(text, str) else str(text))
    return problem


def several(value: object) -> Sequence[Any] | None:
    """The values of a name logged several times at one step (a list, a tuple, or a 1-d numpy
    array or tensor), or None for a single value."""
    if isinstance(value, list | tuple):
        return value
    if getattr(value, "ndim", None) == 1 and hasattr(value, "__iter__"):
        return list(value)
    return None


def _first_number(raw: object) -> float | None:
    """A logged value as a number (the first of several), or None when it is not one."""
    listed = several(raw) if raw is not None else None
    if listed is not None:
        members = _members(listed)
        return members[0] if members else None
    return to_number(raw)


def _members(raw: Sequence[Any]) -> list[float] | None:
    """The numbers of a list of values logged at one step, or None when one is not a number."""
    out = []
    for item in raw:
        number = to_number(item)
        if number is None:
            return None
        out.append(number)
    return out


def _nonfinite_note(field: str, value: float, name: str, *, registered: bool) -> str:
    """How a non-finite value not written is named in its call's `health` event."""
    if not registered:
        return f"{field}={value!r} (unregistered {name!r})"
    origin = "" if name == field else f" from {name!r}"
    return f"{field}={value!r}{origin}"


def _nonfinite_event(
    run: str, rank: int, step: int, notes: Sequence[str], wall_time: float
) -> EventRow:
    """The `health` event of a call that had non-finite values (`notes`, in the call's order)."""
    text = "non-finite value(s) not written: " + ", ".join(notes)
    return (run, rank, step, "health", text, "{}", wall_time)


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                out[name] = number
    return out


def config_rows(
    run: str, rank: int | None, config: Mapping[str, Any], wall_time: float
) -> list[SampleRow]:
    """The `run_config` point at step 0: `config_json` plus every numeric hyperparameter."""
    rank_key = NO_RANK if rank is None else rank
    text = json.dumps(dict(config), sort_keys=True, default=str)
    rows: list[SampleRow] = [(run, rank_key, 0, RUN_CONFIG, "", CONFIG_FIELD, text, wall_time)]
    rows += [
        (run, rank_key, 0, RUN_CONFIG, "", name, value, wall_time)
        for name, value in sorted(_flatten(config).items())
    ]
    return rows


class Translator:
    """Stateful per run: remembers the last step (to see resumes) and which names it warned about."""

    def __init__(
        self,
        registry: Registry,
        counters: RunCounters,
        *,
        run: str,
        rank: int | None,
        policy: Policy,
        framework: str | None,
        last_step: int | None,
        config: Mapping[str, Any] | None = None,
        transforms: Mapping[str, Sequence[FieldTransform]] | None = None,
        defer_counts: bool = False,
        deriver: StepDeriver | None = None,
        quiet: bool = False,
    ) -> None:
        """`deriver`: the derived metrics' state to go on from (a new one for `config`);
        `quiet`: say no warnings (another translator of the run says them: a sketch's)."""
        self._registry = registry
        # With `defer_counts`, accepted / unregistered / event counts wait for `settle()`, so a
        # run counts only what its store took.
        self._defer = defer_counts
        self._held = [0, 0, 0]
        self._deriver = deriver if deriver is not None else StepDeriver(registry, config)
        self._counters = counters
        self._run = run
        self._rank = NO_RANK if rank is None else rank
        self._policy = policy
        self._quiet = quiet
        self._framework = framework
        self._last_step = last_step
        # The highest step this translator stored at, and every field it stored a spread for
        # (several values at one step): a step logged again with one value replaces the spread
        # too, so the per-call path takes a step at or below it while any spread was stored.
        self._high = last_step
        self._spread_keys: dict[tuple[str, str], tuple[str, str]] = {}  # key -> (field, gpu)
        self._warned: set[str] = set()
        self._warnings: dict[str, int] = {}  # warnings said, per kind of key
        # The distinct names logged so far (bounded): what the framework is detected from. A
        # count of names logged would let one name logged 200 times end the detection before
        # the name that tells the framework arrives. Grown where a name is first resolved, so
        # the hot path pays nothing, and by the whole call when one of its names is ambiguous.
        self._evidence: dict[str, None] = {}
        self._call: Iterable[Any] = ()  # the names of the call being translated
        self._at: tuple[int, float] = (0, 0.0)  # its step and wall time
        self._tried = 0  # how many names of the evidence the last failed detection read
        self._detected: str | None = None
        # One decision per name for the run, whatever path translates it (per call, a run of
        # calls as columns, a log's block, a restart going on with the run): what a name that
        # means different things in different frameworks is stored as, decided the first time
        # it is logged and never cleared (the resolution cache below can be), so a field never
        # changes meaning in the middle of a run. `_as_logged`: those decided before anything
        # told the framework, stored under `unregistered`; `_recorded`: the framework the run's
        # stored transforms record says such a name was read with (a run going on).
        self._decided: dict[str, _Target | str] = {}
        self._as_logged: dict[str, None] = {}
        self._recorded: dict[str, str] = {
            t.name: t.framework
            for ts in (transforms or {}).values()
            for t in ts
            if t.framework is not None
        }
        self._notices: list[EventRow] = []
        self._targets: dict[str | None, dict[str, _Target | str]] = {}
        # (field, logged name) -> how it was transformed; the run's record, grown as names appear
        self._transforms: dict[tuple[str, str], FieldTransform] = {
            (t.field, t.name): t for ts in (transforms or {}).values() for t in ts
        }
        self._transforms_changed = False
        # the wall time of the call whose value first used a transform noted since the last
        # `take_transform_rows`: a block of calls records it as its calls one at a time would
        self._noted_wall: float | None = None
        # unknown names read as a metric by themselves (registry/auto_map.py), decided once
        self._auto = AutoReading(registry, transforms or {})
        # the values of the call being translated, by name (first finite value of a column):
        # what an unknown name is decided with
        self._values: Callable[[str], float | None] = lambda name: None

    @property
    def deriver(self) -> StepDeriver:
        """The derived metrics' state (where a run going on elsewhere starts from)."""
        return self._deriver

    @property
    def last_step(self) -> int | None:
        """The step of the last sample logged (a resume is a step below it)."""
        return self._last_step

    def restart_from(self, step: int | None) -> None:
        """Take `step` as the step the run was last at."""
        if step is None:
            self._last_step = None
        else:
            self._stored_at(step)

    def _stored_at(self, step: int) -> None:
        """A step's rows were made: it is the step the run is at, and maybe its highest."""
        self._last_step = step
        if self._high is None or step > self._high:
            self._high = step

    def _goes_back(self, step: int) -> bool:
        """Whether `log` at `step` would report a resume, which a block does not, or replace a
        spread stored at it, which a block does not write: such a step goes through `log`."""
        last = self._last_step
        return (last is not None and step < last) or self._relogs_spread(step)

    def _relogs_spread(self, step: int) -> bool:
        """Whether `step` may be one stored before with a spread the per-call path replaces
        (a block path never writes spreads, so it hands such a step to `log`)."""
        return bool(self._spread_keys) and self._high is not None and step <= self._high

    def take_transform_rows(self, wall_time: float) -> list[SampleRow]:
        """The `run_config` row recording every transform seen so far, when one was added since
        the last call (store it beside the rows of the `log` call that added it)."""
        if not self._transforms_changed:
            return []
        self._transforms_changed = False
        noted, self._noted_wall = self._noted_wall, None
        return self.transform_rows(wall_time if noted is None else noted)

    def transform_rows(self, wall_time: float) -> list[SampleRow]:
        """The `run_config` row recording every transform seen so far (none if none)."""
        if not self._transforms:
            return []
        record: dict[str, list[dict[str, Any]]] = {}
        for (field, _), t in sorted(self._transforms.items()):
            record.setdefault(field, []).append(t.as_json())
        text = json.dumps(record, sort_keys=True)
        return [(self._run, self._rank, 0, RUN_CONFIG, "", TRANSFORMS_FIELD, text, wall_time)]

    def _note_transform(
        self, field: str, name: str, res: Resolution, wall_time: float | None = None
    ) -> None:
        """Record that `name` is stored as `field` through its transform, first applied to a
        value logged at `wall_time`."""
        if (field, name) not in self._transforms:
            t = res.transform
            self._transforms[(field, name)] = FieldTransform(
                field, name, t.kind, t.factor, res.framework
            )
            self._transforms_changed = True
            if wall_time is not None:
                seen = self._noted_wall
                self._noted_wall = wall_time if seen is None else min(seen, wall_time)

    def _warn(self, key: str, message: str) -> None:
        """Say `message` once per `key`, and at most `_WARN_EACH` times per kind of key (a log
        of 10,000 unknown names said 10,000 lines): what is not said is still counted."""
        if self._policy != "warn" or self._quiet or key in self._warned:
            return
        self._warned.add(key)
        kind = key.partition(":")[0]
        said = self._warnings.get(kind, 0)
        self._warnings[kind] = said + 1
        if said < _WARN_EACH:
            _log.warning("rlvitals run %r: %s", self._run, message)
        elif said == _WARN_EACH:
            _log.warning(
                "rlvitals run %r: %d warnings of this kind (%s) said; the next are not said one "
                "by one (each is still counted in the run's unregistered and rejected counts)",
                self._run,
                _WARN_EACH,
                _WARN_KINDS.get(kind, kind),
            )

    def _target(self, name: str, framework: str | None) -> _Target | str:
        """What a name translates to (cached), or the message saying why it is unknown."""
        if framework is None:
            decided = self._decided.get(name)
            if decided is not None:
                self._targets.setdefault(None, {})[name] = decided
                return decided
        if len(self._evidence) < _EVIDENCE and name not in self._evidence:
            self._evidence[name] = None
            if self._as_logged and self._detected is None:
                self._detect()
        target: _Target | str
        try:
            res = self._registry.resolve(name, framework)
        except AmbiguousName as exc:
            if framework is not None:
                return str(exc)
            target = self._decide(name, exc)
        except ResolveError as exc:
            # a framework's own counter or clock (SB3's time/iterations): kept, not warned about
            kept = self._registry.bookkeeping_key(name, framework or self._detected)
            target = KEPT if kept is not None else self._read_by_itself(name, framework, str(exc))
        else:
            target = self._make_target(res)
        cache = self._targets.setdefault(framework, {})
        if len(cache) >= _TARGET_CACHE:
            cache.clear()
        cache[name] = target
        return target

    def _read_by_itself(self, name: str, framework: str | None, unknown: str) -> _Target | str:
        """An unknown name's target: its metric when the run decided (now, or when it was first
        logged) that its name and first value say so (`auto_read`), else the resolver's
        message (stored as logged). A new decision is recorded and said as an event."""
        res, new = self._auto.decide(
            name, lambda: self._values(name), lambda: self._logged_metrics(framework)
        )
        if res is None:
            return unknown
        if new:
            self._transforms[(res.field, name)] = AutoReading.record(res, name)
            self._transforms_changed = True
            text = (
                f"{name!r} is read as {res.metric}: no framework's spelling, but its last part "
                f"is one the registry has for {res.metric} alone and its first value "
                f"({self._values(name):.6g}) is inside its limits; --map {name}= (or "
                f"Registry.keeping) keeps it as logged, --map {name}=METRIC reads it as another"
            )
            self._notice(f"auto:{name}", text, {"name": name, "metric": res.metric})
        return self._make_target(res)

    def _logged_metrics(self, framework: str | None) -> set[str]:
        """The metrics the run logs, so far, under names the registry knows."""
        out = set()
        names = [*self._evidence, *self._call]
        for name in names:
            if name.__class__ is not str:
                continue
            try:
                out.add(self._registry.resolve(name, framework or self._detected).metric)
            except ResolveError:
                continue
        return out

    def _make_target(self, res: Resolution) -> _Target:
        metric = self._registry.metric(res.metric)
        limits = metric.limits
        transform = None if res.transform.kind == "identity" else res.transform.apply
        return (
            res.field,
            metric.group,
            res.label("gpu") or "",
            transform,
            -math.inf if limits.min is None else limits.min,
            math.inf if limits.max is None else limits.max,
            res,
            -1 if res.alias is None else res.alias.precedence,
            (res.field, res.label("gpu") or ""),
        )

    def _decide(self, name: str, ambiguous: AmbiguousName) -> _Target | str:
        """The run's one decision for a name whose meaning depends on the framework, none
        given: the framework the run's record says it was read with, else the one the names
        logged so far tell (this call's included), else the name is stored as logged (under
        `unregistered`) for the whole run. Never its metric at some steps and not at others."""
        framework = self._recorded.get(name)
        if framework is None:
            self._note_names(self._call)
            framework = self._detect()
        decided: _Target | str = str(ambiguous)
        if framework is not None:
            try:
                decided = self._make_target(self._registry.resolve(name, framework))
            except ResolveError as exc:
                decided = str(exc)
        else:
            self._as_logged[name] = None
        self._decided[name] = decided
        return decided

    def _detect(self) -> str | None:
        """The framework the distinct names logged so far tell, once they tell one."""
        if self._detected is None and self._tried < len(self._evidence):
            self._tried = len(self._evidence)
            self._detected = self._registry.detect_framework(self._evidence)
            if self._detected is not None and self._as_logged:
                self._tell_decided(self._detected)
        return self._detected

    def _tell_decided(self, framework: str) -> None:
        """The names logged told the framework after names that depend on it were decided as
        logged: they stay as they are for the run (a field keeps one meaning), and an event at
        this step says so, with how to have them stored as their metric."""
        told = []
        for name in self._as_logged:
            try:
                res = self._registry.resolve(name, framework)
            except ResolveError:
                continue
            how = "" if res.transform.kind == "identity" else f" ({res.transform.describe()})"
            told.append(f"{name!r} (a {framework} run stores it as {res.field}{how})")
        if not told:
            return
        step = self._at[0]
        text = (
            f"the names logged by step {step} tell the framework: {framework}. Logged before "
            f"that, {', '.join(told)} stay(s) stored as logged under '{UNREGISTERED}' for the "
            "whole run, so that no field changes meaning in the middle of it; pass "
            f"framework={framework!r} to init() (--framework {framework} to import or tail) to "
            "store them as their metric from the first step"
        )
        names = ", ".join(self._as_logged)
        self._notice(f"decided:{framework}", text, {"framework": framework, "names": names})

    def _notice(self, key: str, text: str, fields: Mapping[str, str]) -> None:
        """A decision of the translation itself: warned once (`key`), and recorded as a
        `translation` event at the step being translated (counted now; stored with its rows)."""
        self._warn(key, text)
        step, wall = self._at
        row = (self._run, self._rank, step, "translation", text, json.dumps(fields), wall)
        self._notices.append(row)
        if self._defer:
            self._held[2] += 1
        else:
            with self._counters.lock:
                self._counters.events += 1

    def take_notices(self) -> list[EventRow]:
        """Events the translation itself recorded since the last call (a decision the names
        logged later would have made otherwise): store them beside the rows translated."""
        notices, self._notices = self._notices, []
        return notices

    def _refuses_unknown(self, name: str, message: str, step: int) -> bool:
        """Whether a name the registry does not know is refused (policy drop, or a name no
        store can hold); else it is stored under `unregistered`, said once per name."""
        if self._policy == "drop":
            return True
        problem = name_problem("metric name", name)
        if problem is not None:
            self._warn(f"value:{name!r}", f"{problem} (at step {step}); rejected")
            return True
        if message != KEPT:
            self._warn(f"name:{name}", f"{message} Stored under measurement '{UNREGISTERED}'.")
        return False

    def _note_names(self, names: Iterable[Any]) -> None:
        evidence = self._evidence
        for name in names:
            if len(evidence) >= _EVIDENCE:
                return
            if isinstance(name, str):
                evidence[name] = None

    def log(
        self,
        step: object,
        values: Mapping[Any, Any],
        wall_time: float,
        framework: str | None,
    ) -> tuple[list[SampleRow], list[EventRow]]:
        if step.__class__ is not int or step < 0 or step > MAX_STEP:
            problem = step_problem(step)
            if problem is not None:
                with self._counters.lock:
                    self._counters.rejected += len(values)
                self._warn(
                    f"step:{type(step).__name__}", f"{problem}; {len(values)} sample(s) rejected"
                )
                return [], []
        istep: int = operator.index(step)  # type: ignore[arg-type]
        framework = framework or self._framework
        self._call = values
        self._values = lambda name: _first_number(values.get(name))
        self._at = (istep, wall_time)
        rows: list[SampleRow] = []
        events: list[EventRow] = []
        nonfinite: list[str] = []
        accepted = rejected = unregistered = 0
        latest: dict[tuple[str, str], float] = {}
        preferred: dict[tuple[str, str], int] = {}  # only precedences other than 0
        # several values at one step: (measurement-free key) -> (field, gpu, count, min, max)
        spreads: dict[tuple[str, str], tuple[str, str, int, float, float]] = {}
        # registry metrics' non-finite values at this step, (field, gpu) -> how many: stored as
        # `<field>/nonfinite` so a reader can tell "all NaN" from "never logged"
        marks: dict[tuple[str, str], int] = {}
        targets = self._targets.get(framework)
        if targets is None:
            targets = self._targets[framework] = {}
        run, rank = self._run, self._rank
        isfinite = math.isfinite
        relogged = self._relogs_spread(istep)
        for name, raw in values.items():
            members: list[float] | None = None
            if raw.__class__ is float and name.__class__ is str and name:
                value: float = raw
            else:
                problem = value_problem(name, raw, istep)
                if problem is not None:
                    rejected += 1
                    self._warn(f"value:{name}", f"{problem}; rejected")
                    continue
                listed = several(raw)
                if listed is not None:
                    members = _members(listed)
                    assert members
                    value = members[0]
                else:
                    number = to_number(raw)
                    assert number is not None
                    value = number
            target = targets.get(name)
            if target is None:
                target = self._target(name, framework)
            if isinstance(target, str):  # unknown name: the resolver's message
                if self._refuses_unknown(name, target, istep):
                    rejected += 1
                    continue
                field = name
                if members is not None:
                    summary = self._summarise(
                        members, field, f" (unregistered {name!r})", nonfinite
                    )
                    if summary is None:
                        continue
                    value = summary[0]
                    spreads[(f"unregistered:{field}", "")] = (field, "", *summary[1:])
                elif relogged and (f"unregistered:{field}", "") in self._spread_keys:
                    spreads[(f"unregistered:{field}", "")] = (field, "", 1, value, value)
                if isfinite(value):
                    rows.append((run, rank, istep, UNREGISTERED, "", field, value, wall_time))
                    unregistered += 1
                else:
                    nonfinite.append(_nonfinite_note(field, value, name, registered=False))
                    self._count_nonfinite(field)
                continue
            field, group, gpu, transform, low, high, res, precedence, key = target
            spread: tuple[int, float, float] | None = None
            if members is not None:
                converted = [self._convert(transform, m) for m in members]
                bad = sum(1 for m in converted if not isfinite(m))
                if bad:
                    marks[(field, gpu)] = marks.get((field, gpu), 0) + bad
                origin = "" if name == field else f" from {name!r}"
                summary = self._summarise(converted, field, origin, nonfinite)
                if summary is None:
                    continue
                canonical, count, lowest, highest = summary
                outside = lowest if lowest < low else highest if highest > high else None
                if outside is not None:
                    problem = limits_problem(self._registry, res, name, outside, istep)
                    if problem is not None:
                        rejected += 1
                        self._warn(f"limits:{field}", f"{problem}; rejected")
                        continue
                spread = (count, lowest, highest)
            else:
                canonical = value if transform is None else self._convert(transform, value)
            # x - x is 0.0 for every finite x and NaN (true) for NaN and both infinities
            if canonical - canonical or not low <= canonical <= high:
                if not isfinite(canonical):
                    nonfinite.append(_nonfinite_note(field, canonical, name, registered=True))
                    self._count_nonfinite(field)
                    marks[(field, gpu)] = marks.get((field, gpu), 0) + 1
                    continue
                problem = limits_problem(self._registry, res, name, canonical, istep)
                if problem is not None:
                    rejected += 1
                    self._warn(f"limits:{field}", f"{problem}; rejected")
                    continue
            accepted += 1
            if key in latest:
                # Two names for one metric in one call (CleanRL's approx_kl and old_approx_kl):
                # the registry's alias order says which one the metric is.
                if precedence >= preferred.get(key, 0):
                    continue
                rows = [r for r in rows if (r[5], r[4], r[3]) != (field, gpu, group)]
                spreads.pop(key, None)
            if precedence:
                preferred[key] = precedence
            if transform is not None:
                self._note_transform(field, name, res, wall_time)
            rows.append((run, rank, istep, group, gpu, field, canonical, wall_time))
            latest[key] = canonical
            if spread is not None:
                spreads[key] = (field, gpu, *spread)
            elif relogged and key in self._spread_keys:
                # this step held several values before: its one value now is their spread too,
                # else the stored max could sit below the stored value
                spreads[key] = (field, gpu, 1, canonical, canonical)
        for key, (field, gpu, *_) in spreads.items():
            self._spread_keys[key] = (field, gpu)
        for (field, gpu), count in marks.items():
            mark = nonfinite_field(field)
            rows.append((run, rank, istep, SPREAD, gpu, mark, float(count), wall_time))
        for field, gpu, count, lowest, highest in spreads.values():
            rows.append((run, rank, istep, SPREAD, gpu, f"{field}/count", float(count), wall_time))
            rows.append((run, rank, istep, SPREAD, gpu, f"{field}/min", lowest, wall_time))
            rows.append((run, rank, istep, SPREAD, gpu, f"{field}/max", highest, wall_time))
        if latest or nonfinite:
            for group, field, value in self._deriver.derive(istep, latest, len(nonfinite)):
                rows.append((run, rank, istep, group, "", field, value, wall_time))
                latest[(field, "")] = value
        if nonfinite:
            events.append(_nonfinite_event(self._run, self._rank, istep, nonfinite, wall_time))
        if self._last_step is not None and istep < self._last_step and (rows or nonfinite):
            text = (
                f"step went back from {self._last_step} to {istep}: resumed from a checkpoint; "
                f"steps from {istep} on are overwritten"
            )
            fields = json.dumps({"from_step": self._last_step})
            events.append((self._run, self._rank, istep, "resume", text, fields, wall_time))
        if rows or nonfinite:
            self._stored_at(istep)
        with self._counters.lock:
            c = self._counters
            c.rejected += rejected
            if self._defer:
                held = self._held
                held[0] += accepted
                held[1] += unregistered
                held[2] += len(events)
            else:
                c.accepted += accepted
                c.unregistered += unregistered
                c.events += len(events)
            if rows:
                c.step = istep
                c.rate_window.append((wall_time, istep))
            c.latest.update(latest)
        if self._notices:  # counted when recorded
            events += self.take_notices()
        return rows, events

    def log_calls(
        self,
        steps: Sequence[Any],
        rows: Sequence[Sequence[Any]],
        names: Sequence[Any],
        wall_times: Sequence[float],
        framework: str | None,
    ) -> list[CallsOut] | None:
        """What `log` makes of consecutive calls that logged the same `names` (in that order;
        `rows[i]` their values at `steps[i]`), in order, with the counts and state one `log` per
        call leaves. Runs of plain calls (steps rising from the last one, values Python floats
        or ints) go as columnar blocks, and a value outside its
        physical limits is rejected there as `log` rejects it (counted, said once per field):
        rejecting costs what storing costs (a rejected or non-finite value is a hole in the
        block, a non-finite one said at its call as `log` says it; where two names log one
        metric, the block decides per call which one is stored, as `log` does). A call that is
        not plain (a step going back, a value that is not a float, int, str, bytes or None, or
        every metric of the call rejected or non-finite) goes through `log` itself, in its
        place.
        None, with nothing changed, when the names are not plain: `log` takes every call."""
        for name in names:
            if name.__class__ is not str or not name or text_problem("metric name", name):
                return None
        count, width = len(steps), len(names)
        given = framework
        framework = framework or self._framework
        targets = self._targets.get(framework)
        if targets is None:
            targets = self._targets[framework] = {}
        # the whole call's names are evidence before any of them is decided, as in `log`
        self._call = names
        column = {name: i for i, name in enumerate(names)}
        self._values = lambda name: _first_number(
            rows[0][column[name]] if name in column and rows else None
        )
        first = steps[0]
        self._at = (first if first.__class__ is int else 0, wall_times[0])
        plan = [targets.get(name) or self._target(name, framework) for name in names]
        plain, junk = self._plain_calls(steps, rows, width)
        matrix = np.full((count, width), np.nan)
        at = [k for k in range(count) if plain[k]]
        numbers = [rows[k] for k in at]
        if junk:  # a placeholder where a value is not a number: rejected below
            held = {k: list(rows[k]) for k, _ in junk}
            for k, j in junk:
                held[k][j] = 0.0
            numbers = [held.get(k, rows[k]) for k in at]
        try:
            matrix[at] = np.array(numbers, dtype=np.float64).reshape(-1, width)
        except (TypeError, ValueError, OverflowError):
            for k, row in zip(at, numbers, strict=True):  # the call a float cannot hold
                try:
                    matrix[k] = np.array(row, dtype=np.float64)
                except (TypeError, ValueError, OverflowError):
                    plain[k] = False
        canonical = matrix.copy()
        low = np.full(width, -np.inf)
        high = np.full(width, np.inf)
        with np.errstate(all="ignore"):
            for j, target in enumerate(plan):
                if isinstance(target, str):
                    continue
                low[j], high[j] = target[4], target[5]
                how = target[6].transform
                if how.kind == "negate":
                    canonical[:, j] = -matrix[:, j]
                elif how.kind == "scale":
                    canonical[:, j] = matrix[:, j] * how.factor
                elif how.kind == "reciprocal":  # of 0: +inf, as `Transform.apply`
                    canonical[:, j] = np.where(matrix[:, j] == 0, np.inf, how.factor / matrix[:, j])
            finite = np.isfinite(canonical)
            good = (canonical >= low) & (canonical <= high) & finite
        not_numbers = np.zeros((count, width), dtype=np.bool_)
        for k, j in junk:
            not_numbers[k, j] = True
        good &= ~not_numbers
        # a non-finite value is not written: the block leaves a hole and says so per call
        nonfinite = ~finite & ~not_numbers
        shape = self._calls_shape(names, plan, steps[0])
        # a call that would store nothing goes through `log` (which leaves its step alone)
        kept = [j for j in range(width) if j not in shape.refused_cols]
        if kept:
            plain &= good[:, kept].any(axis=1)
        metric_cols = [j for j, target in enumerate(plan) if not isinstance(target, str)]
        if metric_cols:
            bad = ~good[:, metric_cols]
            # with every metric of a call rejected, `log` derives nothing for it (where two
            # names log one metric, the block decides per call which one is stored)
            plain &= ~bad.all(axis=1)
        out: list[CallsOut] = []
        k = 0
        while k < count:
            if not plain[k] or self._goes_back(steps[k]):
                values = dict(zip(names, rows[k], strict=True))
                r, e = self.log(steps[k], values, wall_times[k], given)
                out.append((None, r, e, self.take_held() if self._defer else (0, 0, 0)))
                k += 1
                continue
            end = k + 1
            while end < count and plain[end] and not self._relogs_spread(steps[end]):
                end += 1
            out += self._calls_block(
                shape,
                plan,
                names,
                steps[k:end],
                wall_times[k:end],
                canonical[k:end],
                (
                    good[k:end],
                    not_numbers[k:end],
                    nonfinite[k:end],
                    [rows[i] for i in range(k, end)],
                ),
            )
            k = end
        return out

    @staticmethod
    def _plain_calls(
        steps: Sequence[Any], rows: Sequence[Sequence[Any]], width: int
    ) -> tuple[npt.NDArray[np.bool_], list[tuple[int, int]]]:
        """Calls a block can take, on steps and value types alone: a Python int step past the
        one before it, every value a Python float or int, or a str, bytes or None (which `log`
        rejects: the cells returned, as (call, column))."""
        plain = np.ones(len(steps), dtype=np.bool_)
        junk: list[tuple[int, int]] = []
        before: int | None = None
        numbers = _PLAIN_NUMBERS
        for k, step in enumerate(steps):
            if step.__class__ is not int or step < 0 or step > MAX_STEP:
                plain[k] = False
                continue
            row = rows[k]
            if (before is not None and step <= before) or len(row) != width:
                plain[k] = False
            else:
                classes = {v.__class__ for v in row}
                if not classes <= numbers:
                    if classes <= _PLAIN_JUNK:
                        junk += [(k, j) for j, v in enumerate(row) if v.__class__ not in numbers]
                    else:
                        plain[k] = False
            before = step
        return plain, junk

    def _calls_shape(self, names: Sequence[str], plan: Sequence[Any], step: int) -> _CallsShape:
        """What `log` decides per call on names alone, decided once: the column that stands
        for each metric (the registry's preferred name when two name one metric), what is
        refused."""
        refused = unregistered = accepted = 0
        chosen: list[int] = []  # column of the calls behind each stored column
        stored_as: list[tuple[str, str, str]] = []  # (measurement, gpu, field)
        metrics: list[tuple[tuple[str, str], int]] = []  # (metric key, stored column)
        winners: dict[tuple[str, str], int] = {}
        preferred: dict[tuple[str, str], int] = {}
        columns_of: dict[tuple[str, str], list[int]] = {}
        noted: list[tuple[int, str, str, Resolution]] = []
        refused_cols: set[int] = set()
        for j, (name, target) in enumerate(zip(names, plan, strict=True)):
            if isinstance(target, str):
                if self._refuses_unknown(name, target, step):
                    refused += 1
                    refused_cols.add(j)
                    continue
                chosen.append(j)
                stored_as.append((UNREGISTERED, "", name))
                unregistered += 1
                continue
            field, group, gpu, transform, _, _, res, precedence, key = target
            accepted += 1
            columns_of.setdefault(key, []).append(j)
            if key in winners:
                if precedence >= preferred.get(key, 0):
                    continue
                chosen[winners[key]] = j
                stored_as[winners[key]] = (group, gpu, field)
            else:
                winners[key] = len(stored_as)
                metrics.append((key, len(stored_as)))
                chosen.append(j)
                stored_as.append((group, gpu, field))
            if precedence:
                preferred[key] = precedence
            if transform is not None:
                noted.append((j, field, name, res))
        contested = frozenset(j for cols in columns_of.values() if len(cols) > 1 for j in cols)
        return _CallsShape(
            refused,
            frozenset(refused_cols),
            unregistered,
            accepted,
            chosen,
            stored_as,
            metrics,
            contested,
            noted,
        )

    def _calls_block(
        self,
        shape: _CallsShape,
        plan: Sequence[Any],
        names: Sequence[str],
        steps: Sequence[int],
        wall_times: Sequence[float],
        canonical: npt.NDArray[np.float64],
        checked: tuple[
            npt.NDArray[np.bool_],
            npt.NDArray[np.bool_],
            npt.NDArray[np.bool_],
            list[Sequence[Any]],
        ],
    ) -> list[CallsOut]:
        """Plain calls at rising steps as columnar blocks: the columns nothing was rejected
        from as one block, each column with a rejected value as a block of the steps it was
        kept at; the derived rows beside the last. `checked`: which values are kept, which
        are not numbers, and the values as logged (for what a warning names)."""
        good, not_numbers, nonfinite, logged = checked
        n = len(steps)
        rejected_cells = rejected_unregistered = 0
        nonfinite_cells = nonfinite_unregistered = 0
        for j, target in enumerate(plan):
            if j in shape.refused_cols:
                continue  # counted once per call as refused, whatever its value
            kept = good[:, j]
            unwritten = int(np.count_nonzero(nonfinite[:, j]))
            missing = n - int(np.count_nonzero(kept)) - unwritten
            if isinstance(target, str):
                nonfinite_unregistered += unwritten
            else:
                nonfinite_cells += unwritten
            if not missing:
                continue
            if isinstance(target, str):
                rejected_unregistered += missing
            else:
                rejected_cells += missing
            if self._policy != "warn":
                continue
            i = int(np.flatnonzero(~kept & ~nonfinite[:, j])[0])
            if not_numbers[i, j]:
                if f"value:{names[j]}" not in self._warned:
                    problem = value_problem(names[j], logged[i][j], steps[i])
                    self._warn(f"value:{names[j]}", f"{problem}; rejected")
                continue
            assert not isinstance(target, str)
            field, res = target[0], target[6]
            if f"limits:{field}" not in self._warned:
                value = float(canonical[i, j])
                problem = limits_problem(self._registry, res, names[j], value, steps[i])
                self._warn(f"limits:{field}", f"{problem}; rejected")
        # each stored column's value and whether it holds one, per call
        values_of = canonical[:, shape.chosen]  # (a copy: fancy indexing)
        kept = good[:, shape.chosen]
        # the transformed columns: the calls each one's value was taken at
        noted = {j: (t_field, t_name, res) for j, t_field, t_name, res in shape.noted}
        for j in shape.contested:  # (a name the static order passes over may stand in)
            target = plan[j]
            if target[3] is not None:
                noted[j] = (target[0], names[j], target[6])
        taken = {j: good[:, j] for j in noted}
        self._decide_contested(shape, plan, canonical, good, values_of, kept, taken)
        notes = []
        for j, (t_field, t_name, res) in noted.items():
            first = np.flatnonzero(taken[j])
            if first.size:  # the first call whose value the transform was applied to
                notes.append((int(first[0]), j, t_field, t_name, res))
        for row, _, t_field, t_name, res in sorted(notes, key=lambda n: n[:2]):
            self._note_transform(t_field, t_name, res, wall_times[row])
        run, rank = self._run, self._rank
        # one block of every column that kept a value, a rejected value a hole (NaN) in it: a
        # block a column (the steps it was kept at) made a batch with a bad value in a quarter
        # of its calls eleven blocks, and stored at half the rate of one with none
        kept_cols = [p for p in range(len(shape.chosen)) if kept[:, p].any()]
        # block, the (accepted, unregistered) values it holds that it alone counts
        parts: list[tuple[SampleBlock, tuple[int, int]]] = []
        if kept_cols:
            values = values_of[:, kept_cols]
            holes = ~kept[:, kept_cols]
            if holes.any():
                values[holes] = np.nan
            columns = [shape.stored_as[p] for p in kept_cols]
            block = SampleBlock(
                run, rank, list(steps), list(wall_times), columns, np.ascontiguousarray(values)
            )
            parts.append((block, (0, 0)))
        marks, events, unwritten_at = self._unwritten(
            shape, plan, names, steps, wall_times, canonical, nonfinite
        )
        metric_cols = [at for _, at in shape.metrics]
        keys = [key for key, _ in shape.metrics]
        if shape.metrics:
            derived = self._deriver.derive_steps(
                steps, keys, values_of[:, metric_cols], kept[:, metric_cols], unwritten_at
            )
        else:  # as `log`: a call with no metric in it derives only a non-finite count it had
            derived = [
                (steps[i], *row)
                for i in np.flatnonzero(unwritten_at).tolist()
                for row in self._deriver.derive(steps[i], {}, int(unwritten_at[i]))
            ]
        wall_of = dict(zip(steps, wall_times, strict=True))
        extra: list[SampleRow] = marks + [
            (run, rank, step, group, "", field, value, wall_of[step])
            for step, group, field, value in derived
        ]
        latest: dict[tuple[str, str], float] = {}
        for key, col in zip(keys, metric_cols, strict=True):
            kept_at = np.flatnonzero(kept[:, col])
            if len(kept_at):
                latest[key] = float(values_of[kept_at[-1], col])
        for _, _, field, value in derived:
            latest[(field, "")] = value
        rejected = shape.refused * n + rejected_cells + rejected_unregistered
        accepted = shape.accepted * n - rejected_cells - nonfinite_cells
        unregistered = shape.unregistered * n - rejected_unregistered - nonfinite_unregistered
        stored = bool(parts) or bool(extra)
        if stored:
            self._stored_at(steps[-1])
        with self._counters.lock:
            c = self._counters
            c.rejected += rejected
            if not self._defer:
                c.accepted += accepted
                c.unregistered += unregistered
                c.events += len(events)
            if stored:
                c.step = steps[-1]
                c.rate_window.extend(zip(wall_times[-64:], steps[-64:], strict=True))
            c.latest.update(latest)
        out: list[CallsOut] = []
        own_accepted = sum(counted[0] for _, counted in parts)
        own_unregistered = sum(counted[1] for _, counted in parts)
        for k, (block, counted) in enumerate(parts):
            if not self._defer:
                held = (0, 0, 0)
            elif k == 0:  # the first block also counts what no block holds alone
                held = (
                    accepted - own_accepted + counted[0],
                    unregistered - own_unregistered + counted[1],
                    len(events),
                )
            else:
                held = (*counted, 0)
            out.append(
                (block, extra if k == len(parts) - 1 else [], events if k == 0 else [], held)
            )
        if not parts and (extra or events):
            held = (accepted, unregistered, len(events)) if self._defer else (0, 0, 0)
            out.append((None, extra, events, held))
        return out

    def _unwritten(
        self,
        shape: _CallsShape,
        plan: Sequence[Any],
        names: Sequence[str],
        steps: Sequence[int],
        wall_times: Sequence[float],
        canonical: npt.NDArray[np.float64],
        nonfinite: npt.NDArray[np.bool_],
    ) -> tuple[list[SampleRow], list[EventRow], npt.NDArray[np.int64]]:
        """What `log` makes of these calls' non-finite values (holes in the block): at each
        call with any, the `<field>/nonfinite` count of each registered field and a `health`
        event naming them in the call's order; how many each call had (the deriver's
        `nonfinite_count`); each one counted."""
        counts = np.zeros(len(steps), dtype=np.int64)
        marks: list[SampleRow] = []
        events: list[EventRow] = []
        cols = [j for j in range(nonfinite.shape[1]) if j not in shape.refused_cols]
        if not cols:
            return marks, events, counts
        run, rank = self._run, self._rank
        for i in np.flatnonzero(nonfinite[:, cols].any(axis=1)).tolist():
            said: list[str] = []
            per_field: dict[tuple[str, str], int] = {}
            for j in cols:
                if not nonfinite[i, j]:
                    continue
                target, name, value = plan[j], names[j], float(canonical[i, j])
                if isinstance(target, str):
                    field = name
                    said.append(_nonfinite_note(field, value, name, registered=False))
                else:
                    field, gpu = target[0], target[2]
                    said.append(_nonfinite_note(field, value, name, registered=True))
                    per_field[(field, gpu)] = per_field.get((field, gpu), 0) + 1
                self._count_nonfinite(field)
            step, wall = steps[i], wall_times[i]
            marks += [
                (run, rank, step, SPREAD, gpu, nonfinite_field(field), float(k), wall)
                for (field, gpu), k in per_field.items()
            ]
            events.append(_nonfinite_event(run, rank, step, said, wall))
            counts[i] = len(said)
        return marks, events, counts

    @staticmethod
    def _decide_contested(
        shape: _CallsShape,
        plan: Sequence[Any],
        canonical: npt.NDArray[np.float64],
        good: npt.NDArray[np.bool_],
        values_of: npt.NDArray[np.float64],
        kept: npt.NDArray[np.bool_],
        taken: dict[int, npt.NDArray[np.bool_]],
    ) -> None:
        """Where two names log one metric, which one each call stores, as `log` decides it:
        its names in call order, a rejected one skipped, the first kept one taken and replaced
        by a later one of a lower precedence number than the precedence noted so far (0 when
        none). Fills the metric's column of `values_of`/`kept`, and `taken`: the calls each
        transformed column's value was taken at (its transform is noted at the first)."""
        if not shape.contested:
            return
        columns_of: dict[tuple[str, str], list[int]] = {}
        for j in sorted(shape.contested):
            columns_of.setdefault(plan[j][8], []).append(j)
        stored_at = dict(shape.metrics)
        calls = np.arange(len(canonical))
        for key, cols in columns_of.items():
            winner = np.full(len(canonical), -1)
            noted = np.zeros(len(canonical))
            for j in cols:
                precedence = plan[j][7]
                take = good[:, j] & ((winner < 0) | (precedence < noted))
                winner[take] = j
                if precedence:
                    noted[take] = precedence
                if j in taken:
                    taken[j] = take
            p = stored_at[key]
            has = winner >= 0
            values_of[:, p] = np.where(has, canonical[calls, np.maximum(winner, 0)], np.nan)
            kept[:, p] = has

    @staticmethod
    def _convert(transform: Callable[[float], float] | None, value: float) -> float:
        if transform is None:
            return value
        try:
            return transform(value)
        except (ArithmeticError, ValueError):
            return math.nan

    def _summarise(
        self, values: list[float], field: str, origin: str, nonfinite: list[str]
    ) -> tuple[float, int, float, float] | None:
        """(mean, count, min, max) of the finite values of a list logged at one step; the rest
        are reported like non-finite values. None when none is finite."""
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) < len(values):
            bad = len(values) - len(finite)
            nonfinite.append(f"{field}: {bad} of {len(values)} values non-finite{origin}")
            self._count_nonfinite(field)
        if not finite:
            return None
        return math.fsum(finite) / len(finite), len(finite), min(finite), max(finite)

    def take_held(self) -> tuple[int, int, int]:
        """With `defer_counts`: the (accepted, unregistered, events) counts of what was
        translated since the last call; pass them to `count_stored` once the store took it."""
        held = (self._held[0], self._held[1], self._held[2])
        self._held = [0, 0, 0]
        return held

    def count_stored(self, held: tuple[int, int, int]) -> None:
        accepted, unregistered, events = held
        if accepted or unregistered or events:
            with self._counters.lock:
                c = self._counters
                c.accepted += accepted
                c.unregistered += unregistered
                c.events += events

    def _count_nonfinite(self, field: str) -> None:
        with self._counters.lock:
            self._counters.nonfinite[field] = self._counters.nonfinite.get(field, 0) + 1

    def event(
        self, step: object, kind: str, text: str, fields: Mapping[str, Any], wall_time: float
    ) -> list[EventRow]:
        problem = event_problem(step, kind, text)
        if problem is not None:
            with self._counters.lock:
                self._counters.rejected += 1
            self._warn(f"event:{kind!r}", f"event {kind!r}: {problem}; rejected")
            return []
        clean: dict[str, Any] = {}
        for key, value in fields.items():
            field_problem = event_field_problem(key, value)
            if field_problem is not None:
                self._warn(f"eventfield:{key}", f"event {kind!r}: {field_problem}; field left out")
                continue
            if isinstance(value, float) and not math.isfinite(value):
                continue
            clean[key] = (
                float(value) if isinstance(value, int) and not isinstance(value, bool) else value
            )
        if self._defer:
            self._held[2] += 1
        else:
            with self._counters.lock:
                self._counters.events += 1
        istep = operator.index(step)  # type: ignore[arg-type]
        return [
            (self._run, self._rank, istep, kind.strip(), str(text), json.dumps(clean), wall_time)
        ]
