"""Which logged names a registry recognises, and for the rest, which metric each looks like.

`recognise(registry, names, framework, ranges)` sorts a run's names into recognised (they resolve
to a metric), bookkeeping keys (a framework's counters, set aside: not metrics) and unknown, and
suggests a metric for each unknown name. The rules, stated once:

1. Names: a name and a metric are split into words (`/`, `_`, `.`, `-`, camelCase; trailing
   digits dropped: `return_mean10` -> return, mean). A metric's words are those of its id, its
   aliases (every framework's spelling) and its English title. A word matches a metric's word
   when equal, or when one starts the other and the shorter has 3+ letters (`ent`, `entropy`),
   which counts 0.8. Each word weighs by how rare it is among the metrics (log(N / metrics
   with it)): `kl` says more than `mean`. The score is the matched weight over the name's.
2. Ties in that score: the registry's core metrics first, then difflib's ratio of the name's
   last path segment to the metric's id and alias last segments; the runner-up, when tied with
   the first in score and core alike, is named with it (`optim/kl`: ref_kl or policy_kl).
3. Values, when known (`ranges`: the lowest and highest logged value of a name): a value
   outside a metric's physical limits (`limits` in metrics.yaml) rules the metric out; all
   values inside both declared limits (a fraction in [0, 1]) multiply its score by 1.15: the
   values break near-ties, the name decides (an entropy in [0.5, 0.7] stays an entropy).
4. Derived metrics (computed by rlvitals) and metric families are never suggested: a logged
   name cannot be one.
5. In `recognise`, a name whose best metric the run already logs under a name it recognised
   is another reading of that metric (TRL's `completions/min_length` beside
   `completions/mean_length`, `clip_ratio/low_mean` beside `clip_ratio/region_mean`): it is
   said so, with no `--map`, since mapping it would write two values into one field per step.
6. A name the run read as a metric by itself (`auto_map.py`, recorded with the run: `read_as`)
   is recognised, and said so with how to keep it as logged.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .catalog import Registry
from .errors import AmbiguousName, UnknownName
from .model import Metric
from .quantity import statements, words

__all__ = ["Recognition", "Suggestion", "recognise", "suggest"]

_PREFIX_CREDIT = 0.8
_FIT_BONUS = 1.15
_MIN_SCORE = 0.2
"""Below this share of a name's word weight matched, nothing is suggested (one common word)."""
_SHOWN = 3  # unknown names listed by name in a one-line summary


@dataclass(frozen=True)
class Suggestion:
    name: str
    metric: str
    score: float
    values_fit: bool = False
    alternatives: tuple[str, ...] = ()
    """Other metrics the name fits exactly as well (`optim/kl`: policy_kl, ref_kl)."""
    already_logged: bool = False
    """The run already logs `metric` under a recognised name: this one is another reading of
    it (a side, a minimum), kept as logged and not to be mapped."""

    def phrase(self) -> str:
        if self.already_logged:
            return (
                f"`{_printable(self.name)}` looks like another reading of {self.metric}, "
                "which the run already logs (kept as logged, not mapped)"
            )
        also = f" or {' or '.join(self.alternatives)}" if self.alternatives else ""
        name = _printable(self.name)
        return f"`{name}` looks like {self.metric}{also} (--map {name}={self.metric})"


@dataclass(frozen=True)
class Recognition:
    """How many of a run's logged names the registry recognised, and what the rest look like."""

    recognised: tuple[str, ...]
    bookkeeping: tuple[str, ...]
    unknown: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]
    read_as: tuple[tuple[str, str], ...] = ()
    """(name, metric) of the names the run read as a metric by themselves (`auto_map.py`)."""

    @property
    def total(self) -> int:
        """Logged names that could be metrics (a framework's bookkeeping keys are not)."""
        return len(self.recognised) + len(self.unknown)

    def counts(self) -> str:
        return f"{len(self.recognised)} of {self.total} logged names recognised"

    def line(self) -> str:
        """`12 of 15 logged names recognised; unrecognised: a, b, c (suggestions: ...)`."""
        out = self.counts()
        if self.read_as:
            shown = ", ".join(f"{_printable(n)} as {m}" for n, m in self.read_as)
            out += f" ({shown}: read by name and value; --map NAME= keeps one as logged)"
        if self.unknown:
            # a name with lone surrogates (undecodable bytes in a log) is shown escaped: the
            # line must print on any terminal, as the warnings about such names are
            shown = ", ".join(_printable(n) for n in self.unknown[:_SHOWN])
            more = f" and {len(self.unknown) - _SHOWN} more" if len(self.unknown) > _SHOWN else ""
            out += f"; unrecognised: {shown}{more}"
            if self.suggestions:
                out += f" (suggestions: {'; '.join(s.phrase() for s in self.suggestions)})"
        return out


