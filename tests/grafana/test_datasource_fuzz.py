"""Property test over every endpoint: whatever is sent, no 5xx, and every error is JSON with a message."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

GET_PATHS = [
    "/",
    "/api/health",
    "/api/runs",
    "/api/cards",
    "/api/series",
    "/api/events",
    "/api/terms",
    "/api/terms/policy_entropy",
    "/terms/policy_entropy",
    "/terms/",
    "/run",
    "/api/run",
    "/api/fields",
    "/api/field_series",
    "/api/card_html",
    "/live/static/run.js",
]
POST_PATHS = [
    "/metrics",
    "/metric-payload-options",
    "/query",
    "/variable",
    "/tag-keys",
    "/tag-values",
]
KEYS = [
    "run",
    "metric",
    "points",
    "smoothing",
    "from",
    "to",
    "lang",
    "format",
    "name",
    "key",
    "target",
    "field",
    "refresh",
    "download",
]
NASTY = [
    "healthy",
    "collapse",
    "empty",
    "policy_entropy",
    "reward_component/format",
    "reward_component/../x",
    "' OR '1'='1",
    '"; DROP DATABASE x; --',
    "\x00",
    "nan",
    "inf",
    "-1",
    "1e309",
    "99999999999999999999999",
    "zh",
    "en",
    "table",
    "frame",
    "<script>alert(1)</script>",
    "\ud7ff\u202e",
]

texts = st.one_of(st.sampled_from(NASTY), st.text(max_size=30))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
params = st.dictionaries(st.sampled_from(KEYS), texts, max_size=5)
targets = st.lists(
    st.fixed_dictionaries(
        {
            "target": st.one_of(
                st.sampled_from(["series", "cards", "events", "terms", "runs"]), texts
            )
        },
        optional={
            "refId": st.one_of(texts, st.integers()),
            "payload": st.one_of(
                st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6),
                st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6).map(json.dumps),
                texts,
            ),
            "hide": st.booleans(),
        },
    ),
    max_size=3,
)
bodies = st.one_of(
    st.fixed_dictionaries({"targets": targets}, optional={"maxDataPoints": json_values}),
    st.dictionaries(st.sampled_from([*KEYS, "payload"]), json_values, max_size=5),
    json_values,
)


def _check(response: Any) -> None:
    assert response.status_code < 500, response.data[:300]
    if response.status_code >= 400:
        body = response.get_json(silent=True)
        assert isinstance(body, dict), response.data[:300]
        assert isinstance(body.get("error"), str) and body["error"]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(GET_PATHS),
    query=params,
    method=st.sampled_from(["GET", "GET", "POST", "PUT"]),
)
def test_get_endpoints_never_5xx(app: Flask, path: str, query: dict[str, str], method: str) -> None:
    url = f"{path}?{urlencode(query)}" if query else path
    _check(app.test_client().open(url, method=method))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(POST_PATHS), body=bodies)
def test_post_endpoints_never_5xx(app: Flask, path: str, body: Any) -> None:
    _check(app.test_client().post(path, data=json.dumps(body), content_type="application/json"))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(POST_PATHS), raw=st.binary(max_size=200))
def test_raw_bytes_bodies_never_5xx(app: Flask, path: str, raw: bytes) -> None:
    _check(app.test_client().post(path, data=raw, content_type="application/json"))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entry=texts)
def test_term_ids_never_5xx(app: Flask, entry: str) -> None:
    for prefix in ("/api/terms/", "/terms/"):
        _check(app.test_client().get(prefix + entry.replace("/", "%2F").replace("?", "%3F")))


def test_oversize_body_is_413_json(app: Flask) -> None:
    big = json.dumps({"targets": [], "pad": "x" * (2 * 1024 * 1024)})
    r = app.test_client().post("/query", data=big, content_type="application/json")
    assert r.status_code == 413 and r.get_json()["error"] == "request body too large"
