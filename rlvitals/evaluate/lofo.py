"""Leave one family out: how well the engine's tunable levels generalise to a family of runs
they were not chosen on.

For each family (the `family:` of each run in the expected verdicts: sb3_dqn, trl_grpo, ...):
the levels of `registry.diagnosis.tuning.Tuning` are chosen on every other family — one pass
of coordinate search over `GRID`, starting from the defaults, each level set to the value that
makes the most of those runs come out as expected (a tie keeps the current value) — and the
held-out family is judged with them. The replay is built once (`timeline(keep=True)`); another
tuning only re-judges its tunable evidence from the numbers the evidence carries
(`JudgedCard.under`), so a fold costs seconds, not a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from registry import Registry
from registry.diagnosis.tuning import GRID, Tuning

from .replay import _RANK, Expected, LoadedRun, RunVerdict, StepStatus, totals, verdict

__all__ = ["Fold", "Judged", "leave_one_family_out", "lofo_table", "retuned", "search"]


@dataclass(frozen=True)
class Judged:
    """One run of the corpus, replayed once with every card kept (`timeline(keep=True)`)."""

    run: LoadedRun
    steps: tuple[StepStatus, ...]
    expected: Expected
    family: str


@dataclass(frozen=True)
class Fold:
    family: str
    tuning: Tuning
    verdicts: tuple[RunVerdict, ...]  # the held-out family's runs, judged with `tuning`
    defaults: tuple[RunVerdict, ...]  # the same runs judged with the default levels

    @property
    def changed(self) -> dict[str, float]:
        """The levels chosen away from the defaults."""
        default = Tuning().to_dict()
        return {k: v for k, v in self.tuning.to_dict().items() if v != default[k]}


def retuned(steps: Sequence[StepStatus], tuning: Tuning) -> list[StepStatus]:
    """The timeline as `tuning` judges it: each step's worst training-health card again."""
    out = []
    for st in steps:
        judged = [c.under(tuning) for c in st.judged]
        worst = max((_RANK[s] for s, _ in judged), default=-1)
        status = next(k for k, v in _RANK.items() if v == worst)
        kinds: set[str] = set()
        for s, k in judged:
            if _RANK[s] == worst:
                kinds |= k
        out.append(StepStatus(st.step, status, (), {}, (), frozenset(kinds)))
    return out


def _passed(
    reg: Registry, j: Judged, tuning: Tuning, cache: dict[tuple[str, Tuning], bool]
) -> bool:
    key = (j.run.name, tuning)
    if key not in cache:
        cache[key] = verdict(reg, j.run, j.expected, retuned(j.steps, tuning)).passed
    return cache[key]


def search(
    reg: Registry,
    runs: Sequence[Judged],
    cache: dict[tuple[str, Tuning], bool] | None = None,
) -> Tuning:
    """The tuning one pass of coordinate search over `GRID` chooses on `runs`."""
    memo = {} if cache is None else cache
    tuning = Tuning()

    def score(t: Tuning) -> int:
        return sum(_passed(reg, j, t, memo) for j in runs)

    best = score(tuning)
    for name in (f.name for f in fields(Tuning)):
        for value in GRID[name]:
            candidate = tuning.with_values({name: value})
            got = score(candidate)
            if got > best:  # a tie keeps the current value
                tuning, best = candidate, got
    return tuning


def leave_one_family_out(reg: Registry, runs: Sequence[Judged]) -> list[Fold]:
    """A fold per family: the tuning chosen on the others, and the family judged with it."""
    cache: dict[tuple[str, Tuning], bool] = {}
    by_family: dict[str, list[Judged]] = {}
    for j in runs:
        by_family.setdefault(j.family, []).append(j)
    folds = []
    for family in sorted(by_family):
        trained = [j for j in runs if j.family != family]
        tuning = search(reg, trained, cache)
        held = tuple(
            verdict(reg, j.run, j.expected, retuned(j.steps, tuning)) for j in by_family[family]
        )
        defaults = tuple(verdict(reg, j.run, j.expected, j.steps) for j in by_family[family])
        folds.append(Fold(family, tuning, held, defaults))
    return folds


def lofo_table(folds: Sequence[Fold]) -> str:
    """The folds as a Markdown table, with the in-corpus and held-out totals under it."""
    rows = [
        "| held-out family | runs | as expected, held out | as expected, default levels | levels chosen on the other families |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in folds:
        changed = ", ".join(f"{k}={v:g}" for k, v in f.changed.items()) or "the defaults"
        rows.append(
            f"| {f.family} | {len(f.verdicts)} | {sum(v.passed for v in f.verdicts)} |"
            f" {sum(v.passed for v in f.defaults)} | {changed} |"
        )
    rows.append("")
    rows.append("default levels, in corpus: " + totals([v for f in folds for v in f.defaults]))
    rows.append("leave one family out: " + totals([v for f in folds for v in f.verdicts]))
    return "\n".join(rows)
