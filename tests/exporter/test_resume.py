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
    with exporter.init("resumed", registry=reg, settings=settings, resume=True) as run:
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


def test_a_new_run_under_a_taken_name_gets_the_next_free_name(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    names = []
    for value in (0.1, 0.2, 0.3):
        with exporter.init("ppo", registry=reg, settings=settings, config={"v": value}) as run:
            run.log(10, {"losses/clipfrac": value})
            names.append(run.name)
    assert names == ["ppo", "ppo-2", "ppo-3"]
    with exporter.Outbox(settings.outbox_path) as box:
        for name, value in zip(names, (0.1, 0.2, 0.3), strict=True):
            assert box.series(name, "clip_fraction")[1].tolist() == [value]
            record = box.run(name)
            assert record is not None and record.config == {"v": value}
            assert box.events(name) == []  # no false resume, no config_change


def test_resume_goes_on_with_the_stored_run_and_keeps_its_name(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("ppo", registry=reg, settings=settings) as run:
        run.log(10, {"losses/clipfrac": 0.1})
    with exporter.init("ppo", registry=reg, settings=settings, resume=True) as run:
        assert run.name == "ppo"
        run.log(20, {"losses/clipfrac": 0.2})
    with exporter.init("fresh", registry=reg, settings=settings, resume=True) as run:
        assert run.name == "fresh"  # nothing to resume: an ordinary new run
    with exporter.Outbox(settings.outbox_path) as box:
        assert box.series("ppo", "clip_fraction")[0].tolist() == [10, 20]
        assert box.events("ppo", kind="resume") == []  # went forward: a continuation
        assert [r.run for r in box.runs()] == ["ppo", "fresh"]
