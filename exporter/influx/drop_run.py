"""Delete a run's points from InfluxDB (`rlvitals runs delete` with RLVITALS_INFLUX_URL set).

Every point rlvitals writes carries the run as its `run` tag, in every measurement (the registry
groups, run config, spread, unregistered, events, the rollups and their marker: see
`exporter.schema`), so one statement without `FROM` removes them all:

- 1.x: InfluxQL `DROP SERIES WHERE "run" = '...'` on `/query`: with no `FROM` it drops the
  series with that tag value in every measurement of the database, index entries included
  (checked against a real influxd, every measurement including the rollups, by
  tests/exporter/influx/test_drop_run.py).
- 2.x: `POST /api/v2/delete` with the predicate `run="..."` over all time (not tested here: the
  test fixture is InfluxDB 1.x).

Renaming a run in InfluxDB is not offered: a tag value cannot be changed in place, and
`SELECT ... INTO` writes the tags the points have (with `GROUP BY *`), so a copy under a new `run`
tag would mean reading every point out and writing it back as new lines, for every measurement,
with nothing to make it atomic. `RENAME_REFUSED` says so.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

from ..config import ExporterSettings, redact_url
from ..errors import WriteError

__all__ = ["RENAME_REFUSED", "drop_run_points", "influxql_string"]

RENAME_REFUSED = (
    "renaming a run is not available with InfluxDB configured (RLVITALS_INFLUX_URL): InfluxDB "
    "cannot change a tag value, and a copy of every point under the new name would not be "
    "atomic. Rename it in a store without InfluxDB, or log it again under the new name"
)

_ALL_TIME = ("1677-09-21T00:12:44Z", "2262-04-11T23:47:16Z")
"""The range InfluxDB 2.x timestamps can hold (int64 nanoseconds)."""


def influxql_string(value: str) -> str:
    """An InfluxQL string literal: backslashes and single quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _request(req: urllib.request.Request, where: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        raise WriteError(f"{where} answered HTTP {exc.code}: {detail}", status=exc.code) from exc
    except OSError as exc:
        raise WriteError(f"{where} is unreachable: {exc}") from exc


def drop_run_points(settings: ExporterSettings, run: str) -> None:
    """Delete every point of `run` in the configured InfluxDB; `WriteError` saying what the
    server answered when it did not."""
    url = settings.influx_url
    assert url is not None
    base = url.rstrip("/")
    timeout = settings.flush_timeout
    if settings.influx_api == "v2":
        where = f"InfluxDB at {redact_url(url)} (bucket {settings.influx_bucket!r})"
        query = urllib.parse.urlencode(
            {"org": settings.influx_org, "bucket": settings.influx_bucket}
        )
        predicate = 'run="' + run.replace("\\", "\\\\").replace('"', '\\"') + '"'
        body = json.dumps({"start": _ALL_TIME[0], "stop": _ALL_TIME[1], "predicate": predicate})
        req = urllib.request.Request(
            f"{base}/api/v2/delete?{query}",
            data=body.encode(),
            method="POST",
            headers={
                "Authorization": f"Token {settings.influx_token}",
                "Content-Type": "application/json",
            },
        )
        _request(req, where, timeout)
        return
    where = f"InfluxDB at {redact_url(url)} (database {settings.influx_database!r})"
    statement = f'DROP SERIES WHERE "run" = {influxql_string(run)}'
    form = urllib.parse.urlencode({"db": settings.influx_database, "q": statement})
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if settings.influx_username:
        pair = f"{settings.influx_username}:{settings.influx_password or ''}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    req = urllib.request.Request(
        f"{base}/query", data=form.encode(), method="POST", headers=headers
    )
    answer = json.loads(_request(req, where, timeout) or b"{}")
    for result in answer.get("results", []):
        if "error" in result:
            raise WriteError(f"{where} refused {statement!r}: {result['error']}", retryable=False)
