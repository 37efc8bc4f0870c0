"""A rank that starts while another process keeps the store locked still takes its place in
the job's run: `init` may only read the name then (it must not hold up training), so the
worker records the claim, lease and rank included, once the store frees up. Without that, a
rank killed later had no lease to be found by and the run ended "finished, all 7 ranks
finished" with the dead rank unnamed (seen in CI's eight-rank test)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import exporter
from exporter.store.outbox import Outbox


def test_a_rank_started_under_a_locked_store_holds_its_lease_once_the_store_frees(
    tmp_path: Path,
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init("dist", settings=settings, rank=0) as first:
        first.log(0, {"grad_norm": 1.0})
        assert first.flush()
        # another process's long write: init's claim waits 2 s, then names the run from a read
        blocker = sqlite3.connect(settings.outbox_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        second = exporter.init("dist", settings=settings, rank=1)
        try:
            assert second.name == "dist"  # the job's run, read while locked
            second.log(0, {"grad_norm": 2.0})
            blocker.execute("COMMIT")  # the store frees only after init gave up waiting
            assert second.flush(30)
            outbox = Outbox(settings.outbox_path)
            try:
                lease = outbox.lease("dist", 1)
                assert lease is not None, "rank 1 never recorded its lease"
                assert lease.holder.pid == second._holder.pid
            finally:
                outbox.close()
        finally:
            second.finish()
            blocker.close()
