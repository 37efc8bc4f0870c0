"""The Prometheus `/metrics` endpoint: live per-run gauges on the endpoint's own CollectorRegistry.

Series (all labelled by `run`): `rlvitals_metric{run,metric,gpu}` (latest value of each registry
metric; `gpu` is empty for metrics without one), `rlvitals_step`, `rlvitals_steps_per_second`,
`rlvitals_last_write_age_seconds`, `rlvitals_outbox_backlog` (rows not yet sent to InfluxDB),
`rlvitals_outbox_backlog_oldest_age_seconds` (how long the oldest of them has waited),
`rlvitals_forward_rate_rows_per_second` (what the forwarder sent lately), `rlvitals_queue_depth`,
`rlvitals_write_errors_total`, `rlvitals_rejected_samples_total`, `rlvitals_dropped_samples_total`,
`rlvitals_refused_samples_total`, `rlvitals_dropped_total{run,reason}` (the dropped samples by
reason: queue_full, finished, translate_error, store_error, worker_error, unfinished,
server_rejected), `rlvitals_nonfinite_samples_total{run,metric}`,
`rlvitals_last_activity_timestamp_seconds` (the trainer's wall time of its latest step: data),
`rlvitals_run_finished`, `rlvitals_run_status{run,status,reason}` (1 for the run's current status
from `Lifecycle`, the one definition: the generated "Training stalled" and "Run crashed" rules
read it), `rlvitals_writer_heartbeat_timestamp_seconds{run}` (served by a training process for
its own run: the time of the scrape while it has recorded no end, 0 once it has; when it stops
answering with a nonzero last value, it is gone without an end: "Run crashed" reads it), and
`rlvitals_rule_active{run,rule,severity}` (1 while a diagnosis rule fires, from a pluggable callable).

A training process's endpoint waits at its end (`linger`) for one more scrape, so Prometheus
reads the end before the process (and its series) go away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..counts import LiveState
from ..lifecycle import RunStatus, Status

__all__ = [
    "HEARTBEAT_GAUGE",
    "STATUS_GAUGE",
    "LiveSource",
    "MetricsEndpoint",
    "RuleState",
    "RuleStates",
    "add_status",
    "status_family",
]

STATUS_GAUGE = "rlvitals_run_status"
HEARTBEAT_GAUGE = "rlvitals_writer_heartbeat_timestamp_seconds"


def status_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        STATUS_GAUGE,
        "1 for the run's current status (live, stalled, quiet, finished, crashed, incomplete, "
        "ended, unknown) as recorded, with the reason that set it.",
        labels=["run", "status", "reason"],
    )


def add_status(family: GaugeMetricFamily, run: str, status: Status) -> None:
    # One series per run, for its current status only, so a change of status ends the old
    # series. The reason is a label only where its text is fixed (a crash's exception, a dead
    # writer): a reason that counts minutes would start a new series, and alert, every minute.
    fixed = status.status in (RunStatus.CRASHED, RunStatus.INCOMPLETE)
    family.add_metric([run, str(status.status), status.reason[:200] if fixed else ""], 1.0)


_log = logging.getLogger(__name__)
_ANSWER_GRACE_S = 0.2
"""After the scrape that carries a run's end is collected, how long `linger` waits for the
server thread to send it (a local write of a few kilobytes; 0.2 s covers a loaded machine)."""


@dataclass(frozen=True)
class RuleState:
    """One diagnosis rule's state for one run (the diagnosis engine provides these)."""

    run: str
    rule: str
    severity: str
    active: bool


RuleStates = Callable[[], Iterable[RuleState]]
StoreStatuses = Callable[[], Iterable[tuple[str, Status]]]


class LiveSource(Protocol):
    """Anything with a `live()` snapshot; `exporter.Run` is one."""

    def live(self) -> LiveState: ...


