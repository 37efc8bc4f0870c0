"""`/api/cards` says how many of a run's names the registry recognised: a run logging only its
own tag names gets cards that can only read no data, and the answer says why, with the `--map`
each of its names suggests; logged with the mapping, the same run is diagnosed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import exporter
import registry
from exporter.config import ExporterSettings
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig

TAGS = {"perf/return_mean10": "episodic_return", "policy/entropy_mean": "policy_entropy"}


def _cards(tmp: Path, reg: registry.Registry) -> dict[str, Any]:
    run = exporter.init("own", settings=ExporterSettings(store=tmp), registry=reg)
    for i, step in enumerate(range(512, 512 * 41, 512)):
        run.log(step, {"perf/return_mean10": 20.0 + 5 * i, "policy/entropy_mean": 0.69 - 0.005 * i})
    run.finish()
    answer = create_app(DatasourceConfig(store=tmp), reg).test_client().get("/api/cards?run=own")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.get_json()
    return body


def test_a_run_of_unknown_tags_is_told_so_with_the_mappings_to_pass(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    body = _cards(tmp_path, builtin)
    names = body["names"]
    assert names["recognised"] == 0 and names["total"] == 2
    offered = {s["name"]: s["metric"] for s in names["suggestions"]}
    assert offered["perf/return_mean10"] == "episodic_return"
    assert all(c["status"] == "no_data" for c in body["cards"])


def test_with_the_mapping_the_same_run_is_diagnosed(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    mapped = builtin.with_map(registry.parse_map([f"{k}={v}" for k, v in TAGS.items()], builtin))
    body = _cards(tmp_path, mapped)
    assert body["names"]["recognised"] == 2
    statuses = {c["metric"]: c["status"] for c in body["cards"]}
    assert statuses["episodic_return"] != "no_data" and statuses["policy_entropy"] != "no_data"
    assert np.isfinite(next(c["value"] for c in body["cards"] if c["metric"] == "policy_entropy"))
