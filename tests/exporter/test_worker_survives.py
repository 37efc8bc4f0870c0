"""One bad input never stops the worker: what comes before and after it is stored, the bad one is
counted with its reason, and `stats` counts only what was stored."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry

_INT64_MAX = 2**63 - 1


def _run(tmp_path: Path, reg: registry.Registry, policy: str, **kw: Any) -> exporter.Run:
    settings = exporter.ExporterSettings(store=tmp_path)
    return exporter.init("r", registry=reg, settings=settings, policy=policy, **kw)


def _stored_steps(tmp_path: Path, field: str = "clip_fraction") -> list[int]:
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        steps, _ = box.series("r", field)
    return [int(s) for s in steps]


_BAD_CALLS: list[tuple[str, Any]] = [
    ("step beyond int64", lambda run: run.log(2**63, {"losses/clipfrac": 0.5})),
    ("step of 23 digits", lambda run: run.log(10**22, {"losses/clipfrac": 0.5})),
    ("event step beyond int64", lambda run: run.event(2**64, "checkpoint")),
    ("surrogate in event text", lambda run: run.event(5, "checkpoint", text="bad \udc80")),
    ("surrogate in event kind", lambda run: run.event(5, "ck\ud800")),
    ("surrogate in event field", lambda run: run.event(5, "checkpoint", note="\udcff")),
    ("surrogate in unregistered name", lambda run: run.log(5, {"my/\udc80x": 1.0})),
    ("event field integer beyond a float", lambda run: run.event(5, "checkpoint", n=10**400)),
]


@pytest.mark.parametrize(("case", "bad"), _BAD_CALLS, ids=[c for c, _ in _BAD_CALLS])
@pytest.mark.parametrize("policy", ["warn", "drop"])
def test_one_bad_input_never_stops_the_worker(
    tmp_path: Path, reg: registry.Registry, policy: str, case: str, bad: Any
) -> None:
    with _run(tmp_path, reg, policy) as run:
        for step in range(50):
            run.log(step, {"losses/clipfrac": 0.1})
        bad(run)
        for step in range(50, 99):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush()
        stats = run.stats
    assert _stored_steps(tmp_path) == list(range(99))
    assert stats.accepted == 99


@pytest.mark.parametrize(("case", "bad"), _BAD_CALLS, ids=[c for c, _ in _BAD_CALLS])
def test_strict_policy_raises_at_the_call_site_for_unstorable_input(
    tmp_path: Path, reg: registry.Registry, case: str, bad: Any
) -> None:
    with _run(tmp_path, reg, "strict") as run:
        run.log(0, {"losses/clipfrac": 0.1})
        with pytest.raises(exporter.InvalidSample):
            bad(run)
        run.log(1, {"losses/clipfrac": 0.1})
        assert run.flush()
    assert _stored_steps(tmp_path) == [0, 1]


def test_the_largest_int64_step_is_stored(tmp_path: Path, reg: registry.Registry) -> None:
    with _run(tmp_path, reg, "strict") as run:
        run.log(_INT64_MAX, {"losses/clipfrac": 0.1})
        assert run.flush()
    assert _stored_steps(tmp_path) == [_INT64_MAX]


def test_a_run_name_or_project_that_cannot_be_encoded_is_a_config_error(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with pytest.raises(exporter.ConfigError, match="UTF-8"):
        exporter.init("bad\udc80", registry=reg, settings=settings)
    with pytest.raises(exporter.ConfigError, match="UTF-8"):
        exporter.init("ok", project="p\ud800", registry=reg, settings=settings)


def test_a_failure_while_storing_is_counted_as_dropped_with_its_reason_and_reported_once(
    tmp_path: Path,
    reg: registry.Registry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = {"n": 0}
    real = exporter.Outbox.write

    def failing_twice(self: exporter.Outbox, *args: Any, **kwargs: Any) -> bool:
        samples = args[0] if args else kwargs.get("samples", ())
        steps = {row[2] for row in samples}
        steps |= {step for _, block in kwargs.get("blocks", ()) for step in block.steps}
        if steps & {10, 20}:
            calls["n"] += 1
            raise RuntimeError("injected storage fault")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(exporter.Outbox, "write", failing_twice)
    with caplog.at_level(logging.WARNING), _run(tmp_path, reg, "warn") as run:
        for step in range(30):
            run.log(step, {"losses/clipfrac": 0.1})
            if step in (10, 20):
                assert run.flush() is False  # that call was not stored, and flush says so
        assert run.flush()
        stats = run.stats
    assert calls["n"] >= 2
    stored = _stored_steps(tmp_path)
    assert 0 in stored and 29 in stored
    assert 10 not in stored and 20 not in stored
    assert stats.accepted == len(stored)
    assert stats.dropped_by_reason.get("store_error", 0) >= 2
    assert stats.accepted + stats.dropped == 30
    reports = [r for r in caplog.records if "injected storage fault" in r.getMessage()]
    assert len(reports) == 1


def test_a_dead_worker_is_restarted_and_nothing_queued_is_lost(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _run(tmp_path, reg, "warn") as run:
        for step in range(10):
            run.log(step, {"losses/clipfrac": 0.1})
        assert run.flush()
        # a BaseException no per-batch handler is meant to swallow ends the thread
        real = run._process
        fired = {"done": False}

        def dies_once(outbox: Any, batch: Any) -> None:
            if not fired["done"]:
                fired["done"] = True
                raise SystemExit("injected")
            real(outbox, batch)

        monkeypatch.setattr(run, "_process", dies_once)
        for step in range(10, 20):
            run.log(step, {"losses/clipfrac": 0.1})
        run.flush()  # False when the batch the worker died in was lost (counted below)
        run.log(20, {"losses/clipfrac": 0.1})
        assert run.flush()  # the restarted worker stores again
        stats = run.stats
    assert fired["done"]
    stored = _stored_steps(tmp_path)
    assert stats.accepted == len(stored)
    assert stats.accepted + stats.dropped == 21
    assert set(range(10)) <= set(stored) and 20 in stored


def test_dropped_samples_are_served_by_reason_on_metrics(
    tmp_path: Path, reg: registry.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refusing(self: exporter.Outbox, *args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("injected storage fault")

    endpoint = exporter.MetricsEndpoint(port=0)
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init(
        "r", registry=reg, settings=settings, policy="warn", endpoint=endpoint
    ) as run:
        assert run.flush()
        monkeypatch.setattr(exporter.Outbox, "write", refusing)
        run.log(1, {"losses/clipfrac": 0.1, "losses/value_loss": 0.2})
        assert run.flush() is False
        text = endpoint.render().decode()
    assert 'rlvitals_dropped_total{reason="store_error",run="r"} 2.0' in text


def test_a_full_queue_drops_new_calls_counts_them_and_warns_once(
    tmp_path: Path,
    reg: registry.Registry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    real = exporter.Outbox.write

    def slow(self: exporter.Outbox, *args: Any, **kwargs: Any) -> bool:
        release.wait(10)  # the store is stuck: the queue fills
        return real(self, *args, **kwargs)

    monkeypatch.setattr(exporter.Outbox, "write", slow)
    settings = exporter.ExporterSettings(store=tmp_path, queue_size=5)
    with caplog.at_level(logging.WARNING):
        run = exporter.init("r", registry=reg, settings=settings, policy="warn")
        for step in range(200):
            run.log(step, {"losses/clipfrac": 0.1, "losses/value_loss": 0.5})
        release.set()
        assert run.flush() is False  # not everything logged was stored, and flush says so
        run.finish()
    stats = run.stats
    assert stats.dropped_by_reason["queue_full"] > 0
    assert stats.dropped == stats.dropped_by_reason["queue_full"]
    assert stats.accepted + stats.dropped == 400
    warned = [r for r in caplog.records if "RLVITALS_QUEUE_SIZE" in r.getMessage()]
    assert len(warned) == 1 and "queue_full" in warned[0].getMessage()