class _RunCollector(Collector):
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self._endpoint = endpoint

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        states: list[LiveState] = []
        for source in self._endpoint.sources():
            try:
                states.append(source.live())
            except Exception as exc:  # a broken source must not break the scrape
                _log.warning("rlvitals metrics: cannot read a run's state: %s", exc)
        metric = GaugeMetricFamily(
            "rlvitals_metric",
            "Latest value of each registry metric, by canonical id (metric) and GPU (gpu, may be empty).",
            labels=["run", "metric", "gpu"],
        )
        step = GaugeMetricFamily("rlvitals_step", "Latest training step logged.", labels=["run"])
        rate = GaugeMetricFamily(
            "rlvitals_steps_per_second",
            "Training steps per second over the last logged steps.",
            labels=["run"],
        )
        age = GaugeMetricFamily(
            "rlvitals_last_write_age_seconds",
            "Seconds since samples were last stored (InfluxDB when configured, else the outbox).",
            labels=["run"],
        )
        activity = GaugeMetricFamily(
            "rlvitals_last_activity_timestamp_seconds",
            "Wall time (Unix seconds) of the latest step the run logged.",
            labels=["run"],
        )
        finished = GaugeMetricFamily(
            "rlvitals_run_finished", "1 once the run has been finished, else 0.", labels=["run"]
        )
        statuses = status_family()
        heartbeat = GaugeMetricFamily(
            HEARTBEAT_GAUGE,
            "Served by the process writing the run: the Unix time of this scrape while the run "
            "has recorded no end, 0 once it has (its last value before it stopped answering "
            "tells a writer gone without an end).",
            labels=["run"],
        )
        backlog = GaugeMetricFamily(
            "rlvitals_outbox_backlog", "Outbox rows not yet sent to InfluxDB.", labels=["run"]
        )
        queue = GaugeMetricFamily(
            "rlvitals_queue_depth", "log() calls waiting for the worker thread.", labels=["run"]
        )
        counters: dict[str, tuple[CounterMetricFamily, Callable[[LiveState], int]]] = {
            "write_errors": (
                CounterMetricFamily(
                    "rlvitals_write_errors", "Failed InfluxDB writes.", labels=["run"]
                ),
                lambda s: s.stats.write_errors,
            ),
            "rejected": (
                CounterMetricFamily(
                    "rlvitals_rejected_samples",
                    "Samples refused for bad input (step, type, limits, unknown name under drop).",
                    labels=["run"],
                ),
                lambda s: s.stats.rejected,
            ),
            "dropped": (
                CounterMetricFamily(
                    "rlvitals_dropped_samples",
                    "Samples lost because the queue was full or the run was finished.",
                    labels=["run"],
                ),
                lambda s: s.stats.dropped,
            ),
            "refused": (
                CounterMetricFamily(
                    "rlvitals_refused_samples",
                    "Samples refused because the outbox reached its disk budget.",
                    labels=["run"],
                ),
                lambda s: s.stats.refused_disk,
            ),
        }
        nonfinite = CounterMetricFamily(
            "rlvitals_nonfinite_samples",
            "NaN or Inf values received (never written), by canonical metric id.",
            labels=["run", "metric"],
        )
        dropped = CounterMetricFamily(
            "rlvitals_dropped",
            "Samples and events accepted by log()/event() but not stored, by reason.",
            labels=["run", "reason"],
        )
        rules = GaugeMetricFamily(
            "rlvitals_rule_active",
            "1 while a diagnosis rule fires for a run, 0 otherwise.",
            labels=["run", "rule", "severity"],
        )
        oldest = GaugeMetricFamily(
            "rlvitals_outbox_backlog_oldest_age_seconds",
            "Seconds since the oldest outbox row not yet sent to InfluxDB was logged.",
            labels=["run"],
        )
        forward_rate = GaugeMetricFamily(
            "rlvitals_forward_rate_rows_per_second",
            "Rows per second the forwarder sent to InfluxDB over about the last minute.",
            labels=["run"],
        )
        for s in states:
            if s.backlog_oldest_age is not None:
                oldest.add_metric([s.run], s.backlog_oldest_age)
            if s.forward_rate is not None:
                forward_rate.add_metric([s.run], s.forward_rate)
            for (field, gpu), value in sorted(s.latest.items()):
                metric.add_metric([s.run, field, gpu], value)
            if s.step is not None:
                step.add_metric([s.run], float(s.step))
            if s.steps_per_second is not None:
                rate.add_metric([s.run], s.steps_per_second)
            if s.last_write_age is not None:
                age.add_metric([s.run], s.last_write_age)
            if s.last_activity is not None:
                activity.add_metric([s.run], s.last_activity)
            finished.add_metric([s.run], 1.0 if s.finished else 0.0)
            if s.status is not None:
                add_status(statuses, s.run, s.status)
            if s.writer:
                heartbeat.add_metric([s.run], 0.0 if s.finished else time.time())
            backlog.add_metric([s.run], float(s.backlog))
            queue.add_metric([s.run], float(s.queue_depth))
            for family, read in counters.values():
                family.add_metric([s.run], float(read(s)))
            for field, count in sorted(s.stats.nonfinite.items()):
                nonfinite.add_metric([s.run, field], float(count))
            reasons = dict(s.stats.dropped_by_reason)
            if s.stats.server_rejected:
                reasons["server_rejected"] = s.stats.server_rejected
            for reason, count in sorted(reasons.items()):
                dropped.add_metric([s.run, reason], float(count))
        served = {s.run for s in states}
        for run, status in self._endpoint.store_statuses():
            if run not in served:
                add_status(statuses, run, status)
        for rule in self._endpoint.rule_states():
            rules.add_metric([rule.run, rule.rule, rule.severity], 1.0 if rule.active else 0.0)
        yield from (metric, step, rate, age, activity, finished, statuses, heartbeat)
        yield from (backlog, queue)
        yield from (oldest, forward_rate)
        yield from (family for family, _ in counters.values())
        yield from (nonfinite, dropped, rules)
        # counted once its answer is whole, not when it began: `linger` lets a process exit
        # after the scrape that carries its end, which must have been read before that
        self._endpoint.scraped()


