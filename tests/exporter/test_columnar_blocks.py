"""The worker translates a run of log calls that logged the same names as one columnar block
(`Translator.log_calls`, stored by `Outbox.write(blocks=...)`). Whatever the calls hold, what is
stored (samples, events, running statistics, rollups) and counted is exactly what translating
them one call at a time gives."""

from __future__ import annotations

import math
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exporter
import registry
from exporter import run as run_module
from exporter.schema import TRANSFORMS_FIELD
from exporter.translate import steps as translate
from exporter.translate.derive import StepDeriver


def _cleanrl_names(reg: registry.Registry) -> list[str]:
    """Spellings that exercise every per-name decision: two names for one metric (the registry's
    precedence picks one), scaled and reciprocal transforms (verl's; unknown names for
    CleanRL), a canonical id, an unknown name."""
    aliases = [a for m in reg.metrics for a in m.aliases if not a.is_pattern]
    kl = [a.key for a in aliases if a.framework == "cleanrl" and a.metric == "policy_kl"]
    scaled = next(a.key for a in aliases if a.framework == "cleanrl" and a.transform.factor != 1)
    reciprocal = next(a.key for a in aliases if a.transform.kind == "reciprocal")
    derived_from = {field for field, _ in StepDeriver(reg, {}).relevant}
    plain = [
        a.key
        for a in aliases
        if a.framework == "cleanrl" and a.transform.kind == "identity"
        if a.metric not in derived_from  # the rest of names[6:] derives nothing
    ]
    return [
        *kl,
        scaled,
        reciprocal,
        "policy_kl",
        "charts/episodic_return",
        *plain[:3],
        "my_custom/thing",
    ]


def _calls(names: list[str]) -> st.SearchStrategy[list[tuple[int, dict[str, Any]]]]:
    """Mostly plain calls (runs of them become blocks), some with one odd value among them."""
    odd = st.sampled_from(
        [float("nan"), float("inf"), 2.0e9, -5.0, 3, True, "x", None, b"1", [0.1, 0.2]]
    )
    name_sets = st.sampled_from([names, names[:4], names[3:], names[6:], names[::-1]])

    def call(ns: list[str]) -> st.SearchStrategy[tuple[int, dict[str, Any]]]:
        values = st.lists(
            st.floats(min_value=0.001, max_value=0.9), min_size=len(ns), max_size=len(ns)
        )
        spoilt = st.none() | st.none() | st.none() | st.tuples(st.sampled_from(ns), odd)
        delta = st.sampled_from([0, 1, 1, 1, 1, 1, 2, -3])

        def build(d: int, vs: list[float], bad: tuple[str, Any] | None) -> tuple[int, dict]:
            logged: dict[str, Any] = dict(zip(ns, vs, strict=True))
            if bad is not None:
                logged[bad[0]] = bad[1]
            return d, logged

        return st.builds(build, delta, values, spoilt)

    return st.lists(name_sets.flatmap(call), min_size=1, max_size=40)


def _store(
    tmp: Path,
    reg: registry.Registry,
    calls: list[tuple[int, dict[str, Any]]],
    policy: str,
    framework: str = "cleanrl",
    *,
    all_stored: bool = True,
) -> tuple[Any, ...]:
    settings = exporter.ExporterSettings(store=tmp)
    run = exporter.init("r", registry=reg, settings=settings, policy=policy, framework=framework)
    step = 100
    for i, (delta, values) in enumerate(calls):
        step = max(0, step + delta)
        run.log(step, values, wall_time=1000.0 + i)
    assert run.flush() is all_stored
    latest = run.live().latest
    stats = run.stats
    run.finish()
    db = sqlite3.connect(tmp / "outbox.sqlite")
    try:
        return (
            db.execute(
                "SELECT run, rank, step, measurement, gpu, field, value, wall_time FROM samples "
                "ORDER BY 1, 2, 3, 4, 5, 6"
            ).fetchall(),
            db.execute(
                "SELECT run, rank, step, kind, text, fields FROM events ORDER BY 1, 2, 3, 4"
            ).fetchall(),
            db.execute("SELECT * FROM sample_stats ORDER BY 1, 2, 3, 4, 5").fetchall(),
            db.execute("SELECT * FROM sample_rollups ORDER BY 1, 2, 3, 4").fetchall(),
            stats,
            latest,
        )
    finally:
        db.close()


