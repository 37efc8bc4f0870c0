"""A user file's metric, completed with the stated defaults before it is validated.

The shipped registry declares every field of a metric; a user adding one of their own needs only
`id`, `title`, `unit` and usually `aliases`. What they leave out gets a default that claims
nothing: no healthy range, no alert, no physical limits, group `user`, the title as definition,
the quantity its id states (`quantity.stated_quantity`: `my_loss` is a loss) or `unstated`.
Texts may be a plain string or `{en: ...}` without `zh` (the English is shown in Chinese too),
and `aliases` may be a list of keys (any framework) or a mapping framework -> key or keys.
The completed entry is then held to the same schema as the shipped ones.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .quantity import UNSTATED, stated_quantity, words

__all__ = ["USER_DEFAULTS", "USER_GROUP", "complete_user_bookkeeping", "complete_user_metric"]

USER_GROUP = "user"
"""The group (and stored measurement) of a user metric that names none."""

_NO_LIMITS = "a user metric without declared limits: every finite value is kept"
USER_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "group": USER_GROUP,
        "layer": "trend",
        "sampling": "per_step",
        "aggregation": "mean",
        "direction": "band",
        "limits": {"min": None, "max": None, "reason": _NO_LIMITS},
        "applies_to": ["all"],
        "failure_scenarios": [],
        "verification": [],
        "confusions": [],
        "related": [],
        "display": {},
    }
)
"""Every field a user metric may leave out, and what it then is (besides `definition`, the
title, and `formula`, the id per step)."""

# Text fields of a metric (dotted paths; lists hold texts or scenarios of texts).
_TEXTS = ("title", "short", "definition")
_TEXT_LISTS = ("verification", "confusions")
_SCENARIO_TEXTS = ("causes", "check", "change")


def complete_user_metric(raw: Any) -> Any:
    """`raw` with the defaults filled in; anything that is not a mapping is returned as it is
    (the schema names the problem)."""
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    for key in _TEXTS:
        if key in out:
            out[key] = _text(out[key])
    if "definition" not in out and "title" in out:
        out["definition"] = out["title"]
    if "formula" not in out and isinstance(out.get("id"), str):
        out["formula"] = {"expr": out["id"], "over": "per_step"}
    elif isinstance(out.get("formula"), Mapping) and "note" in out["formula"]:
        out["formula"] = {**out["formula"], "note": _text(out["formula"]["note"])}
    if "quantity" not in out and isinstance(out.get("id"), str):
        out["quantity"] = stated_quantity(words(out["id"])) or UNSTATED
    for key, value in USER_DEFAULTS.items():
        if key not in out:
            out[key] = copy.deepcopy(value)  # each metric its own, the defaults untouched
    for key in _TEXT_LISTS:
        if isinstance(out[key], list):
            out[key] = [_text(t) for t in out[key]]
    if isinstance(out["failure_scenarios"], list):
        out["failure_scenarios"] = [_scenario(s) for s in out["failure_scenarios"]]
    if "aliases" in out:
        out["aliases"] = _aliases(out["aliases"])
    return out


def complete_user_bookkeeping(raw: Any) -> Any:
    """A user file's `bookkeeping:` entry with each key's meaning completed as a text."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("keys"), list):
        return raw
    keys = [
        {**k, "meaning": _text(k["meaning"])} if isinstance(k, Mapping) and "meaning" in k else k
        for k in raw["keys"]
    ]
    return {**raw, "keys": keys}


def _text(raw: Any) -> Any:
    if isinstance(raw, str):
        return {"en": raw, "zh": raw}
    if isinstance(raw, Mapping) and "en" in raw and "zh" not in raw:
        return {**raw, "zh": raw["en"]}
    return raw


def _scenario(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    if "symptom" in out:
        out["symptom"] = _text(out["symptom"])
    for key in _SCENARIO_TEXTS:
        if isinstance(out.get(key), list):
            out[key] = [_text(t) for t in out[key]]
    return out


def _aliases(raw: Any) -> Any:
    """[{key, framework}, ...] from a list of keys and alias entries, or a framework -> key(s)
    mapping; a plain key is the `generic` framework's (it answers for every framework)."""
    if isinstance(raw, Mapping):
        out: list[Any] = []
        for framework, keys in raw.items():
            for key in (
                [keys] if isinstance(keys, str) else keys if isinstance(keys, list) else [keys]
            ):
                out.append({"key": key, "framework": framework})
        return out
    if isinstance(raw, list):
        return [{"key": a, "framework": "generic"} if isinstance(a, str) else a for a in raw]
    return raw
