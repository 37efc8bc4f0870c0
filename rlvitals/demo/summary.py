"""The one-screen diagnosis summary `rlvitals demo` ends with, and where to look next."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .run_demo import DemoResult

__all__ = ["Pointers", "format_result", "format_summary"]

_ORDER = ("critical", "warning", "watch", "ok", "no_data")
_SHOW_NAMES = ("critical", "warning", "watch")


@dataclass(frozen=True)
class Pointers:
    """Where the user looks next."""

    store: Path
    serve_url: str
    influx: str | None = None
    reports: tuple[tuple[str, Path], ...] = ()
    default_store: bool = True


def format_result(r: DemoResult) -> list[str]:
    """Three to four lines for one run: title, expected flag, core statuses, the rules firing at
    its last step (and when the expected one fired, if it had cleared by then)."""
    lines = [f"{r.run}  ({r.steps:,} steps, {r.seconds:.1f} s)  {r.scenario.title}"]
    if r.detection is not None:
        lines.append(f"  expected  {r.detection.describe()}")
    by_status: dict[str, list[str]] = {}
    for card in r.cards:
        by_status.setdefault(card.status, []).append(card.metric)
    parts = []
    for status in _ORDER:
        names = by_status.get(status)
        if not names:
            continue
        label = status.upper() if status in ("critical", "warning") else status
        parts.append(
            f"{label}: {', '.join(names)}" if status in _SHOW_NAMES else f"{label} {len(names)}"
        )
    lines.append("  core      " + ("; ".join(parts) or "no core metric logged"))
    # the rules firing at the last step; a scenario's rule flagged earlier and quiet by then
    # says when it fired, so the summary never reads as if nothing had been flagged
    last = f"at step {r.steps - 1:,}"
    firing = ", ".join(f"{x.rule.id} ({x.rule.severity})" for x in r.firing)
    line = f"firing {last}: {firing}" if firing else f"quiet {last}"
    d = r.detection
    cleared = d is not None and all(x.rule.id != d.expect.id for x in r.firing)
    if d is not None and d.expect.kind == "rule" and d.step is not None and cleared:
        again = "" if d.quiet is None else f", quiet again from step {d.quiet:,}"
        line += f" ({d.expect.id} fired at step {d.step:,}{again})"
    lines.append(f"  rules     {line}")
    return lines


def format_summary(results: Sequence[DemoResult], where: Pointers) -> str:
    out = [
        "",
        "Diagnosis of each run (when the expected flag went up; at the last step: status of the core metrics, rules firing):",
    ]
    for r in results:
        out += format_result(r)
    missed = [r.run for r in results if r.detection is not None and not r.detection.on_time]
    if missed:
        out.append(f"NOT flagged on time: {', '.join(missed)}")
    out += ["", "Where to look:"]
    out.append(f"  store       {where.store}   (RLVITALS_STORE)")
    if where.influx:
        out.append(f"  InfluxDB    {where.influx}")
    first = results[0].run if results else "RUN"
    serve = (
        "rlvitals serve"
        if where.default_store
        else f"RLVITALS_STORE={where.store.parent} rlvitals serve"
    )
    out.append(f"  dashboard   {serve}")
    out.append(
        f"              then {where.serve_url}/ (the run list) or {where.serve_url}/run?run={first}"
    )
    if where.reports:
        out.append("  reports     " + str(where.reports[0][1].parent) + "/")
        out += [f"              {path.name}" for _, path in where.reports]
    else:
        out.append(f"  report      rlvitals report --run {first} --out {first}.html")
    return "\n".join(out)
