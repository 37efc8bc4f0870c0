"""A run's life as recorded: `live`, `stalled`, `quiet`, `finished`, `crashed`, `incomplete`,
`ended`, `unknown`, each with the reason that set it.

One definition, read by everything that shows or alerts on a run's state: the datasource's run
list, `rlvitals runs`, the exporter's `/metrics` (`rlvitals_run_status`), the generated alert
rules and `tail`. What it reads was recorded when it happened:

- a **recorded end** (`Recorded.state`): `finished` (the run said so: `finish()`, SB3's `learn()`
  returning, HF's `on_train_end`, an import that reached the planned length), `crashed` (an
  exception seen by the context manager or the process's excepthook, with its type and message),
  `ended` (a log whose end was read without learning how the run ended);
- the **writer lease** (`lease.py`): a process logging the run holds it and renews it. A lease
  whose holder is gone (the process exited without recording an end: `kill -9`, out of memory)
  reads `crashed`, or `incomplete` for an import, which the same command goes on with;
- **arrival on the store's clock** (`Recorded.arrived`): when rows last reached the store, never
  the trainer's `wall_time` (a training host whose clock is off must not read stalled or live).

A run **several ranks** log (`exporter.job`: the ranks of one job are one run) has a lease and
an end per rank (`RankRecord`), and its life is theirs together: `crashed` as soon as one rank
crashed or its process is gone without an end (that rank is named), `live` (or `stalled`) while
any rank holds the run, `finished` once every rank finished (`ended` if one was stopped by
hand). A rank's end reaches InfluxDB as a `RANK_END` event (`exporter.schema`), so a reader of
InfluxDB, which keeps no leases, tells the same from the ranks' ends and their points.

`stalled` needs a live writer: a training process that holds the lease and has stored nothing
for `stall_after_s`. History nobody holds (an import, a followed log that was quiet when first
seen, a run whose writer left no record) reads `ended` once quiet, so it never pages.

A follower (`tail`, `serve LOGDIR`) holding a run's lease is not its trainer: that it lives says
nothing about the training. A followed run that went quiet is `stalled` only when the follower
saw the process writing its logs on its own host and that process still runs and holds a log
open for writing (`Lease.writer`); otherwise it is `quiet` — hung, paused, or over, the logs
cannot tell — which is shown and never pages. How a followed run ended, where its logs or its
writer's process say so, the follower records as an end (`exporter/ingest/followed_end.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from .lease import Holder, Lease, holder_alive, holder_state
from .processes import describe_exit

__all__ = [
    "TERMINAL_STATES",
    "Lifecycle",
    "RankRecord",
    "Recorded",
    "RunStatus",
    "Status",
    "gone_without_end",
]


class RunStatus(StrEnum):
    LIVE = "live"
    STALLED = "stalled"
    QUIET = "quiet"
    FINISHED = "finished"
    CRASHED = "crashed"
    INCOMPLETE = "incomplete"
    ENDED = "ended"
    UNKNOWN = "unknown"


TERMINAL_STATES = frozenset({"finished", "crashed", "ended"})
"""Recorded ends (`runs.state`); besides them the store records `importing` while an import
runs (a run left so by a dead importer is `incomplete`)."""


@dataclass(frozen=True)
class RankRecord:
    """One rank of a run logged by several (`exporter.job`): its recorded end (`state`:
    finished, crashed, ended; None while it has none) and its writer lease while it holds one.
    InfluxDB keeps no leases: a rank it knows from its points alone has neither."""

    rank: int
    state: str | None = None
    reason: str | None = None
    state_at: float | None = None
    lease: Lease | None = None


@dataclass(frozen=True)
class Recorded:
    """What the store recorded about a run's life (all times Unix seconds, store clock)."""

    state: str | None = None
    reason: str | None = None
    state_at: float | None = None
    arrived: float | None = None
    """When rows of the run last reached the store."""
    lease: Lease | None = None
    ranks: tuple[RankRecord, ...] = ()
    """A run several ranks log: each rank's end and lease. The run's life is then theirs
    together (`Lifecycle.status`), and `state`/`lease` are not read."""


