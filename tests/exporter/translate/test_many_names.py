"""A step that logs thousands of names the registry does not know (an adversary's 14 MB verl line
of 700,000 keys; a loop logging a per-layer statistic for every layer) is translated at a cost
per name, not per pair of names, and says a bounded number of lines: every value is still stored
and counted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import exporter
import registry
from exporter.schema import UNREGISTERED
from registry.catalog import Registry


def test_many_unknown_names_are_resolved_a_bounded_number_of_times_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before, each unknown name gathered the run's known metrics by resolving every name of the
    # call again: 400 names took ~80,000 resolutions (10,000 names: 112 s for two steps)
    calls = [0]
    resolve = Registry.resolve

    def counted(self: Registry, name: str, framework: str | None = None):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return resolve(self, name, framework)

    monkeypatch.setattr(Registry, "resolve", counted)
    names = [f"layers/l{i}/act_norm" for i in range(400)]
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    run = exporter.init("wide", registry=registry.load(), settings=settings)
    for step in range(2):
        run.log(step, {name: float(i) for i, name in enumerate(names)})
    assert run.flush(60)
    run.finish()
    assert calls[0] <= 10 * len(names), calls[0]
    with exporter.Outbox(settings.outbox_path) as box:
        assert box.fields("wide", UNREGISTERED) == sorted(names)


def test_warnings_of_one_kind_stop_after_twenty_with_a_line_saying_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    names = [f"mine/thing{i}" for i in range(60)]
    settings = exporter.ExporterSettings(store=tmp_path / "store")
    with caplog.at_level(logging.WARNING, logger="exporter"):
        run = exporter.init("noisy", registry=registry.load(), settings=settings)
        run.log(0, {name: 1.0 for name in names})
        assert run.flush(60)
        run.finish()
    said = [r.getMessage() for r in caplog.records if "neither a metric id" in r.getMessage()]
    assert len(said) == 20
    assert any(
        "20 warnings of this kind (names stored as logged)" in r.getMessage()
        for r in caplog.records
    )
    with exporter.Outbox(settings.outbox_path) as box:
        assert box.fields("noisy", UNREGISTERED) == sorted(names)  # every one stored, said or not
