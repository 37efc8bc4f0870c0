"""Data frames as Grafana's InfluxQL backend builds them from an InfluxDB response (table format).

Written from grafana/grafana `pkg/tsdb/influxdb/influxql/influxql.go` (every query is sent with
`epoch=ms`; the buffered parser is used unless the `influxqlStreamingParser` toggle is on),
`pkg/tsdb/influxdb/influxql/buffered/response_parser.go` (`transformRowsForTable`, `newTimeField`,
`newTagField`, `newValueFields`) and, for the streaming parser, which builds the same table shape,
`pkg/tsdb/influxdb/influxql/converter/converter.go` (`handleTableFormat*`):

- a query with `resultFormat: table` gives ONE frame, named after the first series' measurement,
  whatever the number of series (one per `GROUP BY` tag value): the series' rows are concatenated;
- its fields: `Time` (type time, when the first column is `time`), then one string field per tag
  key of the first series (each row repeats its series' tag value; config.displayNameFromDS = the
  key), then one field per remaining column named after it (numbers as nullable float64, strings
  as strings; config.displayNameFromDS = the column name);
- an empty result gives no frame at all. The frame's refId is the query's (the frontend sets it
  from the response key).
"""

from __future__ import annotations

from typing import Any

__all__ = ["table_frames"]


def _column_type(values: list[list[Any]], col: int) -> str:
    for row in values:
        v = row[col]
        if isinstance(v, bool):
            return "boolean"
        if isinstance(v, (int, float)):
            return "number"
        if isinstance(v, str):
            return "string"
    return "number"  # an all-null column stays a nullable float64 field


def table_frames(body: dict[str, Any], ref_id: str, raw_query: str) -> list[dict[str, Any]]:
    """The frames (DataFrame JSON: name, refId, meta, fields) of one query's response."""
    result = body["results"][0]
    if "error" in result:
        raise AssertionError(f"InfluxQL error: {result['error']}")
    rows: list[dict[str, Any]] = result.get("series", [])
    if not rows:
        return []
    first = rows[0]
    columns: list[str] = first["columns"]
    fields: list[dict[str, Any]] = []
    start = 0
    if columns[0] == "time":
        times = [v[0] for r in rows for v in r["values"]]
        fields.append({"name": "Time", "type": "time", "config": {}, "values": times})
        start = 1
    for key in first.get("tags", {}):
        fields.append(
            {
                "name": key,
                "type": "string",
                "config": {"displayNameFromDS": key},
                "values": [r.get("tags", {}).get(key) for r in rows for _ in r["values"]],
            }
        )
    for col in range(start, len(columns)):
        kinds = {_column_type(r["values"], col) for r in rows}
        kind = "string" if "string" in kinds else ("boolean" if "boolean" in kinds else "number")
        values = [v[col] for r in rows for v in r["values"]]
        fields.append(
            {
                "name": columns[col],
                "type": kind,
                "config": {"displayNameFromDS": columns[col]},
                "values": [float(v) if kind == "number" and v is not None else v for v in values],
            }
        )
    meta = {"executedQueryString": raw_query, "preferredVisualisationType": "table"}
    return [{"name": first["name"], "refId": ref_id, "meta": meta, "fields": fields}]
