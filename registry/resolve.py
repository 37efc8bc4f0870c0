"""Translate a framework's metric key into a canonical metric id, or say clearly why it cannot."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import AmbiguousName, UnknownName
from .model import IDENTITY, Alias, BookkeepingKey, Metric, Transform

__all__ = ["FRAMEWORKS", "Resolution", "Resolver"]

FRAMEWORKS: tuple[str, ...] = ("sb3", "cleanrl", "trl", "verl", "openrlhf", "rllib")

# transformers' reporting callbacks (W&B, TensorBoard) prefix every TRL key with `train/`;
# OpenRLHF's own loggers do the same. Other frameworks already namespace their keys.
_BACKEND_PREFIXES: Mapping[str, tuple[str, ...]] = {"train/": ("trl", "openrlhf", "hf")}
# Aliases declared for these frameworks also answer for the key (HF Trainer keys reach TRL runs).
_FAMILY: Mapping[str, tuple[str, ...]] = {"trl": ("trl", "hf"), "hf": ("hf", "trl")}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Resolution:
    """The outcome of translating one name.

    `field` is the name the value is stored under: the metric id, or `<id>/<name>` for a
    pattern metric (sub-rewards). `labels` holds what key placeholders captured (`gpu`, `module`).
    """

    metric: str
    field: str
    transform: Transform = IDENTITY
    alias: Alias | None = None
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def framework(self) -> str | None:
        return self.alias.framework if self.alias else None

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


@dataclass(frozen=True)
class _Failure:
    kind: type[UnknownName] | type[AmbiguousName]
    message: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class _PatternAlias:
    alias: Alias
    regex: re.Pattern[str]


def _compile(key: str) -> re.Pattern[str]:
    parts: list[str] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(key):
        parts.append(re.escape(key[pos : m.start()]))
        parts.append(f"(?P<{m.group(1)}>[^/]+?)")
        pos = m.end()
    parts.append(re.escape(key[pos:]))
    return re.compile("".join(parts) + r"\Z")


@dataclass(frozen=True)
class Resolver:
    """Alias index over a set of metrics. Build once; `resolve` is cached per (name, framework)."""

    metrics: Mapping[str, Metric]
    _exact: Mapping[str, tuple[Alias, ...]] = field(repr=False)
    _patterns: tuple[_PatternAlias, ...] = field(repr=False)
    _bookkeeping: Mapping[str, tuple[BookkeepingKey, ...]] = field(default_factory=dict, repr=False)
    # a run's own tag names (`--map`, a user file's `map:`): they beat every alias and id
    _mapped: Mapping[str, tuple[Alias, ...]] = field(default_factory=dict, repr=False)
    # A cached failure is stored as its parts and raised as a fresh exception each time: re-raising
    # one object would grow its traceback on every raise and keep the callers' frames alive.
    _cache: dict[tuple[str, str | None], Resolution | _Failure] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def build(
        cls,
        metrics: Iterable[Metric],
        bookkeeping: Iterable[BookkeepingKey] = (),
        mapped: Iterable[Alias] = (),
    ) -> Resolver:
        by_id = {m.id: m for m in metrics}
        kept: dict[str, list[BookkeepingKey]] = {}
        for entry in bookkeeping:
            kept.setdefault(entry.key, []).append(entry)
        exact: dict[str, list[Alias]] = {}
        patterns: list[_PatternAlias] = []
        for metric in by_id.values():
            for alias in metric.aliases:
                if alias.is_pattern:
                    patterns.append(_PatternAlias(alias, _compile(alias.key)))
                else:
                    exact.setdefault(alias.key, []).append(alias)
        maps: dict[str, list[Alias]] = {}
        for alias in mapped:
            # a later mapping of the same key and framework (a --map flag after a file) wins
            maps.setdefault(alias.key, []).insert(0, alias)
        return cls(
            metrics=by_id,
            _mapped={k: tuple(v) for k, v in maps.items()},
            _exact={k: tuple(v) for k, v in exact.items()},
            _patterns=tuple(patterns),
            _bookkeeping={k: tuple(v) for k, v in kept.items()},
        )

    def bookkeeping(self, name: str, framework: str | None = None) -> BookkeepingKey | None:
        """The bookkeeping key `name` is for `framework` (any framework when None), reached as
        an alias is: the framework's family, and a reporting backend's `train/` prefix."""
        wanted = None if framework is None else (*_FAMILY.get(framework, (framework,)), "generic")
        for found in self._bookkeeping_candidates(name):
            if wanted is None or found.framework in wanted:
                return found
        return None

    def _bookkeeping_candidates(self, name: str) -> list[BookkeepingKey]:
        found = list(self._bookkeeping.get(name, ()))
        for prefix, frameworks in _BACKEND_PREFIXES.items():
            if name.startswith(prefix):
                found += [
                    b
                    for b in self._bookkeeping.get(name[len(prefix) :], ())
                    if b.framework in frameworks
                ]
        return found

    def resolve(self, name: str, framework: str | None = None) -> Resolution:
        """Canonical id and transform for `name`; raises UnknownName or AmbiguousName."""
        key = (name, framework)
        cached = self._cache.get(key)
        if cached is None:
            try:
                cached = self._resolve(name, framework)
            except (UnknownName, AmbiguousName) as exc:
                cached = _Failure(type(exc), str(exc), exc.candidates)
            self._cache[key] = cached
        if isinstance(cached, _Failure):
            raise cached.kind(name, cached.message, cached.candidates)
        return cached

    def aliases_for(self, framework: str) -> tuple[Alias, ...]:
        """Every alias declared for one framework (used to detect a log's framework)."""
        wanted = _FAMILY.get(framework, (framework,))
        found = [a for group in self._exact.values() for a in group if a.framework in wanted]
        found += [p.alias for p in self._patterns if p.alias.framework in wanted]
        return tuple(found)

    def detect_framework(self, names: Iterable[str]) -> str | None:
        """The framework whose aliases match the most names; None when nothing is specific."""
        scores = dict.fromkeys(FRAMEWORKS, 0)
        for name in names:
            if name in self._mapped:  # the user's own name says nothing of a framework
                continue
            hits = {r.alias.framework for r in self._candidates(name) if r.alias}
            # a framework's own bookkeeping keys (SB3's time/iterations) say which one logs
            hits |= {b.framework for b in self._bookkeeping_candidates(name)}
            if len(hits) == 1:
                (fw,) = hits
                if fw in scores:
                    scores[fw] += 1
                elif fw == "hf":
                    scores["trl"] += 1
        best = max(scores.items(), key=lambda kv: kv[1])
        return best[0] if best[1] > 0 else None

    def _resolve(self, name: str, framework: str | None) -> Resolution:
        if framework is not None and framework not in FRAMEWORKS and framework != "generic":
            raise UnknownName(
                name,
                f"unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)} or leave it unset",
            )
        for alias in self._mapped.get(name, ()):
            if alias.framework == "generic" or framework in (None, alias.framework):
                return self._make(alias, {})
        direct = self._canonical(name)
        if direct is not None:
            return direct
        found = self._candidates(name)
        if framework is not None:
            allowed = (*_FAMILY.get(framework, (framework,)), "generic")
            others = sorted({r.framework or "" for r in found} - set(allowed))
            found = [r for r in found if r.framework in allowed]
            if not found and others:
                raise UnknownName(
                    name,
                    f"{name!r} is not a {framework} metric key; the registry knows it only for "
                    f"{', '.join(others)}. Check the framework setting or add an alias to registry/metrics.yaml.",
                    others,
                )
        if not found:
            raise UnknownName(name, self._unknown_message(name), self._suggest(name))
        meanings = {(r.field, r.transform) for r in found}
        if len(meanings) == 1:
            return min(found, key=lambda r: r.alias.precedence if r.alias else 0)
        listing = "; ".join(
            f"{r.framework}: {r.field} ({r.transform.describe()})" for r in _unique(found)
        )
        raise AmbiguousName(
            name,
            f"{name!r} means different things in different frameworks ({listing}); "
            "pass framework= (or --framework) to choose.",
            tuple(sorted({r.field for r in found})),
        )

    def _canonical(self, name: str) -> Resolution | None:
        if name in self.metrics and self.metrics[name].pattern is None:
            return Resolution(metric=name, field=name)
        head, sep, rest = name.partition("/")
        if sep and rest and head in self.metrics and self.metrics[head].pattern is not None:
            pattern = self.metrics[head].pattern
            assert pattern is not None
            return Resolution(metric=head, field=name, labels=((pattern.placeholder, rest),))
        return None

    def _candidates(self, name: str) -> list[Resolution]:
        found = [self._make(a, {}) for a in self._exact.get(name, ())]
        found += [
            self._make(p.alias, m.groupdict()) for p in self._patterns if (m := p.regex.match(name))
        ]
        for prefix, frameworks in _BACKEND_PREFIXES.items():
            if name.startswith(prefix):
                stripped = [
                    r for r in self._candidates(name[len(prefix) :]) if r.framework in frameworks
                ]
                found += stripped
        return found

    def _make(self, alias: Alias, captured: Mapping[str, str]) -> Resolution:
        metric = self.metrics[alias.metric]
        field_name = metric.id
        if metric.pattern is not None:
            label = captured.get(metric.pattern.placeholder) or captured.get("name")
            if label:
                field_name = f"{metric.id}/{label}"
        return Resolution(
            metric=metric.id,
            field=field_name,
            transform=alias.transform,
            alias=alias,
            labels=tuple(sorted(captured.items())),
        )

    def _suggest(self, name: str) -> tuple[str, ...]:
        pool = list(self.metrics) + list(self._exact)
        return tuple(difflib.get_close_matches(name, pool, n=3, cutoff=0.75))

    def _unknown_message(self, name: str) -> str:
        hint = self._suggest(name)
        close = f" Close names: {', '.join(hint)}." if hint else ""
        return (
            f"{name!r} is neither a metric id nor a known alias in the registry.{close} "
            "Add it as an alias in registry/metrics.yaml (or a user registry file) if it is one."
        )


def _unique(found: Iterable[Resolution]) -> list[Resolution]:
    seen: set[tuple[str | None, str, Transform]] = set()
    out = []
    for r in found:
        k = (r.framework, r.field, r.transform)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out
