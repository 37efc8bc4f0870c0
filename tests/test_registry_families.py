"""Who logs a metric (registry/families.py): every algorithm family of the schema and every
framework the registry knows has a name a reader knows it by."""

from __future__ import annotations

import json

import registry
from registry.families import ANY_FAMILY, FAMILY_NAMES, FRAMEWORK_NAMES, families, frameworks


def test_every_family_and_framework_has_a_name_in_both_languages() -> None:
    schema = json.loads((registry.BUILTIN_DIR / "schema" / "metrics.schema.json").read_text())
    enum = schema["$defs"]["metric"]["properties"]["applies_to"]["items"]["enum"]
    assert set(FAMILY_NAMES) | {ANY_FAMILY} == set(enum)
    assert all(set(names) == {"en", "zh"} for names in FAMILY_NAMES.values())
    assert set(FRAMEWORK_NAMES) == set(registry.FRAMEWORKS)


def test_families_and_frameworks_are_the_registrys(builtin: registry.Registry) -> None:
    for m in builtin.metrics:
        got = families([m])
        assert set(got) == ({ANY_FAMILY} if ANY_FAMILY in m.applies_to else set(m.applies_to))
        spelled = {a.framework for a in m.aliases} & set(registry.FRAMEWORKS)
        assert set(frameworks([m])) == spelled
