"""Translate a `ScalarBlock` (steps of a log in columns) a column at a time: on the direct import,
and in a run's worker for what a log reader hands it (`Run.log_block`).

`Translator.log` resolves, converts and checks every value of a step in Python and returns a
tuple per row: most of an import's time once reading is fast. The steps of a long log mostly
repeat a few shapes (the same names in the same order), and what a shape becomes (which names
are kept when two name one metric, their measurements and fields, which transform, which limits,
the counts) does not depend on the values. So `BlockTranslator` works out a `_Plan` per shape
once, converts and checks each shape's values as one array, and returns the steps as columns
(`FastSteps`) for `block_lines.BlockRenderer` to render, or for the outbox to store as columnar
blocks (`FastSteps.sample_blocks`, the derived `nonfinite_count` one more column).

A step goes through `Translator.log` itself, one at a time and in order, whenever the plan
cannot say what it would do: a value that is non-finite or outside its physical limits, a name
logged twice at the step, a name the registry finds ambiguous, an unregistered name under the
`drop` policy, a step that goes back (a resume), a step without a wall time. A name that means
different things in different frameworks is decided once for the run by `Translator` (the shapes
are planned in the order they first appear, so it sees the names `log` would have seen by that
step), and a plan uses that decision like every other path. Derived metrics are computed by the same
`StepDeriver` calls, in step order, for every step whose names feed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from registry import Resolution

from ..schema import UNREGISTERED, EventRow, SampleBlock, SampleRow
from ..sources.scalar_block import ScalarBlock
from .derive import NONFINITE_FIELD
from .steps import KEPT, Translator, name_problem


def _first_row(
    names: Sequence[str], values: npt.NDArray[np.float64]
) -> Callable[[str], float | None]:
    """A column's value at the shape's first step, by its name: the value `log` would decide an
    unknown name with at that step (NaN included, which decides nothing)."""
    column: dict[str, int] = {}
    for i, name in enumerate(names):
        column.setdefault(name, i)  # several values at a step: the first, as `log` reads them

    def first(name: str) -> float | None:
        i = column.get(name)
        return None if i is None or not len(values) else float(values[0, i])

    return first


__all__ = ["BlockTranslator", "FastGroup", "FastSteps", "StepPlan"]

_PLAN_LIMIT = 4096


@dataclass(frozen=True, eq=False)
class StepPlan:
    """What `Translator.log` makes of one shape of step (its names, in order), values aside.

    `rows[i]` = (measurement, gpu, field) of the i-th row the call returns, taken from the
    step's value `kept[i]`; `keys[i]` is its (field, gpu) for derived metrics (None when
    unregistered). `constant` is the derived `nonfinite_count` row (0 at a step with no
    non-finite value) written after them, if the registry has one.
    """

    names: tuple[str, ...]
    kept: tuple[int, ...]
    rows: tuple[tuple[str, str, str], ...]
    keys: tuple[tuple[str, str] | None, ...]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    transforms: tuple[tuple[int, str, float], ...]
    accepted: int
    unregistered: int
    notes: tuple[tuple[str, str, Resolution], ...]
    warnings: tuple[tuple[str, str], ...]
    reads: bool
    keyed: bool
    constant: tuple[str, str] | None


Rows = tuple[tuple[str, str, str], ...]  # (measurement, gpu, field) of each row


@dataclass(frozen=True)
class FastGroup:
    """Steps `index` (into `FastSteps.steps`) that return the same rows: `rows` with one
    column of `values` each (the plan's, then derived metrics'), and `constant` (the derived
    `nonfinite_count` at 0) if set. `accepted` and `unregistered` are the logged values they
    count (what `take_held` hands out for them), so a store can count each group alone."""

    rows: Rows
    constant: tuple[str, str] | None
    index: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    accepted: int = 0
    unregistered: int = 0

    @property
    def count(self) -> int:
        return len(self.index) * (len(self.rows) + (self.constant is not None))


@dataclass(frozen=True)
class FastSteps:
    """Consecutive steps, each exactly what `Translator.log` returns for it, as columns.

    Steps are strictly increasing, so no two of them write the same point.
    """

    run: str
    rank: int
    steps: npt.NDArray[np.int64]
    walls: npt.NDArray[np.float64]
    groups: list[FastGroup]

    @property
    def count(self) -> int:
        return sum(g.count for g in self.groups)

    def columns(self) -> list[tuple[npt.NDArray[np.int64], Rows, npt.NDArray[np.float64]]]:
        """Each group as (its steps, (measurement, gpu, field) of each column, one row of
        values per step), the constant `nonfinite_count` as a column of zeros: what `rows`
        holds, wall times aside, without a tuple per value (for what sums sent values)."""
        out = []
        for g in self.groups:
            rows, values = g.rows, g.values
            if g.constant is not None:
                rows = (*rows, (g.constant[0], "", g.constant[1]))
                values = np.hstack([values, np.zeros((len(g.index), 1))])
            out.append((self.steps[g.index], rows, values))
        return out

    def sample_blocks(self) -> list[tuple[SampleBlock, FastGroup]]:
        """Each group as the outbox's columnar block (`Outbox.write(blocks=...)`), with the
        group it came from (for its counts): the same samples as `rows`."""
        out = []
        walls = self.walls
        for (steps, rows, values), group in zip(self.columns(), self.groups, strict=True):
            block = SampleBlock(
                self.run,
                self.rank,
                steps.tolist(),
                walls[group.index].tolist(),
                rows,
                np.ascontiguousarray(values, dtype=np.float64),
            )
            out.append((block, group))
        return out

    def rows(self) -> list[SampleRow]:
        """The rows themselves (to find a line InfluxDB refused)."""
        out: list[SampleRow] = []
        steps, walls = self.steps.tolist(), self.walls.tolist()
        run, rank = self.run, self.rank
        for g in self.groups:
            for i, values in zip(g.index.tolist(), g.values.tolist(), strict=True):
                step, wall = steps[i], walls[i]
                for (measurement, gpu, name), value in zip(g.rows, values, strict=True):
                    out.append((run, rank, step, measurement, gpu, name, value, wall))
                if g.constant is not None:
                    out.append((run, rank, step, g.constant[0], "", g.constant[1], 0.0, wall))
        return out


Translated = FastSteps | tuple[list[SampleRow], list[EventRow], float]
"""A run of steps as columns, or one step's rows, events and wall time from `Translator.log`."""


