"""Runs several ranks of a job logged, as the datasource shows them (issue 39): a metric only
rank 0 logs is read as logged, a metric every rank logs is read from rank 0 (the run page's
line, the cards' windows, the whole-run statistics) with the lowest and highest value of any
rank beside it in `/api/series`, one rank's own series with `rank=K` and an unknown rank
refused by name; the same from the embedded store and from InfluxDB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from influx_server import InfluxDatabase

import exporter
import registry
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig
from grafana.datasource.history import EmbeddedHistory, HistoryStore, InfluxHistory, InfluxHttp

STEPS = 50
RANKS = 3


def _fps(rank: int, step: int) -> float:
    """Each rank's own throughput: rank 1 the straggler."""
    return 100.0 * step + (10.0 if rank == 1 else 50.0 + rank)


def _log(settings: exporter.ExporterSettings, reg: registry.Registry) -> None:
    """Three ranks of one job (one process here: ranks given by hand share their parent)."""
    runs = [exporter.init("dist", registry=reg, settings=settings, rank=r) for r in range(RANKS)]
    assert {r.name for r in runs} == {"dist"}
    for step in range(STEPS):
        for rank, run in enumerate(runs):
            values = {"time/fps": _fps(rank, step)}
            if rank == 0:
                values["charts/episodic_return"] = step / 10
            run.log(step, values)
    for run in runs:
        run.finish()


@pytest.fixture(params=["embedded", "influxdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path, reg: registry.Registry) -> Iterator[Any]:
    if request.param == "embedded":
        _log(exporter.ExporterSettings(store=tmp_path), reg)
        yield EmbeddedHistory(tmp_path / "outbox.sqlite")
        return
    influx: InfluxDatabase = request.getfixturevalue("influx")
    _log(influx.settings(tmp_path, policy="warn"), reg)
    yield InfluxHistory(InfluxHttp(influx.url, influx.name), reg)


def _series(client: Any, metric: str, extra: str = "") -> Any:
    response = client.get(f"/api/series?run=dist&metric={metric}{extra}")
    return response.status_code, response.get_json()


def test_every_rank_metric_reads_rank_0_with_every_ranks_spread_and_one_rank_on_request(
    store: HistoryStore, reg: registry.Registry, tmp_path: Path
) -> None:
    client = create_app(DatasourceConfig(store=tmp_path), reg, history=store).test_client()
    status, body = _series(client, "samples_per_second")
    assert status == 200, body
    assert (body["ranks"], body["rank"]) == ([0, 1, 2], 0)
    rows = body["rows"]
    assert [r["step"] for r in rows] == list(range(STEPS))
    assert [r["raw"] for r in rows] == [_fps(0, s) for s in range(STEPS)]
    assert [r["rank_low"] for r in rows] == [_fps(1, s) for s in range(STEPS)]
    assert [r["rank_high"] for r in rows] == [_fps(2, s) for s in range(STEPS)]

    status, body = _series(client, "samples_per_second", "&rank=2")
    assert status == 200
    assert [r["raw"] for r in body["rows"]] == [_fps(2, s) for s in range(STEPS)]
    status, body = _series(client, "samples_per_second", "&rank=7")
    assert status == 400 and "rank 7" in body["error"] and "0, 1, 2" in body["error"]

    stats = store.stats("dist", ["samples_per_second"])["samples_per_second"]
    assert stats.count == STEPS
    assert stats.mean == pytest.approx(sum(_fps(0, s) for s in range(STEPS)) / STEPS)
    window = store.window("dist", "samples_per_second", 5)
    assert window.values.tolist() == [_fps(0, s) for s in range(STEPS - 5, STEPS)]


def test_a_metric_only_rank_0_logs_is_read_as_logged(
    store: HistoryStore, reg: registry.Registry, tmp_path: Path
) -> None:
    client = create_app(DatasourceConfig(store=tmp_path), reg, history=store).test_client()
    status, body = _series(client, "raw_reward")
    assert status == 200, body
    assert (body["ranks"], body["rank"]) == ([0], None)
    assert [r["raw"] for r in body["rows"]] == [s / 10 for s in range(STEPS)]
    assert all("rank_low" not in r for r in body["rows"])
