"""A run's last step on its page (`/api/runs`, the stage memo) is its registry metrics' last step,
however many names the registry does not know it logs beside them, and a store without the
running statistics (a file the exporter has not opened since they came in) reads the same."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import exporter
import registry
from grafana.datasource.history import EmbeddedHistory

KNOWN_TO = 300  # the registry's metrics are logged to this step
UNKNOWN_TO = 450  # names the registry does not know go on to this one


def _logged(store: Path, reg: registry.Registry) -> Path:
    settings = exporter.ExporterSettings(store=store, policy="warn")
    with exporter.init("verl-like", registry=reg, settings=settings) as run:
        for step in range(1, UNKNOWN_TO + 1):
            values = {f"timing_per_worker/w{i}": step * 0.01 + i for i in range(40)}
            if step <= KNOWN_TO:
                values |= {"policy_entropy": 1.0 - step / 1000, "policy_kl": 0.01}
            run.log(step, values, wall_time=1_700_000_000.0 + step)
        assert run.flush(60)
    return store / "outbox.sqlite"


def _without_statistics(path: Path, into: Path) -> Path:
    copy = into / "outbox.sqlite"
    shutil.copy(path, copy)
    with sqlite3.connect(copy) as db:
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('sample_stats', 'sample_rollups', 'rollup_series')"
        ).fetchall():
            db.execute(f"DROP TABLE {name}")
    return copy


def test_the_last_step_is_the_registry_metrics_one_beside_many_unknown_names(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    path = _logged(tmp_path / "store", builtin)
    latest = EmbeddedHistory(path).latest("verl-like")
    assert latest.step == KNOWN_TO
    assert latest.wall_time == 1_700_000_000.0 + KNOWN_TO


def test_a_store_without_running_statistics_reads_the_same_last_step(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    path = _logged(tmp_path / "store", builtin)
    (tmp_path / "old").mkdir()
    old = _without_statistics(path, tmp_path / "old")
    assert EmbeddedHistory(old).latest("verl-like") == EmbeddedHistory(path).latest("verl-like")
