"""A followed log that was already quiet when first read (`serve FOLDER` on an old training log)
is ended once what was read of it is stored, never before: while its catch-up is still being
written (a slow store, a loaded machine), the end waits for the next look instead of finishing
the run and dropping what the worker had not stored yet."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import registry
from exporter import ExporterSettings, Lifecycle
from exporter.ingest import feed
from exporter.ingest.feed import Ingest
from exporter.sources import Record
from exporter.sources.discover import LogFile
from exporter.store import outbox
from exporter.store.outbox import Outbox

LIFE = Lifecycle(stall_after_s=5, ended_after_s=60)
STEPS = 5000


def test_an_old_log_is_ended_only_once_its_catch_up_is_stored(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = Outbox.write

    def slow(self: Outbox, *args: object, **kwargs: object) -> bool:
        time.sleep(0.3)  # each batch's transaction, on a loaded machine
        return write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(outbox.Outbox, "write", slow)
    monkeypatch.setattr(feed, "_STUCK_AFTER", 0.1)
    (tmp_path / "old").mkdir()
    log = LogFile(tmp_path / "old" / "progress.jsonl", "jsonl")
    log.path.write_text("{}\n", encoding="utf-8")
    hour_ago = time.time() - 3600
    os.utime(log.path, (hour_ago, hour_ago))
    settings = ExporterSettings(store=tmp_path / "store", prometheus_port=None, policy="warn")
    ingest = Ingest(registry=reg, settings=settings, framework="sb3", follow=True)
    try:
        ingest.feed(log, [Record(s, {"policy_kl": 0.01}) for s in range(STEPS)])
        ingest.settle()
        # the follower looks after every pass; each look may give the run 0.5 s to finish
        deadline = time.monotonic() + 60
        ended: list[str] = []
        while not ended and time.monotonic() < deadline:
            ended = ingest.finish_idle(LIFE, time.time(), timeout=0.5)
            time.sleep(0.2)
        assert ended == ["old"]
        with Outbox(settings.outbox_path) as box:
            record = box.run("old")
            assert record is not None and record.state == "ended"
            assert box.last_step("old") == STEPS - 1
            assert [s.count for s in box.stats("old", "policy_kl")] == [STEPS]
    finally:
        ingest.finish(30)