def _printable(name: str) -> str:
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def recognise(
    registry: Registry,
    names: Iterable[str],
    framework: str | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    read_as: Mapping[str, str] | None = None,
) -> Recognition:
    """`read_as`: {name: metric} of the names the run read as a metric by themselves."""
    read_as = read_as or {}
    recognised: list[str] = []
    kept: list[str] = []
    unknown: list[str] = []
    logged: set[str] = set()  # the metrics the recognised names already fill
    for name in sorted(set(names)):
        try:
            logged.add(registry.resolve(name, framework).metric)
        except AmbiguousName:
            recognised.append(name)  # known, only its framework undecided
            continue
        except UnknownName:
            if name in read_as:
                recognised.append(name)
                logged.add(read_as[name])
            elif registry.bookkeeping_key(name, framework) is not None:
                kept.append(name)
            else:
                unknown.append(name)
            continue
        recognised.append(name)
    index = _Index.of(registry)
    found = [index.best(n, (ranges or {}).get(n), frozenset(logged)) for n in unknown]
    return Recognition(
        tuple(recognised),
        tuple(kept),
        tuple(unknown),
        tuple(s for s in found if s is not None),
        tuple(sorted((n, read_as[n]) for n in recognised if n in read_as)),
    )


def suggest(
    registry: Registry, name: str, value_range: tuple[float, float] | None = None
) -> Suggestion | None:
    """The metric `name` looks like (the module's rules), or None."""
    return _Index.of(registry).best(name, value_range)


def _match(word: str, vocab: frozenset[str]) -> float:
    if word in vocab:
        return 1.0
    for v in vocab:
        short, long_ = (word, v) if len(word) <= len(v) else (v, word)
        if len(short) >= 3 and long_.startswith(short):
            return _PREFIX_CREDIT
    return 0.0


@dataclass(frozen=True)
class _Entry:
    metric: Metric
    vocab: frozenset[str]
    segments: tuple[str, ...]


@dataclass(frozen=True)
class _Index:
    entries: tuple[_Entry, ...]
    weight: Mapping[str, float]
    default_weight: float

    @classmethod
    def of(cls, registry: Registry) -> _Index:
        entries = []
        for m in registry.metrics:
            if m.kind == "derived" or m.pattern is not None:
                continue
            texts = [m.id, m.title.en, *(a.key for a in m.aliases if not a.is_pattern)]
            vocab = frozenset(w for t in texts for w in words(t))
            segments = (m.id, *(a.key.rsplit("/", 1)[-1] for a in m.aliases if not a.is_pattern))
            entries.append(_Entry(m, vocab, segments))
        n = max(1, len(entries))
        counts: dict[str, int] = {}
        for e in entries:
            for w in e.vocab:
                counts[w] = counts.get(w, 0) + 1
        weight = {w: math.log(n / c) + 0.1 for w, c in counts.items()}
        # a word no metric uses (`perf`) weighs as a rare one: it is part of what is unmatched
        return cls(tuple(entries), weight, math.log(n) + 0.1)

    def best(
        self,
        name: str,
        value_range: tuple[float, float] | None,
        logged: frozenset[str] = frozenset(),
    ) -> Suggestion | None:
        said = words(name)
        if not said:
            return None
        total = sum(self.weight.get(w, self.default_weight) for w in said)
        last = name.rsplit("/", 1)[-1].lower()
        found = statements(said)
        stated = found[-1][1] if found else None
        # what the stated quantity is of: `ent`, `coef` in `ent_coef_loss` (a loss)
        of = tuple(w for ws, q in found if q != stated for w in ws)
        ranked = []
        for e in self.entries:
            if e.metric.quantity != (stated or e.metric.quantity):
                continue  # never across quantities: a coefficient's loss is not an entropy
            if any(_match(w, e.vocab) == 0.0 for w in of):
                continue  # a policy's loss is not an entropy coefficient's loss
            fit = False
            if value_range is not None:
                lo, hi = value_range
                limits = e.metric.limits
                if (limits.min is not None and lo < limits.min) or (
                    limits.max is not None and hi > limits.max
                ):
                    continue
                fit = limits.min is not None and limits.max is not None
            matched = sum(
                self.weight.get(w, self.default_weight) * _match(w, e.vocab) for w in said
            )
            score = matched / total
            if score < _MIN_SCORE:
                continue
            score *= _FIT_BONUS if fit else 1.0
            ratio = max(difflib.SequenceMatcher(None, last, s.lower()).ratio() for s in e.segments)
            ranked.append((round(score, 6), e.metric.core, ratio, e.metric.id, fit))
        if not ranked:
            return None
        ranked.sort(reverse=True)
        score, _core, _ratio, metric, fit = ranked[0]
        if metric in logged:
            return Suggestion(name, metric, score, fit, already_logged=True)
        tied = tuple(r[3] for r in ranked[1:2] if r[0] == score and r[1] == _core)
        return Suggestion(name, metric, score, fit, tied)
