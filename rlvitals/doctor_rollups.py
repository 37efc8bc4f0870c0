"""`rlvitals doctor`'s rollup check: each run's rollups against its raw points, in the embedded
store (running statistics and step rollups) and in InfluxDB 1.x (its rollup measurements,
named in `exporter.schema`), and `--repair`, which recomputes those that disagree from the raw points.

Rollups can fall behind when a rollup write failed and its sender exited before it could retry,
with a store from before owed rollups were recorded, or when something other than rlvitals wrote
raw points; the forwarder recomputes what the store says it owed when it starts, and this is the
check that everything agrees, run by run."""

from __future__ import annotations

from exporter.config import ExporterSettings
from exporter.errors import ExporterError
from exporter.influx.rollups import InfluxRollups, RollupQueryError, make_rollups
from exporter.influx.writers import make_writer
from exporter.store.outbox import Outbox

from .doctor import Finding

__all__ = ["repair_rollups", "rollup_findings"]

_SHOWN = 3  # disagreements shown per run


def _influx_rollups(settings: ExporterSettings) -> InfluxRollups | None:
    writer = make_writer(settings)
    return None if writer is None else make_rollups(settings, writer)


def rollup_findings(settings: ExporterSettings) -> list[Finding]:
    """One finding for the store's rollups and, with InfluxDB 1.x configured, one for
    InfluxDB's, each naming the runs whose rollups disagree with their raw points."""
    path = settings.outbox_path
    if not path.exists():
        return []
    try:
        outbox = Outbox(path)
    except ExporterError:
        return []  # the store's own finding says why
    try:
        runs = [r.run for r in outbox.runs()]
        store = outbox.disagreements()
    finally:
        outbox.close()
    findings = [_finding("rollups in the embedded store", len(runs), store)]
    rollups = _influx_rollups(settings)
    if rollups is not None:
        found: dict[str, list[str]] = {}
        try:
            for run in runs:
                problems = rollups.check(run)
                if problems:
                    found[run] = problems
        except RollupQueryError as exc:
            findings.append(
                Finding("rollups in InfluxDB", False, f"not checked: {exc}", "see InfluxDB above")
            )
            return findings
        findings.append(_finding("rollups in InfluxDB", len(runs), found))
    return findings


def _finding(check: str, runs: int, found: dict[str, list[str]]) -> Finding:
    if not found:
        return Finding(check, True, f"{runs} run(s): every rollup equals its raw points")
    shown = "; ".join(
        f"run {run!r}: {', '.join(problems[:_SHOWN])}"
        + (f" (+{len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else "")
        for run, problems in sorted(found.items())
    )
    return Finding(
        check,
        False,
        f"{len(found)} of {runs} run(s) disagree with their raw points: {shown}",
        "rlvitals doctor --repair (recomputes them from the raw points)",
    )


def repair_rollups(settings: ExporterSettings) -> list[str]:
    """Recompute the rollups that disagree with their raw points; what was done, one line each.
    Raises ExporterError or RollupQueryError when the store or InfluxDB cannot be repaired."""
    path = settings.outbox_path
    if not path.exists():
        return []
    done: list[str] = []
    outbox = Outbox(path)
    try:
        runs = [r.run for r in outbox.runs()]
        store = outbox.disagreements()
        if store:
            outbox.rebuild_statistics()
            done.append(
                f"embedded store: statistics and rollups recomputed from the rows "
                f"({len(store)} run(s) disagreed: {', '.join(sorted(store))})"
            )
    finally:
        outbox.close()
    rollups = _influx_rollups(settings)
    if rollups is not None:
        for run in runs:
            if rollups.check(run):
                rollups.repair(run)
                left = rollups.check(run)
                state = "now agree" if not left else f"still disagree: {', '.join(left[:_SHOWN])}"
                done.append(f"InfluxDB: run {run!r} rolled up again from its raw points; {state}")
    return done
