"""Substitute dashboard variables and InfluxQL macros the way Grafana does before a query runs.

Grafana formats a multi-value variable for `${var:regex}` as `(a|b)` with each value
regex-escaped, `${var:text}` as the selected option's text, `${var}`/`$var` as its value; the
InfluxDB backend replaces `$timeFilter` with `time >= <from>ms and time <= <to>ms`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Selection", "interpolate"]


@dataclass(frozen=True)
class Selection:
    """Current values of the variables: run(s), and (text, value) of single-value variables."""

    runs: Sequence[str]
    single: Mapping[str, tuple[str, str]]
    time_from_ms: int = 0
    time_to_ms: int = 10**12


def _regex(values: Sequence[str]) -> str:
    escaped = [re.sub(r"([\\^$.|?*+()\[\]{}/])", r"\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def interpolate(query: str, sel: Selection) -> str:
    out = query.replace(
        "$timeFilter", f"time >= {sel.time_from_ms}ms and time <= {sel.time_to_ms}ms"
    )
    out = out.replace("${run:regex}", _regex(sel.runs))
    out = out.replace("${focus}", sel.runs[0])

    def sub(m: re.Match[str]) -> str:
        name, fmt = m.group(1) or m.group(3), m.group(2)
        text, value = sel.single[name]
        return text if fmt == "text" else value

    out = re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)", sub, out)
    assert not re.search(r"\$[\w{]", out), f"unsubstituted variable in {out!r}"
    return out
