"""Long series and whole-run statistics on the InfluxDB store come from the rollups the exporter
keeps there and equal a brute-force bucketing of the raw points; a series too sparse for a level
is read from its raw points; a run written before rollups existed (no marker) gives the same
answers from its raw points."""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from influx_server import InfluxDatabase, InfluxServer

import registry
from exporter.influx.direct import DirectRun
from exporter.schema import ROLLUP_MARKER, rollup_measurement, unkept_key
from grafana.datasource import DatasourceConfig, create_app
from grafana.datasource.history import InfluxHistory, InfluxHttp, Points, bucket_plan
from grafana.datasource.history.influx_http import ResultSeries, first_number
from grafana.datasource.history.influx_rollups import (
    RollupSpan,
    marker_statement,
    read_marker,
    read_window_bounds,
    window_bounds_statements,
)

STEPS = 40_000


def _value(step: int) -> float:
    return math.sin(step / 900.0) + 0.001 * (step % 17)


@pytest.fixture(scope="module")
def influx_db(influxd: InfluxServer) -> InfluxDatabase:
    name = f"t_{uuid.uuid4().hex[:12]}"
    influxd.post_query(f'CREATE DATABASE "{name}"')
    return InfluxDatabase(influxd, name)


@pytest.fixture(scope="module")
def history(
    influx_db: InfluxDatabase, reg: registry.Registry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InfluxHistory]:
    """Run `r` imported (rollups kept), resumed re-logging steps mid-block; run `legacy` holds the
    same raw points written as an older exporter wrote them (no rollups, no marker)."""
    settings = influx_db.settings(tmp_path_factory.mktemp("store"))
    run = DirectRun("r", project=None, registry=reg, settings=settings, framework=None)
    for step in range(STEPS):
        values = {"policy_kl": _value(step)}
        if step % 100 == 0:  # every 100 steps: too sparse for 64-step blocks
            values["value_loss"] = _value(step) * 2
        if step % 10 == 0:  # less often than the other field of its measurement
            values["clip_fraction"] = (step % 1000) / 1000
        if step % 1000 == 0:  # too sparse for either level: the exporter keeps neither
            values["grad_norm"] = _value(step) + 3
        run.log(step, values)
    run.finish(60)
    run = DirectRun("r", project=None, registry=reg, settings=settings, framework=None, resume=True)
    for step in range(20_100, 21_000):
        run.log(step, {"policy_kl": -2.0})
    run.finish(60)
    # every measurement the exporter writes a step to (the health one holds `nonfinite_count`,
    # which the run's cards read like any other field it logged)
    raw = influx_db.query(
        'SELECT * FROM "policy", "value", "optimization", "health" WHERE "run" = \'r\''
    )
    lines = []
    for row in raw:
        fields = ",".join(
            f"{k}={row[k]!r}"
            for k in ("policy_kl", "value_loss", "clip_fraction", "grad_norm", "nonfinite_count")
            if row.get(k) is not None
        )
        lines.append(f"{row['_measurement']},run=legacy {fields},step={row['time']}i {row['time']}")
    for i in range(0, len(lines), 5000):
        influx_db.write("\n".join(lines[i : i + 5000]))
    yield InfluxHistory(InfluxHttp(influx_db.url, influx_db.name), reg)


def _raw(influx_db: InfluxDatabase, field: str, measurement: str) -> tuple[np.ndarray, np.ndarray]:
    rows = influx_db.query(f'SELECT "{field}" FROM "{measurement}" WHERE "run" = \'r\'')
    kept = [(r["time"], r[field]) for r in rows if r[field] is not None]
    return np.array([s for s, _ in kept]), np.array([v for _, v in kept], dtype=np.float64)


