"""Every value a training logs ends stored, rejected or counted as dropped, with its reason (issue
39, item 1; README "Reliability"): after `finish()` whatever its timeout, at the exit of a process
that never called it, and when the process is stopped by SIGTERM.

What a value is worth is taken from the registry (a metric's physical limits say what is out of
range) and from `Run.log`'s contract (a non-number, a bad name or a bad step is rejected,
NaN/Inf are counted per field, never written): logged = accepted + unregistered + rejected +
non-finite + dropped, and what the store holds is exactly the accepted and unregistered values.
"""

from __future__ import annotations

import json
import math
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exporter
import registry
from exporter.counts import RunStats
from exporter.schema import NOT_METRICS
from exporter.translate.derive import NONFINITE_FIELD

REASONS = {"queue_full", "unfinished", "finished"}
"""Why a value of a healthy store is dropped: the queue was full, the run ended before the worker
stored it, or it was logged after the end."""


def _limited(reg: registry.Registry) -> list[tuple[str, float | None, float | None]]:
    """Canonical ids of measured metrics with a physical limit, and the limits."""
    out = [
        (m.id, m.limits.min, m.limits.max)
        for m in reg.metrics
        if m.kind == "measured" and m.pattern is None and m.derived is None
        if m.limits.min is not None or m.limits.max is not None
    ]
    return out[:8]


def _inside(low: float | None, high: float | None) -> float:
    lo = -1.0 if low is None else low
    hi = lo + 2.0 if high is None else high
    return lo + (hi - lo) / 3


def _outside(low: float | None, high: float | None) -> float:
    return low - 1.0 if low is not None else high + 1.0  # type: ignore[operator]


MALFORMED: list[Any] = ["0.5", None, object(), [], ["a"], {"x": 1}, 10**400, b"1"]


def _values(reg: registry.Registry) -> st.SearchStrategy[dict[Any, Any]]:
    limited = _limited(reg)

    def one(i: int, kind: str) -> tuple[Any, Any]:
        name, low, high = limited[i % len(limited)]
        if kind == "valid":
            return name, _inside(low, high)
        if kind == "several":
            return name, [_inside(low, high)] * (1 + i % 3)
        if kind == "outside":
            return name, _outside(low, high)
        if kind == "nonfinite":
            return name, [math.nan, math.inf, -math.inf][i % 3]
        if kind == "unregistered":
            return f"custom/thing_{i}", float(i)
        if kind == "bad_name":
            return [7, "", "a\nb", "trailing\\"][i % 4], 0.5
        return name, MALFORMED[i % len(MALFORMED)]

    kinds = st.sampled_from(
        ["valid"] * 6
        + ["several", "outside", "outside", "nonfinite", "unregistered"]
        + ["bad_name", "malformed"]
    )
    pairs = st.lists(st.tuples(st.integers(0, 40), kinds), min_size=1, max_size=8)
    # one name per metric: two names for one metric would store one value for two accepted
    return pairs.map(lambda ps: dict(one(i, k) for i, k in ps))


def _identity(stats: RunStats, logged: int) -> None:
    accounted = (
        stats.accepted
        + stats.unregistered
        + stats.rejected
        + stats.nonfinite_total
        + stats.dropped
        + stats.refused_disk
    )
    assert accounted == logged, stats
    assert sum(stats.dropped_by_reason.values()) == stats.dropped
    assert set(stats.dropped_by_reason) <= REASONS, stats.dropped_by_reason


