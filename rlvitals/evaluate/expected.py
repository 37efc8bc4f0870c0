"""The expected verdicts file (`--expected`, e.g. tests/fixtures/runs/expected.yaml): per run
the verdict read from its curves, its family (for `--leave-one-family-out`), and what its user
would pass on the command line for it (`given: {map: {TAG: METRIC}, set: {KEY: VALUE}}`: a run
logging its own tag names, a run config the logs cannot say)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import registry
from exporter.ingest.commands import mapped_config

from .replay import Expected

__all__ = ["ExpectedRun", "given", "read_expected"]


@dataclass(frozen=True)
class ExpectedRun:
    expected: Expected
    family: str | None
    maps: tuple[str, ...]  # TAG=METRIC, as --map takes them
    config: Mapping[str, Any]  # KEY: VALUE, as --set gives them


def read_expected(path: Path) -> dict[str, ExpectedRun]:
    """Each run's entry; raises FileNotFoundError or ValueError naming the run and the field."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileNotFoundError(f"--expected {path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--expected {path}: not YAML ({exc})") from None
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, dict):
        raise ValueError(f"--expected {path}: expected a mapping with a 'runs' mapping")
    out = {}
    for name, entry in runs.items():
        if not isinstance(entry, dict):
            raise ValueError(f"--expected {path}: run {name!r}: expected a mapping")
        try:
            expected = Expected.of(entry)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"--expected {path}: run {name!r}: {exc!r} (needs verdict)") from None
        said = entry.get("given") or {}
        maps = said.get("map") if isinstance(said, dict) else None
        settings = said.get("set") if isinstance(said, dict) else None
        if not isinstance(maps or {}, dict) or not isinstance(settings or {}, dict):
            raise ValueError(
                f"--expected {path}: run {name!r}: given: needs map: and set: mappings"
            )
        family = entry.get("family")
        out[str(name)] = ExpectedRun(
            expected,
            None if family is None else str(family),
            tuple(f"{k}={v}" for k, v in (maps or {}).items()),
            {str(k): v for k, v in (settings or {}).items()},
        )
    return out


def given(
    reg: registry.Registry, config: Mapping[str, Any], entry: ExpectedRun | None
) -> tuple[registry.Registry, dict[str, Any]]:
    """The registry and run config a run is read with: the command line's, plus what its
    entry says its user passes (its `--map`s, its `--set`s over the command line's)."""
    if entry is None or not (entry.maps or entry.config):
        return reg, dict(config)
    mapped = reg.with_map(registry.parse_map(entry.maps, reg))
    return mapped, mapped_config(mapped, {**config, **entry.config})