@dataclass(frozen=True)
class Status:
    status: RunStatus
    reason: str
    since: float | None = None
    """When the status began, where known (the recorded end, the last arrival)."""


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Lifecycle:
    """How long a writer may store nothing before its run is stalled, when history nobody holds
    counts as ended, and the writer lease's timing.

    10 minutes: longer than a checkpoint save or an evaluation pass of a typical job (which log
    nothing while they run), short enough that a hung job is noticed within a coffee break.
    1 hour: how long a crash alert stays raised, and how long a followed log may stay quiet
    before its sidecar records it ended. The lease is renewed every 15 s and trusted for 60 s
    when its holder is on another host (four missed renewals: a busy disk, not a dead writer).
    """

    stall_after_s: float = 600.0
    ended_after_s: float = 3600.0
    lease_ttl_s: float = 60.0
    renew_every_s: float = 15.0

    def __post_init__(self) -> None:
        if not 0 < self.stall_after_s < self.ended_after_s:
            raise ValueError(
                f"lifecycle windows must satisfy 0 < stall_after_s ({self.stall_after_s}) < "
                f"ended_after_s ({self.ended_after_s})"
            )
        if not 0 < self.renew_every_s < self.lease_ttl_s:
            raise ValueError(
                f"lease timing must satisfy 0 < renew_every_s ({self.renew_every_s}) < "
                f"lease_ttl_s ({self.lease_ttl_s})"
            )

    def holder_alive(self, lease: Lease, now: float | None = None) -> bool:
        return holder_alive(lease, time.time() if now is None else now, self.lease_ttl_s)

    def status(
        self,
        recorded: Recorded,
        now: float | None = None,
        *,
        alive: Callable[[Lease], bool] | None = None,
    ) -> Status:
        """The run's status now; `alive` overrides how a lease's holder is checked (a process
        judging its own run knows it is alive)."""
        at = time.time() if now is None else now
        if recorded.ranks:
            return self._ranked(recorded, at, alive)
        state, reason = recorded.state, recorded.reason
        if state in TERMINAL_STATES:
            return Status(RunStatus(state), reason or f"recorded {state}", recorded.state_at)
        lease = recorded.lease
        if lease is not None:
            living = alive(lease) if alive is not None else self.holder_alive(lease, at)
            if not living:
                who = lease.holder.describe()
                if lease.kind == "tail":
                    # the reader of the run's logs died (kill -9, out of memory), not the
                    # training: the logs say nothing about how the run is doing
                    return Status(
                        RunStatus.UNKNOWN,
                        f"the reader following its logs ({who}) stopped without letting go of "
                        "it; start `rlvitals tail` again to follow it",
                        lease.renewed,
                    )
                if state == "importing" or lease.kind == "import":
                    return Status(
                        RunStatus.INCOMPLETE,
                        f"the import by {who} stopped before the end of its logs; running the "
                        "same command again goes on with this run from where it stopped",
                        lease.renewed,
                    )
                return Status(RunStatus.CRASHED, gone_without_end(lease.holder), lease.renewed)
        elif state == "importing":
            return Status(
                RunStatus.INCOMPLETE,
                reason
                or "an import stopped before the end of its logs; running the same "
                "command again goes on with this run",
                recorded.state_at,
            )
        activity = recorded.arrived
        if activity is None and lease is not None:
            activity = lease.since
        if activity is None:
            return Status(RunStatus.UNKNOWN, "nothing about this run's activity was recorded")
        quiet = at - activity
        if quiet < self.stall_after_s:
            return Status(RunStatus.LIVE, reason or "rows arrived recently", activity)
        if lease is not None and lease.kind == "tail":
            return _followed_quiet(lease, quiet, activity)
        if lease is not None:
            return Status(
                RunStatus.STALLED,
                f"{lease.holder.describe()} holds the run but stored nothing for "
                f"{_duration(quiet)}: hung, or paused",
                activity,
            )
        return Status(
            RunStatus.ENDED,
            f"nothing arrived for {_duration(quiet)} and no process holds the run; how it "
            "ended was not recorded",
            activity,
        )

    def _ranked(
        self, recorded: Recorded, at: float, alive: Callable[[Lease], bool] | None
    ) -> Status:
        """The life of a run several ranks log: crashed as soon as one rank crashed or died
        without an end (the first such rank named), live or stalled while a rank holds it,
        finished once every rank finished (ended when one was stopped by hand)."""
        ranks = sorted(recorded.ranks, key=lambda r: r.rank)
        total = len(ranks)
        died: list[tuple[RankRecord, str, float | None]] = []
        holding: list[Lease] = []
        open_ended = False  # a rank with neither an end nor a lease (InfluxDB knows no leases)
        for r in ranks:
            if r.state in TERMINAL_STATES:
                if r.state == "crashed":
                    died.append((r, r.reason or "recorded crashed", r.state_at))
                continue
            if r.lease is None:
                open_ended = True
                continue
            living = alive(r.lease) if alive is not None else self.holder_alive(r.lease, at)
            if living:
                holding.append(r.lease)
            else:
                died.append((r, gone_without_end(r.lease.holder), r.lease.renewed))
        if died:
            first, why, since = died[0]
            others = ", ".join(str(d[0].rank) for d in died[1:])
            also = f" (rank(s) {others} too)" if others else ""
            return Status(RunStatus.CRASHED, f"rank {first.rank}{also}: {why}", since)
        activity = recorded.arrived
        if holding or open_ended:
            if activity is None:
                activity = min((lease.since for lease in holding), default=None)
            if activity is None:
                return Status(RunStatus.UNKNOWN, "nothing about this run's activity was recorded")
            quiet = at - activity
            running = f"{len(holding)} of {total} rank(s) hold the run"
            if quiet < self.stall_after_s:
                return Status(RunStatus.LIVE, f"{running}; rows arrived recently", activity)
            if holding:
                return Status(
                    RunStatus.STALLED,
                    f"{running} ({holding[0].holder.describe()} first) but stored nothing "
                    f"for {_duration(quiet)}: hung, or paused",
                    activity,
                )
            done = sum(1 for r in ranks if r.state in TERMINAL_STATES)
            return Status(
                RunStatus.ENDED,
                f"nothing arrived for {_duration(quiet)}; {done} of {total} rank(s) recorded "
                "an end, how the others ended was not recorded",
                activity,
            )
        ended_at = max((r.state_at for r in ranks if r.state_at is not None), default=None)
        stopped = [r for r in ranks if r.state == "ended"]
        if stopped:
            first = stopped[0]
            return Status(
                RunStatus.ENDED,
                f"rank {first.rank}: {first.reason or 'recorded ended'}",
                ended_at,
            )
        return Status(RunStatus.FINISHED, f"all {total} rank(s) finished", ended_at)