def _brute_force(
    influx_db: InfluxDatabase,
    field: str,
    measurement: str,
    start: int | None,
    end: int | None,
    points: int,
) -> Points:
    steps, values = _raw(influx_db, field, measurement)
    lo, hi = start or 0, 2**62 if end is None else end
    mask = (steps >= lo) & (steps <= hi)
    steps, values = steps[mask], values[mask]
    if not steps.size:
        return Points(np.zeros(0, np.int64), np.zeros(0), 1, 0)
    if steps.max() - steps.min() + 1 <= points:  # as few steps as points: every point
        return Points(steps, values, 1, int(steps.size))
    plan = bucket_plan(
        int(steps.min()) if start is None else start,
        int(steps.max()) if end is None else end,
        points,
    )
    keys = (steps - plan.origin) // plan.size
    out_steps, out_values = [], []
    for k in np.unique(keys):
        m = keys == k
        out_steps.append(int(steps[m].max()))
        out_values.append(float(values[m].mean()))
    return Points(np.array(out_steps), np.array(out_values), plan.size, int(steps.size))


CASES = [
    (None, None, 1000),  # 64-step blocks
    (None, None, 7),  # 4096-step blocks
    (12_345, 37_654, 300),  # partial blocks at both edges
    (20_000, 21_100, 10),  # the re-logged steps
    (64, 200, 2),  # inside blocks, raw edges
    (100, 163, 1),  # inside two partial blocks only
    (30_000, 200_000, 50),  # past the end of the data
]


@pytest.mark.parametrize(("start", "end", "points"), CASES)
def test_series_from_rollups_equals_brute_force_bucketing_of_raw_points(
    history: InfluxHistory,
    influx_db: InfluxDatabase,
    start: int | None,
    end: int | None,
    points: int,
) -> None:
    expected = _brute_force(influx_db, "policy_kl", "policy", start, end, points)
    for run in ("r", "legacy"):
        got = history.series(run, "policy_kl", start, end, points)
        assert 0 < len(got) <= points
        assert got.bucket == expected.bucket and got.total == expected.total, run
        assert got.steps.tolist() == expected.steps.tolist(), run
        np.testing.assert_allclose(got.values, expected.values, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("start", "end", "points"), [(None, None, 1000), (None, None, 5)])
@pytest.mark.parametrize(
    ("field", "measurement"), [("value_loss", "value"), ("grad_norm", "optimization")]
)
def test_series_too_sparse_for_a_level_is_read_from_raw_points_with_the_same_answers(
    history: InfluxHistory,
    influx_db: InfluxDatabase,
    field: str,
    measurement: str,
    start: int | None,
    end: int | None,
    points: int,
) -> None:
    steps, _ = _raw(influx_db, field, measurement)
    span = RollupSpan(int(steps.size), int(steps.min()), int(steps.max()))
    assert not span.dense_enough(64) and span.dense_enough(4096) == (field == "value_loss")
    marker = read_marker(history.http.query([marker_statement("\"run\" = 'r'")])[0])
    assert not marker.keeps(64, field) and marker.keeps(4096, field) == (field == "value_loss")
    expected = _brute_force(influx_db, field, measurement, start, end, points)
    for run in ("r", "legacy"):
        got = history.series(run, field, start, end, points)
        assert got.bucket == expected.bucket and got.total == expected.total
        assert got.steps.tolist() == expected.steps.tolist()
        np.testing.assert_allclose(got.values, expected.values, rtol=1e-9, atol=1e-12)


SERIES_MANY_FIELDS = [
    ("policy_kl", "policy"),
    ("clip_fraction", "policy"),  # same measurement, logged less often
    ("value_loss", "value"),
    ("grad_norm", "optimization"),
]


