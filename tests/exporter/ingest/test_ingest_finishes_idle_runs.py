"""The sidecar records a followed run `ended` when its logs were already quiet when first read
(history: it never pages), when they stayed quiet for `Lifecycle.ended_after_s` after growing, or
when they are gone; its gauges leave /metrics and the store holds the end with its reason. A run
whose logs grew while followed and then went quiet for less, with no process seen writing them,
is quiet (never stalled: the follower is not the trainer; tests/exporter/ingest/
test_followed_end.py has the writer's cases). Quiet is measured by when the files grew, never by
the wall times written in them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import registry
from exporter import ExporterSettings, Lifecycle, MetricsEndpoint, RunStatus
from exporter.ingest import feed
from exporter.ingest.feed import DETECT_SAMPLE, Ingest
from exporter.sources import Record
from exporter.sources.discover import LogFile
from exporter.store.outbox import Outbox

LIFE = Lifecycle(stall_after_s=5, ended_after_s=60)


def _records(start: int, wall: float | None) -> list[Record]:
    return [
        Record(s, {"policy_kl": 0.01}, wall_time=None if wall is None else wall + s)
        for s in range(start, start + 10)
    ]


def _status(settings: ExporterSettings, run: str) -> RunStatus:
    with Outbox(settings.outbox_path) as box:
        record = box.run(run)
    assert record is not None
    return LIFE.status(record.recorded).status


def test_history_quiet_when_first_read_is_ended_at_once_whatever_its_timestamps_say(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    endpoint = MetricsEndpoint(port=0)
    ingest = Ingest(
        registry=reg, settings=settings, framework="sb3", endpoint=endpoint, follow=True
    )
    now = time.time()
    logs = {}
    # written 15 min ago: with no times in it, with times an hour in the future (a skewed
    # host), and one written just now whose times say two days ago
    for name, mtime, wall in (
        ("untimed", now - 900, None),
        ("ahead", now - 900, now + 3600),
        ("fresh", now, now - 172_800),
    ):
        (tmp_path / name).mkdir()
        log = LogFile(tmp_path / name / "m.jsonl", "jsonl")
        log.path.write_text("{}\n", encoding="utf-8")
        os.utime(log.path, (mtime, mtime))
        logs[name] = log
        ingest.feed(log, _records(0, wall))
    ingest.settle()
    assert ingest.flush(30)
    assert sorted(ingest.finish_idle(LIFE, time.time())) == ["ahead", "untimed"]
    text = endpoint.render().decode()
    assert 'run="untimed"' not in text and 'rlvitals_step{run="fresh"}' in text
    assert _status(settings, "untimed") is RunStatus.ENDED
    assert _status(settings, "ahead") is RunStatus.ENDED
    assert _status(settings, "fresh") is RunStatus.LIVE

    # the log grows again: the run is followed again, live, under its own name
    ingest.feed(logs["untimed"], _records(10, None))
    ingest.settle()
    assert ingest.flush(30)
    assert b'rlvitals_step{run="untimed"}' in endpoint.render()
    assert _status(settings, "untimed") is RunStatus.LIVE
    ingest.finish(30)
    assert {r.run for r in Outbox(settings.outbox_path).runs()} == {"untimed", "ahead", "fresh"}


def test_history_read_early_in_a_long_pass_is_ended_when_the_reader_moves_on(
    tmp_path: Path, reg: registry.Registry
) -> None:
    # A first pass over many old runs may read for longer than the stall window: a history
    # run started early in it (a detection sample's worth of lines) was served with this
    # reader's lease until the pass ended, and read stalled (paged) meanwhile.
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    endpoint = MetricsEndpoint(port=0)
    ingest = Ingest(
        registry=reg, settings=settings, framework="sb3", endpoint=endpoint, follow=True
    )
    logs = {}
    for name, mtime in (("old", time.time() - 900), ("next", time.time())):
        (tmp_path / name).mkdir()
        logs[name] = LogFile(tmp_path / name / "m.jsonl", "jsonl")
        logs[name].path.write_text("{}\n", encoding="utf-8")
        os.utime(logs[name].path, (mtime, mtime))
    lines = [Record(s, {"policy_kl": 0.01}) for s in range(DETECT_SAMPLE + 10)]
    ingest.feed(logs["old"], lines)
    assert b'rlvitals_run_finished{run="old"} 0.0' in endpoint.render()  # started, served
    ingest.feed(logs["old"], [])  # another of its files, with nothing new: still its turn
    assert [r.name for r in ingest.runs] == ["old"]
    ingest.feed(logs["next"], _records(0, None))  # the reader moved on: "old" is judged now
    assert [r.name for r in ingest.runs] == []
    assert b'run="old"' not in endpoint.render()
    assert _status(settings, "old") is RunStatus.ENDED
    ingest.settle()
    assert ingest.finish_idle(LIFE, time.time()) == []  # "next" is recent
    ingest.finish(30)


def test_a_run_seen_growing_then_quiet_with_no_writer_seen_is_quiet_until_ended_after(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    ingest = Ingest(registry=reg, settings=settings, framework="sb3", follow=True)
    (tmp_path / "r").mkdir()
    log = LogFile(tmp_path / "r" / "m.jsonl", "jsonl")
    log.path.write_text("{}\n", encoding="utf-8")
    ingest.feed(log, _records(0, None))
    ingest.feed(log, _records(10, None))  # a second read: the log grew while followed
    ingest.settle()
    assert ingest.flush(30)
    later = time.time() + 30  # quiet past stall_after_s, short of ended_after_s
    assert ingest.finish_idle(LIFE, later) == []
    with Outbox(settings.outbox_path) as box:
        record = box.run("r")
    assert record is not None
    status = LIFE.status(record.recorded, later)
    assert status.status is RunStatus.QUIET, status
    assert "no process on this host holds them open" in status.reason, status
    assert ingest.finish_idle(LIFE, time.time() + 61) == ["r"]
    assert _status(settings, "r") is RunStatus.ENDED
    ingest.finish(30)


def test_a_followed_run_whose_logs_are_gone_is_finished_at_once(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    ingest = Ingest(registry=reg, settings=settings, framework="sb3", follow=True)
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


class _Gathering:
    """A run whose worker lets its small batch gather until woken (for the commit interval)."""

    name = "r"

    def __init__(self) -> None:
        self.queue_depth = 5
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1
        self.queue_depth = 0


def test_a_reader_waiting_on_a_run_has_its_worker_write_at_once() -> None:
    # finishing a run the reader moved on from waits for its queue to empty: the worker is told
    # to write now (a folder of many small runs waited a commit interval for each otherwise)
    run = _Gathering()
    assert feed._wait_for_room(run, 0)  # type: ignore[arg-type]
    assert run.woken == 1
