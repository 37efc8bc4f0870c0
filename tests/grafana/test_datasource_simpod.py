"""The simpod JSON datasource protocol returns the same series, cards, terms and events."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask


def _post(app: Flask, path: str, body: Any) -> Any:
    r = app.test_client().post(path, json=body)
    assert r.status_code == 200, r.data
    return r.get_json()


def test_root_answers_200_for_the_connection_test(app: Flask) -> None:
    assert app.test_client().get("/").status_code == 200


def test_metrics_lists_targets_with_payload_selects(app: Flask) -> None:
    metrics = _post(app, "/metrics", {})
    assert {m["value"] for m in metrics} == {"series", "cards", "events", "terms", "runs"}
    options = _post(
        app, "/metric-payload-options", {"metric": "series", "payload": {}, "name": "run"}
    )
    assert [o["value"] for o in options] == ["collapse", "empty", "healthy"]


def test_query_series_formats_carry_the_same_rows(app: Flask) -> None:
    base = {"run": "healthy", "metric": "policy_entropy", "points": 50, "smoothing": 0.6}
    api = (
        app.test_client()
        .get("/api/series?run=healthy&metric=policy_entropy&points=50&smoothing=0.6")
        .get_json()["rows"]
    )
    targets = [
        {"refId": f, "target": "series", "payload": json.dumps({**base, "format": f})}
        for f in ("timeseries", "table", "frame")
    ]
    out = _post(app, "/query", {"targets": targets, "maxDataPoints": 500})
    series = {s["target"]: s["datapoints"] for s in out if "datapoints" in s}
    assert series["policy_entropy raw"] == [[r["raw"], r["step"] * 1000] for r in api]
    table = next(s for s in out if s.get("type") == "table")
    assert table["rows"] == [
        [r[c] for c in ("step", "raw", "smooth", "band_low", "band_high")] for r in api
    ]
    frame = next(s for s in out if "fields" in s)
    assert frame["fields"][0]["values"] == [r["step"] for r in api]


def test_query_respects_max_data_points_when_no_points_given(app: Flask) -> None:
    body = {
        "maxDataPoints": 40,
        "targets": [
            {
                "refId": "A",
                "target": "series",
                "payload": {"run": "healthy", "metric": "raw_reward"},
            }
        ],
    }
    out = _post(app, "/query", body)
    assert all(len(s["datapoints"]) <= 40 for s in out)


def test_query_cards_events_terms_and_hidden_targets(app: Flask) -> None:
    body = {
        "targets": [
            {"refId": "A", "target": "cards", "payload": {"run": "healthy", "metric": "policy_kl"}},
            {"refId": "B", "target": "events", "payload": {"run": "healthy"}},
            {"refId": "C", "target": "terms", "payload": {"lang": "zh"}},
            {"refId": "D", "target": "runs", "hide": True},
        ]
    }
    cards, events, terms = _post(app, "/query", body)
    assert cards["refId"] == "A" and cards["rows"][0][0] == "policy_kl"
    names = [f["name"] for f in events["fields"]]
    assert names[:1] == ["time"] and "text" in names and "title" in names
    assert events["fields"][0]["values"] == [100_000, 2_500_000]
    assert terms["type"] == "table" and len(terms["rows"]) > 1


def test_variable_tag_keys_and_values(app: Flask) -> None:
    runs = _post(app, "/variable", {"payload": {"target": "runs"}, "range": {}})
    assert [v["__value"] for v in runs] == ["collapse", "empty", "healthy"]
    core = _post(app, "/variable", {"payload": {"target": "metrics", "core": True}})
    assert "policy_entropy" in [v["__value"] for v in core]
    assert {k["text"] for k in _post(app, "/tag-keys", {})} == {"run", "metric"}
    assert {v["text"] for v in _post(app, "/tag-values", {"key": "run"})} == {
        "collapse",
        "empty",
        "healthy",
    }


def test_bad_query_bodies_are_400_with_a_message(app: Flask) -> None:
    client = app.test_client()
    cases: list[tuple[str, Any]] = [
        ("/query", "{not json"),
        ("/query", "[1, 2]"),
        ("/query", json.dumps({"targets": "x"})),
        ("/query", json.dumps({"targets": [{"target": "nope"}]})),
        ("/query", json.dumps({"targets": [{"target": "series", "payload": "{bad"}]})),
        ("/query", json.dumps({"targets": [{"target": "series", "payload": {"run": 5}}]})),
        ("/variable", json.dumps({"payload": {"target": "other"}})),
        ("/tag-values", json.dumps({"key": "gpu"})),
        ("/metric-payload-options", json.dumps({"name": "zzz"})),
    ]
    for path, data in cases:
        r = client.post(path, data=data, content_type="application/json")
        assert r.status_code == 400, (path, data, r.data)
        assert r.get_json()["error"]
