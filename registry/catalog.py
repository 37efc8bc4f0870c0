"""The loaded registry: metrics, terms, rules and stage boundaries, with lookups and name resolution."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import UnknownName
from .model import Alias, BookkeepingKey, Metric, Rule, Stage, Stages, Term, Timing
from .resolve import Resolution, Resolver

__all__ = ["Registry"]


@dataclass(frozen=True)
class Registry:
    """Everything rlvitals knows about RL metrics. Build it with `registry.load()`."""

    metrics: tuple[Metric, ...]
    terms: tuple[Term, ...]
    rules: tuple[Rule, ...]
    stages: Stages
    sources: tuple[str, ...] = ()
    timing: Timing = field(default_factory=Timing)
    bookkeeping: tuple[BookkeepingKey, ...] = ()
    mapped: tuple[Alias, ...] = ()
    """Tag mappings (a user file's `map:`, `--map TAG=METRIC`): aliases that beat the others."""
    as_logged: frozenset[str] = frozenset()
    """Names kept as logged (`--map TAG=`): never read as a metric by `auto_map`'s rules."""
    _by_id: Mapping[str, Metric] = field(init=False, repr=False, compare=False)
    _terms: Mapping[str, Term] = field(init=False, repr=False, compare=False)
    _rules: Mapping[str, Rule] = field(init=False, repr=False, compare=False)
    _resolver: Resolver = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {m.id: m for m in self.metrics})
        object.__setattr__(self, "_terms", {t.id: t for t in self.terms})
        object.__setattr__(self, "_rules", {r.id: r for r in self.rules})
        object.__setattr__(
            self, "_resolver", Resolver.build(self.metrics, self.bookkeeping, self.mapped)
        )

    def with_map(self, entries: Iterable[Alias]) -> Registry:
        """This registry with more tag mappings (later ones win); each entry's metric must be
        one of its ids (`tag_map.parse_map` checks that with a message)."""
        entries = tuple(entries)
        return replace(self, mapped=self.mapped + entries) if entries else self

    def keeping(self, names: Iterable[str]) -> Registry:
        """This registry with `names` kept as logged (`--map TAG=`), whatever `auto_map` says."""
        names = frozenset(names)
        return replace(self, as_logged=self.as_logged | names) if names else self

    def metric(self, metric_id: str) -> Metric:
        try:
            return self._by_id[metric_id]
        except KeyError:
            raise UnknownName(
                metric_id, f"no metric with id {metric_id!r} in the registry"
            ) from None

    def term(self, term_id: str) -> Term:
        try:
            return self._terms[term_id]
        except KeyError:
            raise UnknownName(term_id, f"no term with id {term_id!r} in the glossary") from None

    def rule(self, rule_id: str) -> Rule:
        try:
            return self._rules[rule_id]
        except KeyError:
            raise UnknownName(rule_id, f"no rule with id {rule_id!r} in rules.yaml") from None

    def has_metric(self, metric_id: str) -> bool:
        return metric_id in self._by_id

    def has_term(self, term_id: str) -> bool:
        return term_id in self._terms

    def resolve(self, name: str, framework: str | None = None) -> Resolution:
        """Canonical id and transform for any known spelling.

        Raises `UnknownName` for a name nobody declared and `AmbiguousName` (with the candidates)
        when the name means different metrics in different frameworks and none was given.
        """
        return self._resolver.resolve(name, framework)

    def bookkeeping_key(self, name: str, framework: str | None = None) -> BookkeepingKey | None:
        """The framework bookkeeping key (a counter or clock, not a metric) `name` is, or None.
        Without a framework, any framework's key counts. A metric id or alias is never one."""
        return self._resolver.bookkeeping(name, framework)

    def detect_framework(self, names: Iterable[str]) -> str | None:
        return self._resolver.detect_framework(names)

    def core_metrics(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.core)

    def update_metrics(self) -> tuple[str, ...]:
        """The metrics whose points are the run's updates: measured once per optimizer update
        (`sampling: per_update`, not a hyperparameter or a derived value). The first of them
        marks the first update (off-policy learners log none during `learning_starts`); their
        spacing is the run's cadence."""
        return tuple(
            m.id for m in self.metrics if m.sampling == "per_update" and m.kind == "measured"
        )

    def by_group(self, group: str) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.group == group)

    def terms_explaining(self, metric_id: str) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if metric_id in t.explains)

    def stages_for(
        self,
        config: Mapping[str, Any] | None = None,
        planned_steps: int | None = None,
        cadence: float | None = None,
    ) -> Stages:
        """Stage boundaries: a run config's `stage_boundaries` when it has them; else fractions
        of the planned length, or counts of logged points at the measured cadence (`timing`);
        else the registry's step defaults."""
        override = (config or {}).get("stage_boundaries")
        if not isinstance(override, Mapping):
            t = self.timing
            if planned_steps and planned_steps > 0:
                early = max(1, int(planned_steps * t.early_fraction))
                mid = max(early + 1, int(planned_steps * t.mid_fraction))
                why = f"fractions {t.early_fraction:g} / {t.mid_fraction:g} of the planned {planned_steps:,} steps"
                return Stages(early, mid, why, baseline_points=t.baseline_points)
            if cadence and cadence > 0:
                early = max(1, round(cadence * t.early_points))
                mid = max(early + 1, round(cadence * t.mid_points))
                why = (
                    f"{t.early_points} / {t.mid_points} logged points at one per {cadence:g} steps"
                )
                return Stages(early, mid, why, baseline_points=t.baseline_points)
            return self.stages
        early = override.get("early_end", self.stages.early_end)
        mid = override.get("mid_end", self.stages.mid_end)
        if not (isinstance(early, int) and isinstance(mid, int) and 0 < early < mid):
            return self.stages
        return Stages(early_end=early, mid_end=mid, reason="run config stage_boundaries")

    def stage_at(self, step: int, config: Mapping[str, Any] | None = None) -> Stage:
        return self.stages_for(config).stage_at(step)