@pytest.mark.parametrize(
    ("start", "end", "points"),
    [
        (None, None, 1000),
        (12_345, 37_654, 300),
        (20_000, 21_100, 10),  # short (read point by point), the re-logged steps
        (100, 199, 100),  # no more steps than points: every point
        (100, 200, 100),  # one step more: buckets
        (0, 4095, 32),  # the longest range read point by point, as the cards' sketches are
        (0, 4096, 32),  # one step longer: read as `series` reads any range
        (39_990, 45_000, 8),  # the data ends inside the range
    ],
)
def test_series_of_several_fields_at_once_equal_brute_force_bucketing_of_each(
    history: InfluxHistory,
    influx_db: InfluxDatabase,
    start: int | None,
    end: int | None,
    points: int,
) -> None:
    names = [f for f, _ in SERIES_MANY_FIELDS]
    for run in ("r", "legacy"):
        got = history.series_many(run, [*names, "policy_entropy"], start, end, points)
        assert len(got["policy_entropy"]) == 0  # never logged
        for field, measurement in SERIES_MANY_FIELDS:
            expected = _brute_force(influx_db, field, measurement, start, end, points)
            assert (got[field].bucket, got[field].total) == (expected.bucket, expected.total)
            assert got[field].steps.tolist() == expected.steps.tolist(), (run, field)
            np.testing.assert_allclose(got[field].values, expected.values, rtol=1e-9)


def _import_dense(
    influx_db: InfluxDatabase, reg: registry.Registry, tmp_path: Path, run_name: str
) -> None:
    """`policy_kl` at every step 0..9999, imported with its rollups."""
    settings = influx_db.settings(tmp_path)
    run = DirectRun(run_name, project=None, registry=reg, settings=settings, framework=None)
    for step in range(10_000):
        run.log(step, {"policy_kl": _value(step)})
    run.finish(60)


def test_a_level_the_marker_says_is_not_kept_is_not_read(
    influx_db: InfluxDatabase, reg: registry.Registry, tmp_path: Path
) -> None:
    # dense enough for 64-step blocks by the readers' rule, but the exporter stopped keeping
    # them at step 5000 (as when one rank found the field sparse): reading them would lose the
    # steps after that
    _import_dense(influx_db, reg, tmp_path, "m")
    influx_db.post_query(
        f'DELETE FROM "{rollup_measurement(64)}" WHERE "run" = \'m\' AND time >= 5000s'
    )
    influx_db.write(f"{ROLLUP_MARKER},run=m {unkept_key(64, 'policy_kl')}=5000i 0")
    history = InfluxHistory(InfluxHttp(influx_db.url, influx_db.name), reg)
    got = history.series("m", "policy_kl", None, None, 100)
    assert got.total == 10_000 and got.bucket == 128  # laid on 64-step blocks
    values = np.array([_value(s) for s in range(10_000)])
    keys = np.arange(10_000) // 128
    means = [values[keys == k].mean() for k in np.unique(keys)]
    np.testing.assert_allclose(got.values, means, rtol=1e-9)


def test_whole_run_stats_from_rollups_match_the_raw_points(
    history: InfluxHistory, influx_db: InfluxDatabase
) -> None:
    assert influx_db.query(f'SELECT * FROM "{ROLLUP_MARKER}" WHERE "run" = \'r\'')
    assert not influx_db.query(f'SELECT * FROM "{ROLLUP_MARKER}" WHERE "run" = \'legacy\'')
    for field, measurement in (
        ("policy_kl", "policy"),
        ("value_loss", "value"),
        ("grad_norm", "optimization"),  # no 4096-step blocks kept: from the raw points
    ):
        _, values = _raw(influx_db, field, measurement)
        for run in ("r", "legacy"):
            stats = history.stats(run, [field, "raw_reward"])
            assert stats[field].count == values.size
            assert stats[field].mean == pytest.approx(values.mean(), rel=1e-9)
            assert (stats["raw_reward"].count, stats["raw_reward"].mean) == (0, None)


