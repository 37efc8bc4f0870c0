"""The provisioned Grafana alert rules as a Prometheus rule file, so a real Prometheus (or
`promtool test rules`) evaluates them: there is no Grafana server here (DESIGN.md).

The transformation, and why it keeps each rule's meaning:

- Every generated rule is A (PromQL, instant) -> B (reduce `last`, drop NaN) -> C (threshold
  `gt` t), alerting per series of A with `for`, `noDataState: OK` (checked here, refused
  otherwise). An instant query has one sample per series, so B is its value, and C keeps the
  series above t: Prometheus's `(A) > t` keeps the same series (NaN > t is false), and its
  alerting rule fires per series with the same `for`; no series is no alert (`noDataState: OK`).
- Labels are kept; the summary is kept with Grafana's `$$` (a literal dollar in provisioning)
  written back as `$`. Both Grafana and Prometheus read `{{ .Labels.run }}`.
- `scale` multiplies every duration, and nothing else: the rule's `for`, the group's evaluation
  `interval`, and the range (`[600s]`) and `offset` windows in the PromQL. With the exporter's
  lifecycle windows shortened by the same factor (RLVITALS_STALL_AFTER_S,
  RLVITALS_ENDED_AFTER_S), the documented defaults (10 minutes to stall, an hour to end) play out
  in seconds, in the same proportions. `tests/grafana/test_prom_rules.py` checks that scaling
  back gives the provisioned text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["duration_seconds", "prometheus_rules", "scale_durations"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
# a duration inside a range selector `[...]` (also a subquery's `[a:b]`) or after `offset`
_WINDOW = re.compile(r"\[([^\]]+)\]|(offset\s+)(\d+(?:\.\d+)?(?:ms|s|m|h|d|w))")


def duration_seconds(text: str) -> float:
    """`90s`, `1m`, `1h30m` in seconds."""
    total, at = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != at:
            raise ValueError(f"not a duration: {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if at != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total


def _scaled(text: str, scale: float) -> str:
    return f"{round(duration_seconds(text) * scale * 1000)}ms"


def scale_durations(expr: str, scale: float) -> str:
    """The PromQL with each range and offset window multiplied by `scale`."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            parts = match.group(1).split(":")
            return "[" + ":".join(_scaled(p, scale) if p else p for p in parts) + "]"
        return match.group(2) + _scaled(match.group(3), scale)

    return _WINDOW.sub(one, expr)


def _condition(rule: Mapping[str, Any]) -> tuple[str, float]:
    data = rule["data"]
    a, b, c = data
    model_a, model_b, model_c = a["model"], b["model"], c["model"]
    ok = (
        len(data) == 3
        and model_a.get("instant") is True
        and model_b["type"] == "reduce"
        and model_b["reducer"] == "last"
        and model_b["expression"] == a["refId"]
        and model_c["type"] == "threshold"
        and model_c["expression"] == b["refId"]
        and rule["condition"] == c["refId"]
        and rule["noDataState"] == "OK"
    )
    evaluator = model_c["conditions"][0]["evaluator"]
    if not ok or evaluator["type"] != "gt" or len(model_c["conditions"]) != 1:
        raise ValueError(f"rule {rule['uid']}: not an A (instant) -> last -> gt rule")
    return str(model_a["expr"]), float(evaluator["params"][0])


def prometheus_rules(
    provisioned: Mapping[str, Any], *, scale: float = 1.0, uids: Collection[str] | None = None
) -> dict[str, Any]:
    """A Prometheus rule file (as a mapping) for the provisioned rules (only `uids`, if given),
    every duration multiplied by `scale`."""
    groups = []
    for group in provisioned["groups"]:
        rules = []
        for rule in group["rules"]:
            if uids is not None and rule["uid"] not in uids:
                continue
            expr, threshold = _condition(rule)
            rules.append(
                {
                    "alert": rule["uid"],
                    "expr": f"({scale_durations(expr, scale)}) > {threshold:g}",
                    "for": _scaled(rule["for"], scale),
                    "labels": dict(rule["labels"]),
                    "annotations": {"summary": rule["annotations"]["summary"].replace("$$", "$")},
                }
            )
        if rules:
            groups.append(
                {
                    "name": group["name"],
                    "interval": _scaled(group["interval"], scale),
                    "rules": rules,
                }
            )
    return {"groups": groups}
