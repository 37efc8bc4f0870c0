"""An Infinity target of a generated dashboard answered by the real datasource app.

An inline target (`source: inline`) makes no request: its `data` is the answer, its rows at
`root_selector` (the whole answer when empty) become the same table (grafana-infinity-datasource
pkg/infinity/inline.go; a number column of nulls stays a number field: `sliceToFrame` in
grafana/infinity-libs lib/go/gframer/gframer.go).

A URL target's request is the target's own (`url`, `url_options.params` with the variables substituted as
Grafana does: `grafana_interp.interpolate`); the rows at its `root_selector` become the table
Infinity's backend parser builds: one field per column, named by the column's `text`, typed by
its `type`, the frame carrying the query's refId.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_interp import Selection, interpolate

__all__ = ["infinity_frames", "is_infinity"]


def is_infinity(target: dict[str, Any]) -> bool:
    return ("url" in target or target.get("source") == "inline") and "query" not in target


def infinity_frames(client: Any, target: dict[str, Any], sel: Selection) -> list[dict[str, Any]]:
    if target.get("source") == "inline":
        answer = json.loads(target["data"])
        inline = answer[target["root_selector"]] if target["root_selector"] else answer
        return _table(target, inline)
    params = {p["key"]: interpolate(p["value"], sel) for p in target["url_options"]["params"]}
    answer = client.get(target["url"], query_string=params)
    assert answer.status_code == 200, answer.data
    return _table(target, answer.get_json()[target["root_selector"]])


def _table(target: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fields = [
        {"name": c["text"], "type": c["type"], "values": [r.get(c["selector"]) for r in rows]}
        for c in target["columns"]
    ]
    return [{"name": target["refId"], "refId": target["refId"], "fields": fields}]