def _stored_values(store: Path, run: str, reg: registry.Registry) -> int:
    """Values the store holds as logged (derived metrics, the per-step non-finite count,
    spread marks and the run config aside)."""
    derived = {m.id for m in reg.metrics if m.derived is not None} | {NONFINITE_FIELD}
    db = sqlite3.connect(store / "outbox.sqlite")
    try:
        rows = db.execute("SELECT measurement, field FROM samples WHERE run = ?", (run,)).fetchall()
    finally:
        db.close()
    not_logged = NOT_METRICS - {"unregistered"}
    return sum(1 for m, f in rows if m not in not_logged and f not in derived)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.data(),
    pace=st.sampled_from([0.0, 0.0, 0.001]),
    queue=st.sampled_from([100_000, 100_000, 40]),
    timeout=st.sampled_from([10.0, 0.0, 0.02]),
    policy=st.sampled_from(["warn", "drop"]),
    burst=st.sampled_from([0, 0, 20_000]),  # the calls logged again up to so many: many batches
)
def test_logged_is_stored_plus_rejected_plus_dropped_after_finish(
    tmp_path_factory: pytest.TempPathFactory,
    builtin: registry.Registry,
    data: st.DataObject,
    pace: float,
    queue: int,
    timeout: float,
    policy: str,
    burst: int,
) -> None:
    calls = data.draw(st.lists(_values(builtin), min_size=1, max_size=300))
    calls = (calls * (burst // len(calls) + 1))[: max(burst, len(calls))]
    bad_steps = data.draw(st.sets(st.integers(0, len(calls) - 1), max_size=3))
    store = tmp_path_factory.mktemp("store")
    settings_ = exporter.ExporterSettings(store=store, queue_size=queue)
    run = exporter.init("r", registry=builtin, settings=settings_, framework="sb3", policy=policy)
    logged = 0
    for i, values in enumerate(calls):
        step: Any = [-1, 2.5, "3", None][i % 4] if i in bad_steps else i
        run.log(step, values)
        logged += len(values)
        if pace and i < 300:
            time.sleep(pace)
    run.finish(timeout)
    # when finish() returns, every value is accounted for, and nothing is stored after it
    stats = run.stats
    _identity(stats, logged)
    stored = _stored_values(store, "r", builtin)
    assert stored == stats.accepted + stats.unregistered
    run.log(len(calls), {"value_loss": 0.5})  # after the end: dropped, `finished`
    _identity(run.stats, logged + 1)
    time.sleep(0.2)
    assert _stored_values(store, "r", builtin) == stored


def test_a_heavy_mix_the_store_cannot_finish_in_time_is_counted_not_lost(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    # The case: 20,000 steps x 10 values, a quarter out of range, and a finish() too
    # short to store them all: what it could not store is counted `unfinished`.
    limited = _limited(builtin)
    settings_ = exporter.ExporterSettings(store=tmp_path)
    run = exporter.init("heavy", registry=builtin, settings=settings_, framework="sb3")
    logged = 0
    for step in range(20_000):
        values = {}
        for k in range(10):
            name, low, high = limited[k % len(limited)]
            values[f"{name}" if k < len(limited) else f"custom/v{k}"] = (
                _outside(low, high) if (step + k) % 4 == 0 else _inside(low, high)
            )
        run.log(step, values)
        logged += len(values)
    run.finish(0.0)
    stats = run.stats
    _identity(stats, logged)
    assert _stored_values(tmp_path, "heavy", builtin) == stats.accepted + stats.unregistered
    assert stats.rejected  # the quarter out of range


_CHILD = textwrap.dedent(
    """
    import atexit, json, signal, sys, time
    import exporter

    logged = [0]
    runs = []

    def report():  # registered before the run's own hook: runs after it
        s = runs[0].stats
        print(json.dumps({"logged": logged[0], "accepted": s.accepted,
            "unregistered": s.unregistered, "rejected": s.rejected,
            "nonfinite": s.nonfinite_total, "dropped": s.dropped,
            "refused_disk": s.refused_disk, "reasons": dict(s.dropped_by_reason)}), flush=True)

    atexit.register(report)
    settings = exporter.ExporterSettings(store=sys.argv[1], flush_timeout=float(sys.argv[2]))
    run = exporter.init("child", settings=settings, framework="sb3")
    runs.append(run)
    step = 0
    while True:
        for _ in range(2000):
            v = {"value_loss": 0.5, "clip_fraction": 1.5 if step % 4 == 0 else 0.2,
                 "grad_norm": float("nan") if step % 50 == 0 else 1.0,
                 "custom/x": 1.0, "policy_kl": "bad" if step % 97 == 0 else 0.01}
            # a SIGTERM between the call and the tally would count values the run has and
            # this tally lacks: it waits (blocked) until both are done
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            run.log(step, v)
            logged[0] += len(v)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            step += 1
        if sys.argv[3] == "exit" and step >= 20000:
            sys.exit(0)  # never calls finish(): the exit hook does
        if step == 2000:
            print("ready", flush=True)
    """
)


def _child_counts(out: str) -> dict[str, Any]:
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    return dict(json.loads(line))


def _child_identity(counts: dict[str, Any]) -> None:
    accounted = sum(
        counts[k]
        for k in ("accepted", "unregistered", "rejected", "nonfinite", "dropped", "refused_disk")
    )
    assert accounted == counts["logged"], counts
    assert set(counts["reasons"]) <= REASONS


def _state(store: Path) -> tuple[str, str]:
    db = sqlite3.connect(store / "outbox.sqlite")
    try:
        row = db.execute("SELECT state, state_reason FROM runs WHERE run = 'child'").fetchone()
    finally:
        db.close()
    return row[0], row[1]


def test_a_process_exiting_without_finish_counts_what_it_could_not_store(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), "0.0", "exit"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    counts = _child_counts(proc.stdout)
    _child_identity(counts)
    stored = _stored_values(tmp_path, "child", builtin)
    assert stored == counts["accepted"] + counts["unregistered"]
    if counts["reasons"].get("unfinished"):
        # one line naming what happened, and no InfluxDB it does not have
        assert "not yet stored when the run ended" in proc.stderr
    assert "InfluxDB" not in proc.stderr and "forwards them" not in proc.stderr
    assert _state(tmp_path)[0] == "finished"


def test_sigterm_ends_the_run_and_counts_what_it_could_not_store(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), "0.05", "loop"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    counts = _child_counts(out)
    _child_identity(counts)
    assert _stored_values(tmp_path, "child", builtin) == counts["accepted"] + counts["unregistered"]
    state, reason = _state(tmp_path)
    assert state == "ended" and "SIGTERM" in reason


def test_a_batch_given_up_at_finish_that_lands_later_is_counted_once(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    # Another process holds the store's write lock when finish() runs out of time: the batch in
    # the worker's hands is counted `unfinished` then; the lock goes, the batch lands after all,
    # and the count moves to what was stored. At every moment: logged = accounted.
    settings_ = exporter.ExporterSettings(store=tmp_path)
    run = exporter.init("locked", registry=builtin, settings=settings_, framework="sb3")
    assert run.flush()
    holder = sqlite3.connect(tmp_path / "outbox.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    logged = 0
    for step in range(100):
        run.log(step, {"value_loss": 0.5, "custom/x": 1.0})
        logged += 2
    run.wake()
    time.sleep(0.5)  # the worker has its batch and waits on the lock
    started = time.monotonic()
    run.finish(0.5)
    took = time.monotonic() - started
    stats = run.stats
    _identity(stats, logged)
    assert stats.dropped_by_reason.get("unfinished") == logged
    assert took < 15  # finish() keeps to its timeout (and a short grace), not the lock's 30 s
    holder.execute("ROLLBACK")
    holder.close()
    deadline = time.monotonic() + 60
    while "unfinished" in run.stats.dropped_by_reason and time.monotonic() < deadline:
        time.sleep(0.1)
    stats = run.stats
    _identity(stats, logged)
    assert "unfinished" not in stats.dropped_by_reason
    assert _stored_values(tmp_path, "locked", builtin) == stats.accepted + stats.unregistered
