"""InfluxDB line protocol: escape names and values and format one point per line.

Escaping follows the line-protocol reference: measurements escape commas and spaces; tag keys,
tag values and field keys also escape equals signs; string field values escape double quotes and
backslashes. Tabs and carriage returns in names are written raw, which InfluxDB stores exactly
(`influxdb-client` writes `\\t`, which InfluxDB stores as a backslash and a `t`). Two things
have no exact form and are refused upstream (`translate.name_problem`): a newline in a name
(written `\\n` here so a point stays on one line) and a name ending in a backslash (given a
trailing space here so it cannot escape the separator after it).
Tags with an empty key or value are left out; non-finite floats are never written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

__all__ = [
    "FieldValue",
    "escape_field_key",
    "escape_measurement",
    "escape_string",
    "escape_tag_key",
    "escape_tag_value",
    "format_field_value",
    "format_line",
    "join_lines",
    "value_texts",
]

FieldValue = float | int | bool | str

# Tabs and carriage returns are written as they are: InfluxDB stores them exactly (a `\\t` would
# be stored as a backslash and a t). A newline cannot be written raw; `\\n` keeps the point on
# one line (the exporter refuses such names before they get here: `translate.name_problem`).
_MEASUREMENT = str.maketrans({",": "\\,", " ": "\\ ", "\n": "\\n"})
_KEY = str.maketrans({",": "\\,", "=": "\\=", " ": "\\ ", "\n": "\\n"})
_STRING = str.maketrans({'"': '\\"', "\\": "\\\\"})


def escape_measurement(name: str) -> str:
    return name.translate(_MEASUREMENT)


def escape_tag_key(key: str) -> str:
    return key.translate(_KEY)


def escape_field_key(key: str) -> str:
    # A field key ending in a backslash would escape the `=` after it and InfluxDB would refuse
    # the whole request (`influxdb-client` writes it so); the trailing space keeps it a key.
    escaped = key.translate(_KEY)
    return escaped + " " if escaped.endswith("\\") else escaped


def escape_tag_value(value: str) -> str:
    escaped = value.translate(_KEY)
    return escaped + " " if escaped.endswith("\\") else escaped


def escape_string(value: str) -> str:
    return value.translate(_STRING)


def format_field_value(value: FieldValue) -> str | None:
    """The value as line protocol writes it; None for a value that cannot be written (NaN, Inf)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return f'"{escape_string(value)}"'


def format_line(
    measurement: str,
    tags: Mapping[str, str | None],
    fields: Mapping[str, FieldValue],
    timestamp: int | None = None,
) -> str | None:
    """One point; tags and fields sorted by key. None when no field can be written."""
    parts = [
        f"{escape_field_key(k)}={text}"
        for k, v in sorted(fields.items())
        if (text := format_field_value(v)) is not None
    ]
    if not parts:
        return None
    tag_text = "".join(
        f",{key}={val}"
        for key, val in (
            (escape_tag_key(k), escape_tag_value(v))
            for k, v in sorted(tags.items())
            if v is not None
        )
        if key and val
    )
    head = f"{escape_measurement(measurement)}{tag_text} {','.join(parts)}"
    return head if timestamp is None else f"{head} {timestamp}"


def join_lines(lines: Iterable[str]) -> bytes:
    """A request body: lines separated by newlines, UTF-8 encoded."""
    return "\n".join(lines).encode("utf-8")


def value_texts(values: Sequence[Any]) -> list[str | None]:
    """Each value as a line-protocol field value (None: not writable, as a NaN). The floats,
    nearly always all of them, are written by one `orjson.dumps` of the list: the shortest
    digits that read back as the same double, as `repr` finds them (spelt `1.0`, `1e-7`), in C
    for a tenth of a `repr` each; the block renderer writes its values so too."""
    if not values:
        return []
    # anything else holds the place of an empty string, which no float is written as
    floats = [v if v.__class__ is float else "" for v in values]
    joined = orjson.dumps(floats).decode()
    texts: list[str | None] = list(joined[1:-1].split(","))
    if "null" in joined:  # NaN and infinities: never written
        texts = [None if t == "null" else t for t in texts]
    if '"' in joined:
        for i, v in enumerate(values):
            if v.__class__ is not float:
                # (None: a NaN sqlite kept as NULL, never written either)
                texts[i] = None if v is None else format_field_value(v)
    return texts