def _assert_close(a: Any, b: Any, where: object) -> None:
    """Equal, floats to 1e-9 (sums added in another order differ in the last bits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_close(a[k], b[k], (where, k))
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for x, y in zip(a, b, strict=True):
            _assert_close(x, y, where)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), where
    else:
        assert a == b, where


def test_cards_read_from_rollups_equal_cards_read_from_raw_points(
    history: InfluxHistory, reg: registry.Registry, tmp_path: Path
) -> None:
    client = create_app(DatasourceConfig(store=tmp_path), reg, history=history).test_client()

    def cards(run: str) -> Any:
        response = client.get(f"/api/cards?run={run}")
        assert response.status_code == 200
        return response.get_json()["cards"]

    rolled, legacy = cards("r"), cards("legacy")
    assert rolled
    for a, b in zip(rolled, legacy, strict=True):
        _assert_close(a, b, a.get("metric"))


def test_card_windows_hold_each_fields_newest_values_whatever_its_cadence(
    history: InfluxHistory, influx_db: InfluxDatabase
) -> None:
    for last_n in (50, 3000):
        got = history.windows("r", ["policy_kl", "clip_fraction", "value_loss"], last_n)
        for field, measurement in (
            ("policy_kl", "policy"),
            ("clip_fraction", "policy"),
            ("value_loss", "value"),
        ):
            steps, values = _raw(influx_db, field, measurement)
            assert got[field].steps.tolist() == steps[-last_n:].tolist()
            np.testing.assert_allclose(got[field].values, values[-last_n:], rtol=1e-12)


def test_statements_spread_over_requests_answer_as_one_request_does(
    history: InfluxHistory,
) -> None:
    statements = [
        f'SELECT count("policy_kl") FROM "policy" WHERE "run" = \'r\' AND time < {n}s'
        for n in (10, 100, 1000, 5000, 20_000, 30_000, 39_000)
    ]
    one = history.http.query(statements)
    assert [first_number(r, "count") for r in one] == [10, 100, 1000, 5000, 20_000, 30_000, 39_000]
    for ways in (1, 2, 3, 7, 20):
        assert history.http.query_spread(statements, ways) == one


def test_card_windows_are_whole_when_the_rollups_bound_them_too_tightly(
    influx_db: InfluxDatabase, reg: registry.Registry, tmp_path: Path
) -> None:
    # the rollups bound the newest-rows statements; counts that ran ahead of the points (here
    # made up) would cut the window short, so a short answer is asked again without the bound
    _import_dense(influx_db, reg, tmp_path, "w")
    history = InfluxHistory(InfluxHttp(influx_db.url, influx_db.name), reg)

    def bounds() -> dict[str, int]:
        asked = history.http.query(window_bounds_statements("\"run\" = 'w'", ["policy_kl"]))
        return read_window_bounds(asked, {'"policy"': ["policy_kl"]}, 2000)

    assert bounds() == {'"policy"': 4096}
    influx_db.write(f"{rollup_measurement(4096)},run=w n:policy_kl=100000i 8192")
    assert bounds() == {'"policy"': 8192}
    got = history.windows("w", ["policy_kl"], 2000)["policy_kl"]
    assert got.steps.tolist() == list(range(8000, 10_000))
    np.testing.assert_allclose(got.values, [_value(s) for s in range(8000, 10_000)])


@dataclass(frozen=True)
class _CountingHttp(InfluxHttp):
    """InfluxHttp keeping every statement it sends."""

    sent: list[str] = dataclasses.field(default_factory=list, compare=False)

    def query(self, statements: Sequence[str]) -> list[list[ResultSeries]]:
        self.sent.extend(statements)
        return super().query(statements)


def test_a_field_no_run_logged_is_not_asked_for_its_window(
    history: InfluxHistory, reg: registry.Registry
) -> None:
    # every statement costs InfluxDB about a megabyte of garbage, whatever it finds
    http = _CountingHttp(history.http.url, history.http.database)
    counting = InfluxHistory(http, reg)
    got = counting.windows("r", ["policy_kl", "policy_entropy"], 100)
    assert len(got["policy_entropy"]) == 0 and len(got["policy_kl"]) == 100
    assert not [s for s in http.sent if '"policy_entropy"' in s]
