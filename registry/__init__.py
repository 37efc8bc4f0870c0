"""The rlvitals metric registry: every RL training metric, term and diagnosis rule, declared once.

`load()` reads `metrics.yaml`, `terms.yaml`, `rules.yaml` and `bookkeeping.yaml` (each
framework's progress counters, kept without a warning), plus user extension files, validates
them and returns a frozen `Registry`; `Registry.resolve(name, framework)` translates
any framework's spelling of a metric into its canonical id and transform. `add_registry_argument` and
`registry_from_args` give every command the same `--registry PATH` (a folder replacing the
built-in registry, or user files extending it) and `add_map_argument` `--map TAG=METRIC` (a run's
own tag names, as a user file's `map:` section gives them: `tag_map`); `recognise` says how many
of a run's names the registry knows and suggests a metric for each other (`suggest`);
`AutoMap` says which unknown names are read as a metric by themselves, when name and value agree
(`auto_map`; `--map TAG=` keeps one as logged: `Registry.keeping`).

May import: the standard library, PyYAML, jsonschema. Never `exporter`, `grafana`, `rlvitals`.
"""

from .arguments import add_map_argument, add_registry_argument, load_paths, registry_from_args
from .auto_map import AutoMap
from .catalog import Registry
from .errors import (
    AmbiguousName,
    BadMapping,
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
from .suggest import Recognition, Suggestion, recognise, suggest
from .tag_map import RECORD_KEY as MAP_RECORD_KEY
from .tag_map import map_record, parse_kept, parse_map

__all__ = [
    "BUILTIN_DIR",
    "FRAMEWORKS",
    "MAP_RECORD_KEY",
    "Alert",
    "Alias",
    "AmbiguousName",
    "AutoMap",
    "BadMapping",
    "Band",
    "Bands",
    "BookkeepingKey",
    "Condition",
    "Metric",
    "Problem",
    "Recognition",
    "Registry",
    "RegistryError",
    "RegistryInvalid",
    "Resolution",
    "ResolveError",
    "Rule",
    "Scenario",
    "Stages",
    "Suggestion",
    "Term",
    "Text",
    "Transform",
    "UnknownName",
    "add_map_argument",
    "add_registry_argument",
    "load",
    "load_paths",
    "map_record",
    "parse_kept",
    "parse_map",
    "recognise",
    "registry_from_args",
    "suggest",
]