class MetricsEndpoint:
    """Serves `/metrics` for the runs added to it, on its own registry and port (0 = any free)."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, rule_states: RuleStates | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self._sources: list[LiveSource] = []
        self._lock = threading.Lock()
        self._rule_states = rule_states
        self._store_statuses: StoreStatuses | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._scrapes: list[float] = []  # monotonic times of the last two scrapes
        self._scraped = threading.Condition()
        self.registry.register(_RunCollector(self))

    def scraped(self) -> None:
        """A scrape (or a render) has been answered: its metrics are all collected."""
        with self._scraped:
            self._scrapes = [*self._scrapes[-1:], time.monotonic()]
            self._scraped.notify_all()

    def linger(self, longest: float) -> bool:
        """Wait for the next scrape, when something scraped this endpoint before: at most one
        scrape interval and a half as measured (`longest` seconds at most, and when only one
        scrape was seen). True when a scrape came (or none is expected)."""
        with self._scraped:
            if not self._scrapes or self._server is None or longest <= 0:
                return True
            seen = self._scrapes[-1]
            if len(self._scrapes) == 2:
                wait = min(longest, 1.5 * (self._scrapes[1] - self._scrapes[0]) + 1.0)
            else:
                wait = longest
            came = self._scraped.wait_for(lambda: self._scrapes[-1] > seen, timeout=wait)
        if came:
            # the answer is built; let the server thread write it before the process exits
            time.sleep(_ANSWER_GRACE_S)
        return came

    def add(self, source: LiveSource) -> None:
        with self._lock:
            self._sources.append(source)

    def remove(self, source: LiveSource) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s is not source]

    def sources(self) -> list[LiveSource]:
        with self._lock:
            return list(self._sources)

    def set_rule_states(self, rule_states: RuleStates | None) -> None:
        """Plug in the diagnosis engine: a callable returning the current RuleStates."""
        self._rule_states = rule_states

    def set_store_statuses(self, statuses: StoreStatuses | None) -> None:
        """Plug in the statuses of runs other processes write to the store (a sidecar pages
        for them too): a callable returning (run, Status) pairs."""
        self._store_statuses = statuses

    def store_statuses(self) -> list[tuple[str, Status]]:
        if self._store_statuses is None:
            return []
        try:
            return list(self._store_statuses())
        except Exception as exc:  # a broken store must not break the scrape
            _log.warning("rlvitals metrics: run statuses of the store unavailable: %s", exc)
            return []

    def rule_states(self) -> list[RuleState]:
        if self._rule_states is None:
            return []
        try:
            return list(self._rule_states())
        except Exception as exc:
            _log.warning("rlvitals metrics: rule states unavailable: %s", exc)
            return []

    def render(self) -> bytes:
        """The exposition text a scrape would get."""
        return generate_latest(self.registry)

    def start(self) -> int:
        """Start serving; returns the bound port."""
        if self._server is None:
            self._server, self._thread = start_http_server(
                self.port, addr=self.host, registry=self.registry
            )
            self.port = int(self._server.server_port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
