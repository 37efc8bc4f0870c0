"""Whole-run statistics on InfluxDB are folded incrementally and stay exact as a run grows,
re-logs its last step, and resumes from a checkpoint (steps replayed with new values)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from influx_server import InfluxDatabase

import exporter
import registry
from grafana.datasource import DatasourceConfig
from grafana.datasource.history import InfluxHistory, open_history

FIELDS = ["policy_kl", "clip_fraction"]


def _exact(influx: InfluxDatabase, field: str) -> tuple[int, float]:
    rows = influx.query(f'SELECT "{field}" FROM "policy" WHERE "run" = \'live\'')
    values = np.array([r[field] for r in rows if r[field] is not None], dtype=float)
    return int(values.size), float(values.mean())


def _check(store: InfluxHistory, influx: InfluxDatabase) -> None:
    got = store.stats("live", FIELDS)
    for field in FIELDS:
        count, mean = _exact(influx, field)
        assert got[field].count == count
        assert got[field].mean == pytest.approx(mean, rel=1e-12)


def test_folded_stats_match_a_full_recount_through_growth_relog_and_resume(
    reg: registry.Registry, influx: InfluxDatabase, tmp_path: Path
) -> None:
    settings = influx.settings(tmp_path)
    config = DatasourceConfig(store=tmp_path, influx_url=influx.url, influx_database=influx.name)
    with exporter.init("live", registry=reg, settings=settings) as run:
        for step in range(300):
            run.log(step, {"policy_kl": 0.01 + step * 1e-4, "clip_fraction": 0.1})
        assert run.flush(30)
        store = open_history(config, reg)
        assert isinstance(store, InfluxHistory)
        _check(store, influx)  # cold: everything scanned once
        for step in range(300, 500):
            run.log(step, {"policy_kl": 0.02, "clip_fraction": 0.2})
        assert run.flush(30)
        _check(store, influx)  # only the new steps are scanned
        run.log(499, {"policy_kl": 0.9, "clip_fraction": 0.9})  # the last step logged again
        assert run.flush(30)
        _check(store, influx)
        for step in range(100, 200):  # resumed: steps replayed with new values
            run.log(step, {"policy_kl": 0.5, "clip_fraction": 0.5})
        assert run.flush(30)
        _check(store, influx)
