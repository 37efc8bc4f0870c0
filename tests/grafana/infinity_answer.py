"""An Infinity target of a generated dashboard answered by the real datasource app.

The request is the target's own (`url`, `url_options.params` with the variables substituted as
Grafana does: `grafana_interp.interpolate`); the rows at its `root_selector` become the table
Infinity's backend parser builds: one field per column, named by the column's `text`, typed by
its `type`, the frame carrying the query's refId.
"""

from __future__ import annotations

from typing import Any

from grafana_interp import Selection, interpolate

__all__ = ["infinity_frames", "is_infinity"]


def is_infinity(target: dict[str, Any]) -> bool:
    return "url" in target and "query" not in target


def infinity_frames(client: Any, target: dict[str, Any], sel: Selection) -> list[dict[str, Any]]:
    params = {p["key"]: interpolate(p["value"], sel) for p in target["url_options"]["params"]}
    answer = client.get(target["url"], query_string=params)
    assert answer.status_code == 200, answer.data
    rows = answer.get_json()[target["root_selector"]]
    fields = [
        {"name": c["text"], "type": c["type"], "values": [r.get(c["selector"]) for r in rows]}
        for c in target["columns"]
    ]
    return [{"name": target["refId"], "refId": target["refId"], "fields": fields}]
