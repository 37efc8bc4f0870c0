"""A long log's whole-run sketch, as the run's own rows: a sample of its steps spread over the file
(an event file's by `sources.tb_sample`, a console log's by `sources.console_sample`) translated as
the run translates what it logs, kept apart from the run's samples (`store.preview`) while the
import stores every value."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from registry import Registry

from ..config import Policy
from ..counts import RunCounters
from ..schema import SampleRow
from ..sources import console_sample, tb_sample
from ..sources.record import Record
from ..translate.steps import Translator

__all__ = ["SKETCHED", "sketch_rows"]

SKETCHED: dict[str, Callable[[Path, int, int], list[Record]]] = {
    "tensorboard": tb_sample.sample_steps,
    "console": console_sample.sample_steps,
}
"""The log formats a whole-run sketch is read from, and how each is sampled."""


def sketch_rows(
    reg: Registry,
    path: Path,
    start: int,
    end: int,
    *,
    run: str,
    framework: str | None,
    config: Mapping[str, Any] | None,
    policy: Policy,
    format: str = "tensorboard",
) -> list[SampleRow]:
    """The translated rows of a sample of the steps in bytes [start, end) of a log of `format`
    (one of `SKETCHED`): the run's names, transforms and derived metrics, by a translator of its
    own (its warnings are the run's translator's to say)."""
    translator = Translator(
        reg,
        RunCounters(),
        run=run,
        rank=None,
        policy=policy,
        framework=framework,
        last_step=None,
        config=config,
        quiet=True,
    )
    rows: list[SampleRow] = []
    for record in SKETCHED[format](path, start, end):
        rows += translator.log(record.step, record.values, record.wall_time or 0.0, framework)[0]
    return rows
