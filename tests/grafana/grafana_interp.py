"""Substitute dashboard variables and InfluxQL macros the way Grafana does before a query runs.

Grafana formats a multi-value variable for `${var:regex}` as `(a|b)` with each value
regex-escaped, `${var:text}` as the selected option's text, `${var:json}` as a JSON list of its values, `${var}`/`$var` as its value; the
InfluxDB backend replaces `$timeFilter` with `time >= <from>ms and time <= <to>ms`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Selection", "interpolate", "resolve_hidden", "variable_value"]


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
    out = out.replace("${run:json}", json.dumps(list(sel.runs)))
    out = out.replace("${focus}", sel.runs[0])

    def sub(m: re.Match[str]) -> str:
        name, fmt = m.group(1) or m.group(3), m.group(2)
        text, value = sel.single[name]
        return text if fmt == "text" else value

    out = re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)", sub, out)
    assert not re.search(r"\$[\w{]", out), f"unsubstituted variable in {out!r}"
    return out


def variable_value(body: dict[str, object]) -> str:
    """A query variable's value from InfluxDB's answer, as Grafana takes it: the first row's value
    after its time column (public/app/plugins/datasource/influxdb/response_parser.ts `parse`:
    `value[1]`, else `value[0]`); no row: no option, an empty value."""
    results = body.get("results") or [{}]
    assert isinstance(results, list)
    first = results[0]
    assert isinstance(first, dict) and "error" not in first, first
    for series in first.get("series") or []:
        for row in series["values"]:
            value = row[1] if len(row) > 1 else row[0]
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            return "" if value is None else str(value)
    return ""


def resolve_hidden(
    dashboard: Mapping[str, object],
    runs: Sequence[str],
    single: Mapping[str, tuple[str, str]],
    raw_query: Callable[[str], dict[str, object]],
) -> Selection:
    """The selection with the dashboard's hidden query variables (`hide: 2`) computed by running
    their queries in the dashboard's order, each with the ones before it substituted, as Grafana
    resolves dependent variables."""
    values = dict(single)
    templating = dashboard["templating"]
    assert isinstance(templating, Mapping)
    for var in templating["list"]:
        if var.get("type") != "query" or var.get("hide") != 2:
            continue
        query = interpolate(var["query"], Selection(runs=runs, single=values))
        value = variable_value(raw_query(query))
        values[var["name"]] = (value, value)
    return Selection(runs=runs, single=values)
