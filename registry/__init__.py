"""The rlvitals metric registry: every RL training metric, term and diagnosis rule, declared once.

`load()` reads `metrics.yaml`, `terms.yaml`, `rules.yaml` and `bookkeeping.yaml` (each
framework's progress counters, kept without a warning), plus user extension files, validates
them and returns a frozen `Registry`; `Registry.resolve(name, framework)` translates
any framework's spelling of a metric into its canonical id and transform. `add_registry_argument` and
`registry_from_args` give every command the same `--registry PATH` (a folder replacing the
built-in registry, or user files extending it).

May import: the standard library, PyYAML, jsonschema. Never `exporter`, `grafana`, `rlvitals`.
"""

from .arguments import add_registry_argument, load_paths, registry_from_args
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
    "add_registry_argument",
    "load",
    "load_paths",
    "registry_from_args",
]
