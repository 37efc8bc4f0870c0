"""Which unknown logged names are read as a metric without a `--map`: the high-confidence ones.

A suggestion (`suggest.py`) is an offer a person accepts with `--map`. A name is read as a metric
by itself only when its name and its value both say so, each as the rules below state; anything
less stays an offer. The translator asks `AutoMap.metric_for` once per unknown name per run (at
the name's first logged value) and records the answer, so every later value, reading order and
path (a live `log`, an import, a follow) stores the name the same way. `--map TAG=` (nothing
after `=`) keeps a name as logged, whatever this module says.

The name says so when:

1. Its last path segment is a spelling the registry already has for exactly one metric: the
   segment's words (`quantity.words`) equal, as a set, the words of that metric's id or of one
   of its aliases' last segments, and of no other metric's (`custom/approx_kl`). An alias's
   last segment is a spelling when it states the metric's quantity (`approx_kl`: a divergence);
   else the whole alias is (`loss/policy`, not `policy`), matched by the whole name. A project's
   own prefix is what the registry cannot know; the leaf is what it knows.
2. That spelling is not a bare abbreviation: one word of 3 letters or fewer (`eps`, `fps`,
   `kl`, `lr`) stands for several things (`eps` is samples per second in one framework and an
   exploration epsilon in many loops), so it is an offer, never a reading.
3. No word of its earlier segments says something else: a word some metric uses (`critic`,
   `eval`, `gpu`) must be one of this metric's words; a word no metric uses (`perf`, a
   project's name) says nothing. `critic/approx_kl` is not read as the policy's KL.
4. The quantity the name states (`quantity.statements`) is the metric's, as for suggestions.

A name some framework spells (an alias the run's framework does not use: SB3's
`train/value_loss` in a CleanRL run) is never read by these rules: the registry reads it, with its
framework's transform, when that framework is the run's.

The value says so when it is finite and inside the metric's physical limits (`limits` in
metrics.yaml): a "clip fraction" of 3 or a negative "entropy coefficient" is not that metric.
The name is not read as a metric the run already logs under a name the registry knows (two names
would write one field per step), and never as a derived metric or a metric family.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .catalog import Registry
from .errors import AmbiguousName, UnknownName
from .model import Metric
from .quantity import statements, words

__all__ = ["AutoMap"]

_ABBREVIATION = 3  # a one-word spelling this short names several things


@dataclass(frozen=True)
class AutoMap:
    """The rules above over one registry; build once per run (`AutoMap.of`)."""

    registry: Registry
    spellings: Mapping[frozenset[str], frozenset[str]]
    """The words of a spelling (an id, an alias's last segment) -> the metrics spelled so."""
    vocab: Mapping[str, frozenset[str]]
    """A metric -> every word of its id, aliases and English title."""
    known: frozenset[str]
    """Every word some metric uses."""

    @classmethod
    def of(cls, registry: Registry) -> AutoMap:
        spellings: dict[frozenset[str], set[str]] = {}
        vocab: dict[str, frozenset[str]] = {}
        for m in _candidates(registry.metrics):
            keys = [a.key for a in m.aliases if not a.is_pattern]
            for text in (m.id, *(_spelling(k, m) for k in keys)):
                said = frozenset(words(text))
                if said:
                    spellings.setdefault(said, set()).add(m.id)
            vocab[m.id] = frozenset(w for t in (m.id, m.title.en, *keys) for w in words(t))
        known = frozenset(w for ws in vocab.values() for w in ws)
        return cls(registry, {k: frozenset(v) for k, v in spellings.items()}, vocab, known)

    def _known(self, name: str) -> bool:
        return _known_anywhere(self.registry, name)

    def metric_for(self, name: str, value: float | None, logged: Iterable[str] = ()) -> str | None:
        """The metric `name` is read as without a `--map` (the module's rules), or None (kept
        as logged). `value`: its first logged value; `logged`: the metrics the run already logs
        under names the registry knows."""
        if name in self.registry.as_logged or self._known(name):
            return None
        if value is None or not math.isfinite(value):
            return None
        *earlier, leaf = name.split("/")
        leaf_words = frozenset(words(leaf))
        found = self.spellings.get(leaf_words, frozenset())
        if not found:  # a spelling with its prefix (`loss/policy`), under other separators
            earlier, leaf_words = [], frozenset(words(name))
            found = self.spellings.get(leaf_words, frozenset())
        if len(found) != 1:
            return None  # unknown leaf, or a spelling of several metrics
        if len(leaf_words) == 1 and len(next(iter(leaf_words))) <= _ABBREVIATION:
            return None
        (metric_id,) = found
        metric = self.registry.metric(metric_id)
        mine = self.vocab[metric_id]
        if any(w in self.known and w not in mine for s in earlier for w in words(s)):
            return None
        stated = statements(words(name))
        if stated and stated[-1][1] != metric.quantity:
            return None
        limits = metric.limits
        if (limits.min is not None and value < limits.min) or (
            limits.max is not None and value > limits.max
        ):
            return None
        if metric_id in set(logged):
            return None
        return metric_id


def _known_anywhere(registry: Registry, name: str) -> bool:
    """Whether `name` is some framework's spelling (or bookkeeping key): the registry reads it,
    with that framework's transform, once the framework is known; never a guess of ours."""
    try:
        registry.resolve(name, None)
    except UnknownName:
        return registry.bookkeeping_key(name, None) is not None
    except AmbiguousName:
        return True
    return True


def _spelling(key: str, metric: Metric) -> str:
    """What of an alias spells its metric: its last segment when that segment states the
    metric's quantity (`train/approx_kl`: `approx_kl`), else the whole key (`loss/policy`: its
    leaf `policy` alone is no loss)."""
    leaf = key.rsplit("/", 1)[-1]
    stated = statements(words(leaf))
    return leaf if stated and stated[-1][1] == metric.quantity else key


def _candidates(metrics: Iterable[Metric]) -> Iterable[Metric]:
    return (m for m in metrics if m.kind != "derived" and m.pattern is None)
