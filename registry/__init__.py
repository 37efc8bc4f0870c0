"""The rlvitals metric registry: every RL training metric, term and diagnosis rule, declared once.

`load()` reads `metrics.yaml`, `terms.yaml` and `rules.yaml` (plus user extension files),
(and `bookkeeping.yaml`: each framework's progress counters, kept without a warning)
validates them and returns a frozen `Registry`; `Registry.resolve(name, framework)` translates
any framework's spelling of a metric into its canonical id and transform.
"""

from .catalog import Registry
from .errors import (
    AmbiguousName,
    Problem,
    RegistryError,
    RegistryInvalid,
    ResolveError,
    UnknownName,
)
from .loader import BUILTIN_DIR, load
from .model import (
    Alert,
    Alias,
    Band,
    Bands,
    BookkeepingKey,
    Condition,
    Metric,
    Rule,
    Scenario,
    Stages,
    Term,
    Text,
    Transform,
)
from .resolve import FRAMEWORKS, Resolution

__all__ = [
    "BUILTIN_DIR",
    "FRAMEWORKS",
    "Alert",
    "Alias",
    "AmbiguousName",
    "Band",
    "Bands",
    "BookkeepingKey",
    "Condition",
    "Metric",
    "Problem",
    "Registry",
    "RegistryError",
    "RegistryInvalid",
    "Resolution",
    "ResolveError",
    "Rule",
    "Scenario",
    "Stages",
    "Term",
    "Text",
    "Transform",
    "UnknownName",
    "load",
]
