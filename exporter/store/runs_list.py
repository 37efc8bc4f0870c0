"""`rlvitals runs`: the runs in the embedded store, with their lifecycle status.

Status is `Lifecycle.status(...)` with the settings' windows (RLVITALS_STALL_AFTER_S,
RLVITALS_ENDED_AFTER_S): live, stalled, quiet, finished, crashed, incomplete, ended or unknown, with the
reason that set it (see `lifecycle.py`); the one definition the datasource, `/metrics` and the
alert rules use too. `--json` prints the same rows as a JSON list for scripts (with each run's
tags and notes; the table shows a TAGS column once a run has tags). The subcommands that change
runs (`delete`, `rename`, `note`, `tag`) are `rlvitals.runs_manage`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ..config import ExporterSettings
from ..errors import ExporterError
from ..lifecycle import Lifecycle
from ..schema import RUN_CONFIG
from .outbox import Outbox, RunRecord

__all__ = ["RunRow", "forwarder_lines", "list_runs", "register"]

_RECENT = 3600.0  # seconds a stopped forwarder's last word stays in `rlvitals runs`


@dataclass(frozen=True)
class RunRow:
    """One line of `rlvitals runs`."""

    name: str
    project: str | None
    framework: str | None
    status: str
    status_reason: str
    last_step: int | None
    """The step the run was last at (logged), which a resume can make lower than the highest."""
    stored_step: int | None
    """The highest step the store holds a value for: below `last_step` when values were
    refused (the disk budget, a full disk) or lost; None when it holds none."""
    started: float
    finished: float | None
    last_activity: float | None
    tags: tuple[str, ...] = ()
    notes: str = ""
    unsent: int | None = None
    """Rows of the run not yet sent to InfluxDB (None: the store is not sent anywhere)."""


def list_runs(
    outbox: Outbox,
    *,
    lifecycle: Lifecycle | None = None,
    now: float | None = None,
    sent: bool = False,
) -> list[RunRow]:
    """Every run in the store, oldest first; with `sent` (InfluxDB configured, or a forwarder
    has sent this store), how many rows of each wait to be sent."""
    policy = lifecycle or Lifecycle()
    at = time.time() if now is None else now
    rows = []
    for r in outbox.runs():
        status = policy.status(r.recorded, at)
        row = _row(outbox, r, str(status.status), status.reason)
        rows.append(replace(row, unsent=outbox.backlog(r.run)) if sent else row)
    return rows


def forwarder_lines(outbox: Outbox, now: float | None = None) -> list[str]:
    """What the store's forwarders said last, one line each: those that are still at it, or
    stopped in the last hour (a drain after the training exited, a forwarder that gave up)."""
    at = time.time() if now is None else now
    lines = []
    for f in outbox.forwarders():
        active = f.state in ("sending", "failing", "draining")
        if not active and at - f.updated > _RECENT:
            continue
        wait = f"{f.backlog:,} row(s) wait"
        if f.backlog and f.oldest is not None:
            wait += f", the oldest logged {_age(at - f.oldest)} ago"
        rate = "" if f.rate is None else f", {f.rate:,.0f} rows/s"
        detail = f" ({f.detail})" if f.detail else ""
        lines.append(
            f"InfluxDB forwarder pid {f.pid} on {f.host}: {f.state}{detail}, as of "
            f"{_age(at - f.updated)} ago: {f.sent:,} sent{rate}; {wait}"
        )
    return lines


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _row(outbox: Outbox, r: RunRecord, status: str, reason: str) -> RunRow:
    return RunRow(
        name=r.run,
        project=r.project,
        framework=r.framework,
        status=status,
        status_reason=reason,
        last_step=_last_step(outbox, r.run),
        stored_step=_stored_step(outbox, r.run),
        started=r.created,
        finished=r.finished,
        last_activity=r.last_activity,
        tags=r.tags,
        notes=r.notes,
    )


def _last_step(outbox: Outbox, run: str) -> int | None:
    step = outbox.last_step(run)
    if step is not None:
        return step
    # logged with ranks: the furthest any rank got
    return _stored_step(outbox, run)


def _stored_step(outbox: Outbox, run: str) -> int | None:
    steps = [s.last_step for s in outbox.stats(run) if s.measurement != RUN_CONFIG]
    return max(steps) if steps else None


def _step_cell(row: RunRow) -> str:
    if row.last_step is None:
        return "-"
    if row.stored_step is None:
        return f"{row.last_step:,} (none stored)"
    if row.stored_step < row.last_step:
        return f"{row.last_step:,} (stored to {row.stored_step:,})"
    return f"{row.last_step:,}"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "runs",
        description="List the runs of the embedded store, oldest first. Status is live, "
        "stalled (its writer runs but stored nothing for 10 minutes), quiet (a followed log "
        "stopped growing and no process writing it is seen: never pages), finished, crashed, "
        "incomplete (an import that stopped: run it again), ended or unknown; WHY says what "
        "set it.",
    )
    p.add_argument("--store", metavar="DIR", help="embedded store folder (default $RLVITALS_STORE)")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(handler=_runs)


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _runs(args: argparse.Namespace) -> int:
    try:
        settings = ExporterSettings.from_env(os.environ)
    except ExporterError as exc:
        print(f"rlvitals: error: {exc}", file=sys.stderr)
        return 2
    store = Path(args.store) if args.store else settings.store
    path = settings.replace(store=store).outbox_path
    if store.exists() and not store.is_dir():
        print(f"rlvitals: error: --store {store} is a file; pass the store folder", file=sys.stderr)
        return 2
    rows: list[RunRow] = []
    forwarders: list[str] = []
    if path.exists():
        try:
            with Outbox(path) as box:
                sent = settings.influx_url is not None or bool(box.forwarders())
                rows = list_runs(box, lifecycle=settings.lifecycle, sent=sent)
                forwarders = forwarder_lines(box)
        except ExporterError as exc:
            print(f"rlvitals: error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no runs in {path}", file=sys.stderr)
        return 0
    # a TAGS column only once a run has tags, UNSENT once rows wait for InfluxDB: a store
    # without them lists as it always did
    tagged = any(r.tags for r in rows)
    waiting = any(r.unsent for r in rows)
    head = ("RUN", "PROJECT", "FRAMEWORK", "STATUS", "LAST STEP", "STARTED (UTC)")
    table = [(*head, *(("TAGS",) if tagged else ()), *(("UNSENT",) if waiting else ()), "WHY")]
    table += [
        (
            r.name,
            r.project or "-",
            r.framework or "-",
            r.status,
            _step_cell(r),
            _when(r.started),
            *((",".join(r.tags) or "-",) if tagged else ()),
            *((f"{r.unsent or 0:,}",) if waiting else ()),
            r.status_reason,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for line in forwarders:
        print(line)
    return 0
