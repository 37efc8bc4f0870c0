"""The sidecar ends a followed run once its logs have been quiet for `Lifecycle.ended_after_s`
(or are gone):
the run is recorded finished and its gauges leave /metrics, so "Training stalled" stops for it;
new lines start it again."""

from __future__ import annotations

import time
from pathlib import Path

import registry
from exporter import ExporterSettings, Lifecycle, MetricsEndpoint
from exporter.ingest.feed import Ingest
from exporter.sources import Record
from exporter.sources.discover import LogFile
from exporter.store.outbox import Outbox

LIFE = Lifecycle(stall_after_s=5, ended_after_s=60)


def _records(start: int, wall: float) -> list[Record]:
    return [Record(s, {"policy_kl": 0.01}, wall_time=wall + s) for s in range(start, start + 10)]


def test_a_followed_run_quiet_past_ended_after_is_finished_and_leaves_metrics(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    endpoint = MetricsEndpoint(port=0)
    ingest = Ingest(registry=reg, settings=settings, framework="sb3", endpoint=endpoint)
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = LogFile(tmp_path / "old" / "m.jsonl", "jsonl")
    new = LogFile(tmp_path / "new" / "m.jsonl", "jsonl")
    for log in (old, new):
        log.path.write_text("{}\n", encoding="utf-8")  # the logs are still there
    now = time.time()
    ingest.feed(old, _records(0, now - 3600))
    ingest.feed(new, _records(0, now - 20))
    ingest.settle()
    assert ingest.flush(30)
    assert b'rlvitals_step{run="old"}' in endpoint.render()

    assert ingest.finish_idle(LIFE, now) == ["old"]
    text = endpoint.render().decode()
    assert 'run="old"' not in text and 'rlvitals_step{run="new"}' in text
    outbox = Outbox(settings.outbox_path)
    try:
        records = {r.run: r for r in outbox.runs()}
        assert records["old"].finished is not None and records["new"].finished is None
    finally:
        outbox.close()

    # the log grows again: the run is followed again, live
    ingest.feed(old, _records(10, time.time()))
    ingest.settle()
    assert ingest.flush(30)
    assert b'rlvitals_step{run="old"}' in endpoint.render()
    ingest.finish(30)


def test_a_followed_run_whose_logs_are_gone_is_finished_at_once(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    ingest = Ingest(registry=reg, settings=settings, framework="sb3")
    (tmp_path / "r").mkdir()
    path = tmp_path / "r" / "m.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    ingest.feed(LogFile(path, "jsonl"), _records(0, time.time()))
    ingest.settle()
    assert ingest.finish_idle(LIFE, time.time()) == []  # recent, and its file is there
    path.unlink()
    assert ingest.finish_idle(LIFE, time.time()) == ["r"]
    ingest.finish(30)


def test_metrics_say_finished_and_when_the_run_last_logged(
    tmp_path: Path, reg: registry.Registry
) -> None:
    import exporter

    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    endpoint = MetricsEndpoint(port=0)
    run = exporter.init("r", registry=reg, settings=settings)
    endpoint.add(run)
    run.log(1, {"policy_kl": 0.01}, wall_time=1_700_000_000.0)
    assert run.flush(30)
    text = endpoint.render().decode()
    assert 'rlvitals_last_activity_timestamp_seconds{run="r"} 1.7e+09' in text
    assert 'rlvitals_run_finished{run="r"} 0.0' in text
    run.finish(30)
    assert 'rlvitals_run_finished{run="r"} 1.0' in endpoint.render().decode()


def test_steps_per_second_decays_once_a_run_stops_logging(
    tmp_path: Path, reg: registry.Registry
) -> None:
    import exporter

    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    run = exporter.init("r", registry=reg, settings=settings)
    now = time.time()
    # 100 steps at 10 steps/s, the last one 100 s ago (an old log, or a job that stopped)
    for step in range(100):
        run.log(step, {"policy_kl": 0.01}, wall_time=now - 110 + step / 10)
    assert run.flush(30)
    rate = run.live().steps_per_second
    assert rate is not None and rate < 1.0  # not the 10 steps/s it once ran at
    run.finish(30)
