"""Without `framework=`, a name that means different things in different frameworks (SB3's
`train/entropy_loss`, negated, vs OpenRLHF's) is stored under its metric as soon as the names
logged tell the framework, the framework's bookkeeping keys included (docs/registry.md):
the Python API and an import of the same log store the same, and a name logged many times
before the telling one does not end the detection."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import exporter
import registry
from grafana.datasource.history.embedded import EmbeddedHistory
from rlvitals.cli import main

# SB3's JSON logger after a train() without a dump before it: train/ keys with train/n_updates
# (ppo/ppo.py records both), then the usual dump with time/fps.
RECORDS = [
    {"train/entropy_loss": -0.69, "train/n_updates": 10},
    {"train/entropy_loss": -0.68, "train/n_updates": 20, "time/fps": 900, "time/iterations": 2},
    {"train/entropy_loss": -0.66, "train/n_updates": 30, "time/fps": 910, "time/iterations": 3},
]
STEPS = [64, 128, 192]


def _stored(store: Path, run: str) -> tuple[dict[str, str], list[int], list[float]]:
    history = EmbeddedHistory(store / "outbox.sqlite")
    fields = dict(history.logged_fields(run))
    points = history.series(run, "policy_entropy", None, None, 100)
    return fields, points.steps.tolist(), points.values.tolist()


def test_the_python_api_and_an_import_store_sb3s_entropy_alike_from_the_first_step(
    tmp_path: Path, builtin: registry.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    api_store = tmp_path / "api"
    settings = exporter.ExporterSettings(store=api_store)
    with (
        caplog.at_level(logging.WARNING, logger="exporter"),
        exporter.init("sb3-run", registry=builtin, settings=settings) as run,
    ):
        for step, values in zip(STEPS, RECORDS, strict=True):
            run.log(step, values)
        assert run.flush()
    assert "train/entropy_loss" not in caplog.text and "train/n_updates" not in caplog.text

    logs = tmp_path / "logs" / "sb3-run"
    logs.mkdir(parents=True)
    lines = [json.dumps({"step": s, **v}) for s, v in zip(STEPS, RECORDS, strict=True)]
    (logs / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    import_store = tmp_path / "import"
    assert main(["import", str(logs.parent), "--store", str(import_store)]) == 0

    entropy = [-v["train/entropy_loss"] for v in RECORDS]  # SB3 logs -H
    for store in (api_store, import_store):
        fields, steps, values = _stored(store, "sb3-run")
        assert fields["policy_entropy"] == "policy"
        assert "train/entropy_loss" not in fields
        assert steps == STEPS and values == pytest.approx(entropy)
        assert fields["train/n_updates"] == "unregistered"  # bookkeeping: kept as logged
