"""`Run.log_block`: a log reader hands the worker steps already in columns (a `ScalarBlock`), which
it translates a column at a time (`BlockTranslator`) and stores as columnar blocks. Whatever the
steps hold (odd values, resumes, a step again, names refused or unknown, several shapes), what is
stored (samples, events, running statistics, rollups) and counted is exactly what `Run.log` gives
for the same steps one by one; and the queue counts a block's steps."""

from __future__ import annotations

import math
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from columnar import Steps, block_of, stored_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exporter
import registry
from exporter import run as run_module
from exporter.sources.scalar_block import ScalarBlock

_NAMES = [
    "train/approx_kl",
    "train/entropy_loss",  # negated
    "train/value_loss",  # scaled
    "train/clip_range",
    "rollout/ep_rew_mean",
    "rollout/ep_len_mean",
    "time/fps",
    "custom/thing",  # unregistered
    "",  # refused
]
_ODD = st.sampled_from([math.nan, math.inf, -math.inf, 1e30, -5.0, 0.0])


@st.composite
def _logs(draw: Any) -> tuple[Steps, list[int]]:
    """Steps of a log (mostly rising, some going back or repeating, a few odd values) in a few
    shapes, and where the reader's blocks are cut."""
    shapes = draw(
        st.lists(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5), min_size=1, max_size=3)
    )
    count = draw(st.integers(1, 150))
    out: Steps = []
    step = draw(st.integers(0, 50))
    for i in range(count):
        move = draw(st.sampled_from(["next"] * 14 + ["back", "same"]))
        if move == "next":
            step += draw(st.sampled_from([1, 1, 1, 64]))
        elif move == "back":
            step = max(0, step - draw(st.integers(1, 200)))
        names = draw(st.sampled_from(shapes))
        values = []
        for j, name in enumerate(names):
            odd = draw(st.integers(0, 50)) == 0
            value = draw(_ODD) if odd else 0.01 + ((i * 7 + j * 13) % 50) / 100
            values.append((name, float(np.float32(value))))
        out.append((step, values, 1.7e9 + i))
    cuts = sorted(draw(st.lists(st.integers(0, count), max_size=3)))
    return out, cuts


def _store(
    tmp: Path,
    reg: registry.Registry,
    block: ScalarBlock,
    cuts: list[int],
    framework: str | None,
    *,
    blocks: bool,
) -> tuple[Any, ...]:
    settings = exporter.ExporterSettings(store=tmp)
    run = exporter.init("r", registry=reg, settings=settings, policy="warn", framework=framework)
    for lo, hi in zip([0, *cuts], [*cuts, len(block)], strict=True):
        part = block.slice(lo, hi)
        if blocks:
            run.log_block(part)
        else:
            for record in part.records():
                run.log(record.step, record.values, wall_time=record.wall_time)
    assert run.flush()
    latest = run.live().latest
    stats = run.stats
    run.finish()
    return (*stored_rows(tmp / "outbox.sqlite"), stats, latest)


def _close(rows: list[tuple[Any, ...]], others: list[tuple[Any, ...]]) -> bool:
    """Equal rows, floats up to rounding (sums added in another order)."""
    if len(rows) != len(others):
        return False
    for row, other in zip(rows, others, strict=True):
        for a, b in zip(row, other, strict=True):
            same = (
                math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
                if isinstance(a, float) and isinstance(b, float)
                else a == b
            )
            if not same:
                return False
    return True


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(log=_logs(), framework=st.sampled_from(["sb3", None]))
def test_a_logged_block_stores_and_counts_what_its_steps_one_by_one_do(
    builtin: registry.Registry,
    monkeypatch: pytest.MonkeyPatch,
    log: tuple[Steps, list[int]],
    framework: str | None,
) -> None:
    steps, cuts = log
    # the first names go through `log` one step at a time (the framework is detected from
    # them); the steps after them go as columns
    warmup = [(s, [(n, 0.1) for n in _NAMES[:5]], 1.6e9 + s) for s in range(45)]
    block = block_of(warmup + [(s + 45, values, wall) for s, values, wall in steps])
    cuts = [c + len(warmup) for c in cuts]
    # the reference: every `log` call translated alone (`Translator.log`), never as a block
    monkeypatch.setattr(run_module, "_BLOCK_AT_LEAST", 10**9)
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as other:
        columns = _store(Path(one), builtin, block, cuts, framework, blocks=True)
        single = _store(Path(other), builtin, block, cuts, framework, blocks=False)
    samples, events, stats, rollups, counts, latest = columns
    assert (samples, events, counts, latest) == (single[0], single[1], single[4], single[5])
    assert _close(stats, single[2])
    assert _close(rollups, single[3])


def test_a_long_log_is_stored_as_columns_and_counted_in_steps(
    builtin: registry.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        (s, [("rollout/ep_rew_mean", 0.5 + s / 1e4), ("train/approx_kl", 0.01)], 1.7e9 + s)
        for s in range(5000)
    ]
    block = block_of(steps)
    written: list[int] = []
    real = exporter.Outbox.write

    def counting(self: exporter.Outbox, *args: Any, **kwargs: Any) -> bool:
        written.extend(b.size for _, b in kwargs.get("blocks", ()))
        return bool(real(self, *args, **kwargs))

    monkeypatch.setattr(exporter.Outbox, "write", counting)
    settings = exporter.ExporterSettings(store=tmp_path, queue_size=100_000)
    run = exporter.init("r", registry=builtin, settings=settings, framework="sb3")
    run.log_block(block.slice(0, 200))
    depth = run.queue_depth
    run.log_block(block.slice(200, 5000))
    assert run.queue_depth >= depth + 4800 - 200  # the worker may have taken some already
    assert run.flush()
    stats = run.stats
    run.finish()
    assert stats.accepted == 10_000 and stats.dropped == 0
    # two values and the derived `nonfinite_count` per step, as columns
    assert sum(written) >= 3 * 4800
    with sqlite3.connect(tmp_path / "outbox.sqlite") as db:
        (count,) = db.execute("SELECT count(*) FROM samples WHERE measurement != 'run_config'")
        assert count == (15_000,)


def test_a_full_queue_drops_a_block_and_counts_its_values(
    builtin: registry.Registry, tmp_path: Path
) -> None:
    steps = [
        (s, [("rollout/ep_rew_mean", 0.5), ("train/approx_kl", 0.01)], 1.7e9) for s in range(50)
    ]
    settings = exporter.ExporterSettings(store=tmp_path, queue_size=40)
    run = exporter.init("r", registry=builtin, settings=settings, framework="sb3")
    run.log_block(block_of(steps))  # 50 steps: more than the queue holds
    assert run.flush() is False  # what was logged was not all stored
    stats = run.stats
    run.finish()
    assert stats.dropped_by_reason["queue_full"] == 100


def test_a_step_without_a_wall_time_gets_the_time_of_the_call(
    builtin: registry.Registry, tmp_path: Path
) -> None:
    steps = [(s, [("rollout/ep_rew_mean", 0.5)], 0.0 if s == 60 else 1.7e9) for s in range(80)]
    settings = exporter.ExporterSettings(store=tmp_path)
    run = exporter.init("r", registry=builtin, settings=settings, framework="sb3")
    before = time.time()
    run.log_block(block_of(steps))
    after = time.time()
    assert run.flush()
    run.finish()
    with sqlite3.connect(tmp_path / "outbox.sqlite") as db:
        walls = dict(
            db.execute("SELECT step, wall_time FROM samples WHERE field = 'episodic_return'")
        )
    assert before <= walls[60] <= after
    assert {w for s, w in walls.items() if s != 60} == {1.7e9}
