"""InfluxQL quoting: identifiers in double quotes, string literals in single quotes.

Inside either, a backslash and the quote character are escaped with a backslash, so no value can
end the literal early. Control characters (newlines end an InfluxQL statement's string) are
refused outright: nothing the datasource queries legitimately contains them.
"""

from __future__ import annotations

import re

__all__ = ["UnsafeName", "quote_ident", "quote_string"]


class UnsafeName(ValueError):
    """A name that cannot be put into InfluxQL safely (it contains a control character)."""


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _check(text: str, what: str) -> None:
    if _CONTROL.search(text):
        raise UnsafeName(f"{what} {text!r} contains a control character")


def quote_ident(name: str) -> str:
    """`name` as a double-quoted InfluxQL identifier (`"` and `\\` escaped)."""
    _check(name, "identifier")
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_string(value: str) -> str:
    """`value` as a single-quoted InfluxQL string literal (`'` and `\\` escaped)."""
    _check(value, "string")
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