class BlockTranslator(Translator):
    """A `Translator` that also takes whole `ScalarBlock`s (`log_block`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plans: dict[tuple[str, ...], StepPlan | None] = {}
        self._now = 0.0  # what a step without a wall time stands for (`log_block`'s `now`)

    def log_block(self, block: ScalarBlock, now: float) -> Iterator[Translated]:
        """The block's steps in order; `now` stands for a missing wall time (as `log` takes
        the time of the call for a step without one). Consume it before logging again."""
        count = len(block)
        if not count:
            return
        self._now = now
        plan_of, ok = self._classify(block)
        steps = block.steps
        fast = ok & block.simple & (block.walls != 0)
        fast[1:] &= steps[1:] > steps[:-1]
        i = 0
        while i < count:
            stop = i
            if fast[i] and not self._goes_back(int(steps[i])):
                stop = i + 1
                while stop < count and fast[stop] and not self._relogs_spread(int(steps[stop])):
                    stop += 1
                stop = self._before_deriver_step(steps, plan_of, i, stop)
            if stop == i:
                record = block.record(i)
                wall = now if record.wall_time is None else record.wall_time
                rows, events = self.log(record.step, record.values, wall, None)
                yield rows, events, wall
                i += 1
                continue
            yield self._fast(block, i, stop, plan_of)
            i = stop

    def _before_deriver_step(
        self,
        steps: npt.NDArray[np.int64],
        plan_of: Sequence[StepPlan | None],
        lo: int,
        hi: int,
    ) -> int:
        """Where the fast steps lo..hi-1 must stop: at the first one that calls `derive` (a
        registered name) when it is at the step the derived metrics are at, since `log` then
        adds to that step (no second `nonfinite_count`, derived values from both calls)
        rather than starting it. Only the first such step can be: it moves the deriver, and
        the steps after it are past it. The deriver can be at a step later than the run's
        last one: a resume whose steps logged only unregistered names does not move it."""
        at = self._deriver.step
        if at is None:
            return hi
        for k in range(lo, hi):
            plan = plan_of[k]
            assert plan is not None
            if plan.keyed:
                return k if int(steps[k]) == at else hi
        return hi

    def _classify(self, block: ScalarBlock) -> tuple[list[StepPlan | None], npt.NDArray[np.bool_]]:
        """Each step's plan, and whether its values pass the plan's checks."""
        count = len(block)
        starts = block.starts
        lengths = np.diff(starts)
        plan_of: list[StepPlan | None] = [None] * count
        ok = np.zeros(count, dtype=np.bool_)
        names = block.names
        shapes_found: list[tuple[int, tuple[str, ...], npt.NDArray[np.int64], Any]] = []
        for width in np.unique(lengths).tolist():
            index = np.flatnonzero(lengths == width)
            cells = starts[index][:, None] + np.arange(width)
            tags = block.tag[cells]
            if (tags == tags[0]).all():  # the usual case: every step names the same tags
                shapes, inverse = tags[:1], np.zeros(len(index), dtype=np.int64)
            else:
                shapes, inverse = np.unique(tags, axis=0, return_inverse=True)
                inverse = inverse.ravel()
            values = block.value[cells]
            for s, shape in enumerate(shapes.tolist()):
                members = index[inverse == s]
                shapes_found.append(
                    (int(members[0]), tuple(names[t] for t in shape), members, values[inverse == s])
                )
        # in the order the shapes first appear: a name is decided on the names logged by then
        shapes_found.sort(key=lambda found: found[0])
        for first, shape_names, members, shape_values in shapes_found:
            self._call = shape_names
            self._values = _first_row(shape_names, shape_values)
            # a step without a wall time takes the time of the call, as `log` gives it
            wall = float(block.walls[first]) or self._now
            self._at = (int(block.steps[first]), wall)
            plan = self._plan(shape_names)
            if plan is None:
                continue
            converted = self._convert_columns(plan, shape_values)
            with np.errstate(invalid="ignore"):
                # x - x is 0 for every finite x, NaN for NaN and both infinities
                good = (
                    ((converted - converted) == 0)
                    & (converted >= plan.low)
                    & (converted <= plan.high)
                ).all(axis=1)
            ok[members] = good
            for m in members.tolist():
                plan_of[m] = plan
        return plan_of, ok

    @staticmethod
    def _convert_columns(
        plan: StepPlan, values: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """The canonical values (the registry's transforms, as `Transform.apply` computes
        them: IEEE arithmetic gives the same double either way)."""
        if not plan.transforms:
            return values
        out = values.copy()
        with np.errstate(all="ignore"):
            for col, kind, factor in plan.transforms:
                x = values[:, col]
                if kind == "negate":
                    out[:, col] = -x
                elif kind == "scale":
                    out[:, col] = x * factor
                elif kind == "reciprocal":
                    out[:, col] = np.where(x != 0, factor / np.where(x != 0, x, 1.0), np.inf)
        return out

    def _plan(self, names: tuple[str, ...]) -> StepPlan | None:
        try:
            return self._plans[names]
        except KeyError:
            pass
        plan, cacheable = self._make_plan(names)
        if plan is None:
            # `log` takes this shape's steps one by one, after the shapes planned after it: its
            # names are decided now, at the shape's first step, as `log` decides them there (a
            # name read by itself depends on what the run logged by then)
            self._decide_names(names)
        if cacheable:
            if len(self._plans) >= _PLAN_LIMIT:
                self._plans.clear()
            self._plans[names] = plan
        return plan

    def _decide_names(self, names: tuple[str, ...]) -> None:
        framework = self._framework
        targets = self._targets.setdefault(framework, {})
        for name in names:
            if name.__class__ is str and name and name not in targets:
                self._target(name, framework)

    def _make_plan(self, names: tuple[str, ...]) -> tuple[StepPlan | None, bool]:
        """The plan of a shape, replaying `Translator.log`'s loop on names alone; None when a
        name needs `log` itself. The second value says whether the answer can be cached (an
        ambiguous name may resolve once the framework is detected)."""
        framework = self._framework
        targets = self._targets.setdefault(framework, {})
        rows: list[tuple[int, str, str, str, tuple[str, str] | None]] = []
        latest: dict[tuple[str, str], int] = {}
        preferred: dict[tuple[str, str], int] = {}
        low: list[float] = []
        high: list[float] = []
        transforms: list[tuple[int, str, float]] = []
        notes: list[tuple[str, str, Resolution]] = []
        warnings: list[tuple[str, str]] = []
        accepted = unregistered = 0
        for col, name in enumerate(names):
            if not name:
                return None, True  # `log` refuses an empty name
            target = targets.get(name)
            if target is None:
                target = self._target(name, framework)
                if name not in targets:
                    return None, False  # ambiguous even for the framework given
            if isinstance(target, str):
                if self._policy == "drop" or name_problem("metric name", name) is not None:
                    return None, True
                if target is not KEPT:
                    warnings.append(
                        (f"name:{name}", f"{target} Stored under measurement '{UNREGISTERED}'.")
                    )
                rows.append((col, UNREGISTERED, "", name, None))
                low.append(-np.inf)
                high.append(np.inf)
                unregistered += 1
                continue
            fld, group, gpu, transform, lo, hi, res, precedence, key = target
            low.append(lo)
            high.append(hi)
            if transform is not None:
                transforms.append((col, res.transform.kind, res.transform.factor))
            accepted += 1
            if key in latest:
                if precedence >= preferred.get(key, 0):
                    continue
                rows = [r for r in rows if (r[3], r[2], r[1]) != (fld, gpu, group)]
            if precedence:
                preferred[key] = precedence
            if transform is not None:
                notes.append((fld, name, res))
            rows.append((col, group, gpu, fld, key))
            latest[key] = col
        keys = tuple(r[4] for r in rows)
        registered = [k for k in keys if k is not None]
        nonfinite = self._deriver.nonfinite_group
        constant = (nonfinite, NONFINITE_FIELD) if registered and nonfinite is not None else None
        plan = StepPlan(
            names=names,
            kept=tuple(r[0] for r in rows),
            rows=tuple((r[1], r[2], r[3]) for r in rows),
            keys=keys,
            low=np.array(low, dtype=np.float64),
            high=np.array(high, dtype=np.float64),
            transforms=tuple(transforms),
            accepted=accepted,
            unregistered=unregistered,
            notes=tuple(notes),
            warnings=tuple(warnings),
            reads=bool(registered) and self._deriver.reads(registered),
            keyed=bool(registered),
            constant=constant,
        )
        return plan, True

    def _fast(
        self, block: ScalarBlock, lo: int, hi: int, plan_of: Sequence[StepPlan | None]
    ) -> FastSteps:
        """Steps lo..hi-1, all fast: what `log` would do for each, done a plan at a time."""
        steps = block.steps[lo:hi]
        walls = block.walls[lo:hi]
        members: dict[int, tuple[StepPlan, list[int]]] = {}
        for i, plan in enumerate(plan_of[lo:hi]):
            assert plan is not None
            entry = members.get(id(plan))
            if entry is None:
                members[id(plan)] = (plan, [i])
            else:
                entry[1].append(i)
        groups: list[FastGroup] = []
        accepted = unregistered = 0
        reading: list[tuple[StepPlan, npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
        # (step index, key, value) of what each key was last, for the run's live state
        last_seen: list[tuple[int, tuple[str, str], float]] = []
        for plan, index in members.values():
            at = np.array(index, dtype=np.int64)
            heads = block.starts[lo + at][:, None]
            if plan.transforms:
                raw = block.value[heads + np.arange(len(plan.names))]
                values = self._convert_columns(plan, raw)[:, list(plan.kept)]
            else:
                values = block.value[heads + np.array(plan.kept, dtype=np.int64)]
            accepted += plan.accepted * len(index)
            unregistered += plan.unregistered * len(index)
            for t_field, t_name, res in plan.notes:
                self._note_transform(t_field, t_name, res)
            for warning, message in plan.warnings:
                self._warn(warning, message)
            if plan.reads:
                reading.append((plan, at, values))
            else:
                groups.append(
                    FastGroup(
                        plan.rows,
                        plan.constant,
                        at,
                        values,
                        plan.accepted * len(index),
                        plan.unregistered * len(index),
                    )
                )
            last_values = values[-1].tolist()
            for key, value in zip(plan.keys, last_values, strict=True):
                if key is not None:
                    last_seen.append((index[-1], key, value))
            if plan.constant is not None:
                last_seen.append((index[-1], (NONFINITE_FIELD, ""), 0.0))
        step_list = steps.tolist()
        if reading:
            groups += self._derive_steps(reading, step_list, last_seen)
        # The steps whose names feed no derived metric only get their plan's constant
        # `nonfinite_count`; of their `derive` calls only the last one matters for what
        # comes after (it is where the deriver stands).
        final = max(
            ((index[-1], plan) for plan, index in members.values() if plan.keyed),
            key=lambda item: item[0],
            default=None,
        )
        if final is not None and not final[1].reads:
            i, plan = final
            head = block.starts[lo + i]
            raw = block.value[head : head + len(plan.names)][None, :]
            values_list = self._convert_columns(plan, raw)[0, list(plan.kept)].tolist()
            logged = {k: v for k, v in zip(plan.keys, values_list, strict=True) if k is not None}
            self._deriver.derive(step_list[i], logged, 0)
        last_seen.sort(key=lambda item: item[0])
        latest = {key: value for _, key, value in last_seen}
        self._stored_at(step_list[-1])
        wall_list = walls[-64:].tolist()
        with self._counters.lock:
            c = self._counters
            held = self._held
            held[0] += accepted
            held[1] += unregistered
            c.step = step_list[-1]
            c.rate_window.extend(zip(wall_list, step_list[-64:], strict=True))
            c.latest.update(latest)
        return FastSteps(self._run, self._rank, steps, walls, groups)

    def _derive_steps(
        self,
        reading: list[tuple[StepPlan, npt.NDArray[np.int64], npt.NDArray[np.float64]]],
        step_list: list[int],
        last_seen: list[tuple[int, tuple[str, str], float]],
    ) -> list[FastGroup]:
        """The steps whose names feed a derived metric: what the `derive` calls `log` makes
        for them (in step order) return, as columns; steps grouped by the rows they return,
        derived ones included."""
        columns: dict[tuple[str, str], int] = {}
        for plan, _, _ in reading:
            for key in plan.keys:
                if key is not None:
                    columns.setdefault(key, len(columns))
        index = np.concatenate([at for _, at, _ in reading])
        count = len(index)
        matrix = np.zeros((count, len(columns)))
        present = np.zeros((count, len(columns)), dtype=np.bool_)
        owner = np.zeros(count, dtype=np.int64)
        local = np.zeros(count, dtype=np.int64)
        offset = 0
        for p, (plan, at, values) in enumerate(reading):
            rows = slice(offset, offset + len(at))
            own = [c for c, key in enumerate(plan.keys) if key is not None]
            into = [columns[key] for key in plan.keys if key is not None]
            block = matrix[rows]
            block[:, into] = values[:, own]
            present[rows, into] = True
            owner[rows] = p
            local[rows] = np.arange(len(at))
            offset += len(at)
        order = np.argsort(index, kind="stable")
        index, matrix, present = index[order], matrix[order], present[order]
        owner, local = owner[order], local[order]
        at_list = index.tolist()
        derived = self._deriver.derive_columns(
            [step_list[i] for i in at_list], list(columns), matrix, present
        )
        for _, name, result, emitted in derived:
            hits = np.flatnonzero(emitted)
            if len(hits):
                last = int(hits[-1])
                last_seen.append((at_list[last], (name, ""), float(result[last])))
        pattern = np.zeros(count, dtype=np.int64)
        for r, (_, _, _, emitted) in enumerate(derived):
            pattern |= emitted.astype(np.int64) << r
        combo = owner * (1 << len(derived)) + pattern
        groups: list[FastGroup] = []
        for code in np.unique(combo).tolist():
            chosen = np.flatnonzero(combo == code)
            plan, _, values = reading[code >> len(derived)]
            bits = code & ((1 << len(derived)) - 1)
            used = [d for r, d in enumerate(derived) if bits >> r & 1]
            rows = plan.rows + tuple((group, "", name) for group, name, _, _ in used)
            parts = [values[local[chosen]], *(d[2][chosen][:, None] for d in used)]
            groups.append(
                FastGroup(
                    rows,
                    plan.constant,
                    index[chosen],
                    np.hstack(parts),
                    plan.accepted * len(chosen),
                    plan.unregistered * len(chosen),
                )
            )
        return groups
