"""What sort of quantity a metric is (its `quantity` in metrics.yaml), and what a name says of it.

A metric declares its quantity: a loss, a coefficient, an entropy, a divergence, a reward (or
return), a fraction... A logged name states one when one of its words does (`loss`, `coef`,
`lr`, `grad_norm`, `std`...), and the last word that states one decides: `train/ent_coef_loss`
is a loss (of a coefficient), not a coefficient and not an entropy; `loss/policy` is a loss
(its last word, `policy`, states none); `losses/entropy` is an entropy (CleanRL's namespace
`losses/` holds KLs and fractions too, so a leaf that states a quantity beats it). A name that
states none (`perf/return`... does: reward; `optim/clip`) says nothing, and any metric may fit.

`suggest` never offers a metric of another quantity than the name states: a coefficient's loss
is not an entropy, a policy's loss is not a KL. The name's earlier words that state another
quantity say what it is of (`ent`, `coef` in `ent_coef_loss`): a metric whose words lack one
of them is not it either (a policy's loss is not an entropy coefficient's loss).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

__all__ = ["QUANTITIES", "UNSTATED", "stated_quantity", "statements", "words"]

_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])")


def words(text: str) -> list[str]:
    """A name's words: split at `/`, `_`, `.`, `-` and camelCase, lower-cased, trailing digits
    dropped (`return_mean10` -> return, mean)."""
    out = []
    for part in _SPLIT.split(text):
        word = part.lower().rstrip("0123456789")
        if word:
            out.append(word)
    return out


QUANTITIES: tuple[str, ...] = (
    "reward",
    "advantage",
    "value",
    "spread",
    "entropy",
    "divergence",
    "coefficient",
    "fraction",
    "loss",
    "fit",
    "ratio",
    "correlation",
    "error",
    "gradient_norm",
    "learning_rate",
    "length",
    "throughput",
    "time",
    "utilization",
    "memory",
    "power",
    "temperature",
    "count",
    "trend",
    "objective",
    "unstated",
)
"""Every quantity a metric may declare (metrics.schema.json's enum holds the same list)."""

UNSTATED = "unstated"
"""A user metric whose id states no quantity: suggested only for names that state none."""

_WORDS: Mapping[str, str] = MappingProxyType(
    {
        "loss": "loss",
        "losses": "loss",
        "coef": "coefficient",
        "coeff": "coefficient",
        "coefficient": "coefficient",
        "alpha": "coefficient",
        "beta": "coefficient",
        "entropy": "entropy",
        "ent": "entropy",
        "kl": "divergence",
        "divergence": "divergence",
        "reward": "reward",
        "rewards": "reward",
        "return": "reward",
        "returns": "reward",
        "score": "reward",
        "scores": "reward",
        "penalty": "reward",
        "bonus": "reward",
        "advantage": "advantage",
        "advantages": "advantage",
        "adv": "advantage",
        "std": "spread",
        "stddev": "spread",
        "frac": "fraction",
        "fraction": "fraction",
        "clipfrac": "fraction",
        "length": "length",
        "len": "length",
        "lr": "learning_rate",
        "gradnorm": "gradient_norm",
        "fps": "throughput",
        "tps": "throughput",
        "sps": "throughput",
        "throughput": "throughput",
        "time": "time",
        "latency": "time",
        "duration": "time",
        "util": "utilization",
        "utilization": "utilization",
        "mfu": "utilization",
        "memory": "memory",
        "mem": "memory",
        "count": "count",
        # what an optimiser maximises (TRPO's surrogate `policy_objective`): a loss's opposite
        # sign, so no loss is it, and no registry metric declares it: nothing is offered
        "objective": "objective",
    }
)
"""Words that state a quantity on their own. Left out on purpose: `value` (`loss/value` is a
loss), `rate` (a learning rate is no fraction), `ratio` (an importance ratio is no fraction),
`norm` alone (`reward_before_norm` is a reward), `temperature` (SAC's is a coefficient)."""

_PHRASES: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("learning", "rate"): "learning_rate",
        ("grad", "norm"): "gradient_norm",
        ("gradient", "norm"): "gradient_norm",
        ("per", "second"): "throughput",
        # an optimiser's step size is its learning rate (ARS's `train/step_size`: the rate over
        # the spread of the returns), not a step counter
        ("step", "size"): "learning_rate",
    }
)
"""Two words that state a quantity together (and neither alone)."""


def statements(words: Sequence[str]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """Each quantity-stating word (or two-word phrase) of `words` in order, with its quantity."""
    found: list[tuple[tuple[str, ...], str]] = []
    for i, word in enumerate(words):
        phrase = _PHRASES.get((words[i - 1], word)) if i else None
        if phrase is not None:
            found.append(((words[i - 1], word), phrase))
        elif word in _WORDS:
            found.append(((word,), _WORDS[word]))
    return tuple(found)


def stated_quantity(words: Sequence[str]) -> str | None:
    """The quantity the last quantity-stating word (or two-word phrase) of `words` states, or
    None; `words` are a name's words in order (`words`)."""
    found = statements(words)
    return found[-1][1] if found else None
