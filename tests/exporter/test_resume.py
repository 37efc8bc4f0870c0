"""A resumed run (steps replayed from a checkpoint) ends with one point per step and a resume event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import exporter
import registry


def test_resume_overwrites_replayed_steps_and_records_a_resume_event(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path)
    with exporter.init("resumed", registry=reg, settings=settings) as run:
        for step in range(0, 100):
            run.log(step, {"losses/clipfrac": 0.1})
    # a new process resumes from the checkpoint at step 60 and replays 60..149
    with exporter.init("resumed", registry=reg, settings=settings) as run:
        for step in range(60, 150):
            run.log(step, {"losses/clipfrac": 0.2})
    rows = influx.query('SELECT "clip_fraction", "step" FROM "policy"')
    assert [r["step"] for r in rows] == list(range(150))
    assert all(r["clip_fraction"] == (0.2 if r["step"] >= 60 else 0.1) for r in rows)
    (resume,) = influx.query('SELECT * FROM "events" WHERE "kind" = \'resume\'')
    assert resume["time"] == 60 and resume["from_step"] == 99
    with exporter.Outbox(settings.outbox_path) as box:
        steps, _ = box.series("resumed", "clip_fraction")
        assert steps.tolist() == list(range(150))
        assert [e.step for e in box.events("resumed", kind="resume")] == [60]


def test_step_going_back_inside_one_process_is_a_resume_too(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path, policy="strict")
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in [*range(10), *range(5, 12)]:
            run.log(step, {"losses/clipfrac": 0.1})
            run.log(step, {"losses/value_loss": 1.0})  # a second call at the same step is no resume
    with exporter.Outbox(settings.outbox_path) as box:
        assert [(e.step, e.fields["from_step"]) for e in box.events("r", kind="resume")] == [(5, 9)]
        assert box.series("r", "clip_fraction")[0].tolist() == list(range(12))