def gone_without_end(holder: Holder) -> str:
    """Why a writer whose lease is left and whose process is gone stopped, as far as this
    host's process table says (a zombie's exit status), for the run's crash reason."""
    who = holder.describe()
    state = holder_state(holder)
    if state is not None and state.state == "zombie":
        how = f" ({describe_exit(state.exit)})" if state.exit is not None else ""
        # what was seen, not a prediction: a launcher that waits a moment late reaps it after
        return (
            f"{who} exited{how} without recording an end; its parent had not reaped it when "
            "this was seen (a zombie: a launcher that does not wait for it, or has not yet)"
        )
    return (
        f"{who} stopped without recording an end (no finish(), no exception seen): killed, "
        "out of memory, or its host went down"
    )


def _followed_quiet(lease: Lease, quiet: float, activity: float) -> Status:
    """A followed run whose logs stopped growing, its follower alive: stalled only when the
    process writing the logs is seen running and holding one open for writing."""
    writer = lease.writer
    waited = _duration(quiet)
    if writer is not None:
        state = holder_state(writer)
        if state is not None and state.running and lease.writer_open:
            return Status(
                RunStatus.STALLED,
                f"{writer.describe()}, which writes its logs, still runs and holds them open, "
                f"but they have not grown for {waited}: hung, or paused",
                activity,
            )
        if state is not None and state.running:
            why = (
                f"{writer.describe()}, which wrote its logs, closed them and still runs; they "
                f"have not grown for {waited}"
            )
        elif state is not None:
            why = (
                f"{writer.describe()}, which wrote its logs, is gone; the follower records how "
                "the run ended at its next look"
            )
        else:
            why = f"its logs have not grown for {waited}; their writer is on another host"
    else:
        why = (
            f"its logs have not grown for {waited} and no process on this host holds them open "
            "for writing (the trainer is on another host or in another container, or opens its "
            "log only to write): hung, paused or over cannot be told from the logs"
        )
    return Status(RunStatus.QUIET, why, activity)