def _both_ways(
    monkeypatch: pytest.MonkeyPatch,
    one: Path,
    other: Path,
    reg: registry.Registry,
    calls: list[tuple[int, dict[str, Any]]],
    policy: str,
    framework: str,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """`_store` of the calls as blocks (in `one`), then one call at a time (in `other`)."""
    monkeypatch.setattr(run_module, "_BLOCK_AT_LEAST", 2)
    blocks = _store(one, reg, calls, policy, framework)
    monkeypatch.setattr(run_module, "_BLOCK_AT_LEAST", 10**9)
    return blocks, _store(other, reg, calls, policy, framework)


def _count_log_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each call that goes through `Translator.log` (per call)."""
    seen: list[int] = []
    real = translate.Translator.log

    def counting(self: translate.Translator, *args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(translate.Translator, "log", counting)
    return seen


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.data(),
    policy=st.sampled_from(["warn", "drop"]),
    framework=st.sampled_from(["cleanrl", "verl"]),
)
def test_a_block_stores_and_counts_what_one_call_at_a_time_does(
    builtin: registry.Registry,
    monkeypatch: pytest.MonkeyPatch,
    data: st.DataObject,
    policy: str,
    framework: str,
) -> None:
    calls = data.draw(_calls(_cleanrl_names(builtin)))
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as other:
        blocks, single = _both_ways(
            monkeypatch, Path(one), Path(other), builtin, calls, policy, framework
        )
    samples, events, stats, rollups, counts, latest = blocks
    assert (samples, events, counts, latest) == (single[0], single[1], single[4], single[5])
    # statistics: the same counts, steps and extremes; sums equal up to the order of adding
    assert _close(stats, single[2])
    assert _close(rollups, single[3])


def _close(rows: list[tuple[Any, ...]], others: list[tuple[Any, ...]]) -> bool:
    """Equal rows, floats up to rounding (sums added in another order)."""
    if len(rows) != len(others):
        return False
    for row, other in zip(rows, others, strict=True):
        if len(row) != len(other):
            return False
        for a, b in zip(row, other, strict=True):
            same = (
                math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
                if isinstance(a, float) and isinstance(b, float)
                else a == b
            )
            if not same:
                return False
    return True


def test_plain_calls_do_take_the_block_path(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    taken: list[int] = []
    real = translate.Translator.log_calls

    def counting(self: translate.Translator, *args: Any, **kwargs: Any) -> Any:
        out = real(self, *args, **kwargs)
        if out is not None:
            taken.extend(block.size for block, _, _, _ in out if block is not None)
        return out

    monkeypatch.setattr(translate.Translator, "log_calls", counting)
    names = _cleanrl_names(builtin)
    calls = [(1, {n: 0.01 * (i % 50 + 1) for n in names}) for i in range(500)]
    stored = _store(tmp_path, builtin, calls, "warn")
    assert sum(taken) >= 400 * (len(names) - 2)  # most calls went as blocks
    assert {row[2] for row in stored[0] if row[3] != "run_config"} == set(range(101, 601))


def test_a_value_rejected_under_one_of_two_names_for_a_metric_keeps_the_calls_a_block(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # CleanRL logs approx_kl and old_approx_kl, one metric: where the preferred one is rejected
    # the other is stored, decided per call inside the block (these calls went one by one and
    # cut a batch into a block every few calls)
    calls_seen = _count_log_calls(monkeypatch)
    kl = _cleanrl_names(builtin)[:2]
    calls = []
    for i in range(200):
        values: dict[str, Any] = {kl[0]: 0.01, kl[1]: 0.02, "charts/episodic_return": 1.0}
        if i % 4 == 0:
            values[kl[i // 4 % 2]] = "n/a"  # each name rejected in turn
        calls.append((1, values))
    samples, _, _, _, stats, _ = _store(tmp_path, builtin, calls, "warn")
    assert len(calls_seen) <= 2  # (the first call decides the names one at a time)
    kl_rows = {row[2]: row[6] for row in samples if row[5] == "policy_kl"}
    assert set(kl_rows) == set(range(101, 301))
    preferred = kl_rows[102]  # a call with both: the registry's preferred name's value
    for i in range(200):
        if i % 4 == 0:  # the one not rejected
            assert kl_rows[101 + i] == (0.02 if i // 4 % 2 == 0 else 0.01)
        else:
            assert kl_rows[101 + i] == preferred
    assert stats.rejected == 50


def test_a_nan_among_plain_calls_is_a_hole_in_the_block_and_said_at_its_call(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # each NaN call went one by one (its health event and `<field>/nonfinite` count built per
    # call) and cut the batch: a NaN in a quarter of the calls stored at a fifth of the rate
    calls_seen = _count_log_calls(monkeypatch)
    names = ["charts/episodic_return", "losses/value_loss", "my_custom/thing"]
    calls = []
    for i in range(100):
        values: dict[str, Any] = dict.fromkeys(names, 0.5)
        if i % 4 == 0:
            values[names[i // 4 % 3]] = float("nan") if i % 8 else float("inf")
        calls.append((1, values))
    samples, events, _, _, stats, _ = _store(tmp_path, builtin, calls, "warn")
    assert len(calls_seen) <= 2
    health = {e[2]: e[4] for e in events if e[3] == "health"}
    assert set(health) == {101 + i for i in range(0, 100, 4)}
    assert (
        health[101]
        == "non-finite value(s) not written: episodic_return=inf from 'charts/episodic_return'"
    )
    assert health[105] == "non-finite value(s) not written: value_loss=nan from 'losses/value_loss'"
    assert health[109] == (
        "non-finite value(s) not written: my_custom/thing=inf (unregistered 'my_custom/thing')"
    )
    marks = {(r[2], r[5]) for r in samples if r[5].endswith("/nonfinite")}
    assert (101, "episodic_return/nonfinite") in marks and (105, "value_loss/nonfinite") in marks
    assert not any(step == 109 for step, _ in marks)  # an unregistered name has no mark
    assert not any(r[2] == 101 and r[5] == "episodic_return" for r in samples)  # a hole
    assert stats.nonfinite_total == 25


def test_a_nan_in_a_call_with_no_metric_counts_at_its_step_as_one_call_at_a_time_does(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # found by CI's run of the property above: calls repeating one step, under verl, where the
    # NaN is under a name verl does not register; one call at a time adds it to the step's
    # `nonfinite_count` (the call derives it though it logged no metric); the block derived
    # nothing for a call with no metric
    names = _cleanrl_names(builtin)
    unregistered = names[6:]  # none of them a verl key
    calls: list[tuple[int, dict[str, Any]]] = [(0, dict.fromkeys(names, 0.25))]
    for i in range(5):
        values: dict[str, Any] = dict.fromkeys(unregistered, 0.5)
        if i == 0:
            values["eval/episodic_return"] = float("inf")
        calls.append((0, values))
    blocks, single = _both_ways(
        monkeypatch, tmp_path / "blocks", tmp_path / "single", builtin, calls, "warn", "verl"
    )
    counts = [r for r in single[0] if r[5] == "nonfinite_count"]
    assert [(r[2], r[6]) for r in counts] == [(100, 1.0)]  # the promise, one call at a time
    assert blocks[0] == single[0] and blocks[1] == single[1] and blocks[5] == single[5]


def test_a_refused_call_inside_a_block_is_dropped_alone(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = exporter.Outbox.write

    def refusing_step_7(self: exporter.Outbox, *args: Any, **kwargs: Any) -> bool:
        steps = {row[2] for row in (args[0] if args else kwargs.get("samples", ()))}
        steps |= {s for _, block in kwargs.get("blocks", ()) for s in block.steps}
        if 107 in steps:
            raise RuntimeError("injected fault at step 107")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(exporter.Outbox, "write", refusing_step_7)
    names = _cleanrl_names(builtin)[:4]
    calls = [(1, dict.fromkeys(names, 0.5)) for _ in range(20)]
    samples, _, _, _, stats, _ = _store(tmp_path, builtin, calls, "warn", all_stored=False)
    steps = {row[2] for row in samples if row[3] != "run_config"}
    assert steps == set(range(101, 121)) - {107}
    assert stats.dropped_by_reason["store_error"] == len(names)


def test_a_name_logged_again_at_a_step_in_another_shape_counts_once(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # three calls in one shape become a block; the fourth logs the same names in another order
    # at the block's last step: its values replace the block's there, in the statistics too
    names = _cleanrl_names(builtin)[4:8]
    calls = [(1, dict.fromkeys(names, 0.25)) for _ in range(3)]
    calls += [(0, dict.fromkeys(reversed(names), 0.75))]
    blocks, single = _both_ways(
        monkeypatch, tmp_path / "blocks", tmp_path / "single", builtin, calls, "warn", "cleanrl"
    )
    samples, _, stats, _, _, _ = blocks
    assert samples == single[0]
    assert _close(stats, single[2])
    field_stats = [row for row in stats if row[3] not in ("health", "run_config")]
    assert field_stats and all(row[5] == 3 for row in field_stats)  # steps 101, 102, 103
    assert all(row[6] == pytest.approx(0.25 + 0.25 + 0.75) for row in field_stats)


def test_a_transform_first_applied_after_a_nan_is_recorded_at_the_same_call_either_way(
    builtin: registry.Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Found by the property above (verl's reciprocal `timing_per_token_ms/gen` NaN in the first
    call, a value in the second): a block recorded the transform at its first call's wall time,
    one call at a time at the call whose value it was applied to (the NaN's is never converted)."""
    names = _cleanrl_names(builtin)
    aliases = [a for m in builtin.metrics for a in m.aliases if not a.is_pattern]
    reciprocal = next(a.key for a in aliases if a.transform.kind == "reciprocal")
    assert reciprocal in names
    plain = dict.fromkeys(names, 0.5)
    calls = [(0, {**plain, reciprocal: float("nan")}), (0, dict(plain))]
    blocks, single = _both_ways(
        monkeypatch, tmp_path / "blocks", tmp_path / "single", builtin, calls, "warn", "verl"
    )
    noted = [r for r in single[0] if r[5] == TRANSFORMS_FIELD]
    assert [r[7] for r in noted] == [1001.0]  # the second call's wall time (1000.0 + 1)
    assert blocks[0] == single[0]
