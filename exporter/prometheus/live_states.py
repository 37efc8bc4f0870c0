"""Live alert states for Prometheus: `rlvitals_alert_active{run,metric,severity,condition}` and the
multi-metric rules' states for `rlvitals_rule_active`, computed from the exporter's outbox.

Each registry alert fires when its condition held at the last `for_steps` logged points in a row
(counted in step space by `registry.diagnosis`), so Grafana's rules only compare 0/1 gauges. The
collector reads the outbox the exporter writes (never InfluxDB), on each scrape, a bounded tail of
each alerted metric plus the early-stage points a relative threshold needs.

Plug it into an exporter endpoint with `attach(endpoint, registry, outbox_path)`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from registry import Registry
from registry.diagnosis.bands import EARLY_FALLBACK_POINTS, alert_states
from registry.diagnosis.rules import RuleContext, evaluate_rule
from registry.diagnosis.stats import Series

from ..store.outbox import Outbox
from .metrics_endpoint import MetricsEndpoint, RuleState

__all__ = ["ALERT_GAUGE", "AlertStateCollector", "MetricAlertState", "attach"]

ALERT_GAUGE = "rlvitals_alert_active"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricAlertState:
    run: str
    metric: str
    severity: str
    condition: str
    active: bool
    consecutive: int
    threshold: float | None


def _stride(steps: np.ndarray[Any, np.dtype[np.int64]]) -> int:
    if steps.size < 2:
        return 1
    return max(1, int(np.median(np.diff(steps[-32:]))))


class AlertStateCollector(Collector):
    """A Prometheus collector over the outbox at `outbox_path`; `runs` names the runs to judge
    (default: every run in the outbox)."""

    def __init__(
        self,
        registry: Registry,
        outbox_path: Path | str,
        runs: Callable[[], Iterable[str]] | None = None,
        max_age: float = 1.0,
    ) -> None:
        self._reg = registry
        self._path = Path(outbox_path)
        self._runs = runs
        self._alerted = tuple(m for m in registry.metrics if m.alerts)
        self._max_age = max_age
        self._lock = threading.Lock()
        self._memo: tuple[float, tuple[list[MetricAlertState], list[RuleState]]] | None = None

    def describe(self) -> Iterable[Metric]:
        return []

    def _run_names(self, outbox: Outbox) -> list[str]:
        if self._runs is not None:
            return sorted(set(self._runs()))
        return [r.run for r in outbox.runs()]

    def _needs(self) -> dict[str, tuple[int, int]]:
        """Per field: (steps of window its rules read, points its alerts and rules count back)."""
        needs: dict[str, tuple[int, int]] = {}
        for m in self._alerted:
            w, n = needs.get(m.id, (0, 0))
            needs[m.id] = (w, max(n, *(a.for_steps for a in m.alerts)))
        for r in self._reg.rules:
            for f in r.metrics:
                w, n = needs.get(f, (0, 0))
                needs[f] = (max(w, r.window), max(n, r.for_steps))
        return needs

    def _series(
        self, outbox: Outbox, run: str, field: str, last: int, need: tuple[int, int]
    ) -> Series:
        """Early-stage points (for relative thresholds) and enough of the tail, merged."""
        early_end = self._reg.stages.early_end
        s1, v1 = outbox.series(run, field, end=early_end - 1)
        if s1.size == 0:
            s1, v1 = outbox.series(run, field, end=None)
            s1, v1 = s1[:EARLY_FALLBACK_POINTS], v1[:EARLY_FALLBACK_POINTS]
        window, points = need
        s2, v2 = outbox.series(run, field, start=max(0, last - 8 * (window + points + 1)))
        if s2.size and s2.size < points + 1 and int(s2[0]) > 0:
            s2, v2 = outbox.series(run, field)
        elif s2.size > points + 1:
            stride = _stride(s2)
            keep = s2 >= last - window - (points + 1) * stride
            s2, v2 = s2[keep], v2[keep]
        steps = np.concatenate([s1, s2])
        values = np.concatenate([v1, v2])
        steps, idx = np.unique(steps, return_index=True)
        return Series(steps.astype(np.int64), values[idx].astype(np.float64))

    def read(self) -> tuple[list[MetricAlertState], list[RuleState]]:
        """Every alert's and every rule's current state, per run (one scrape computes it once:
        results younger than `max_age` seconds are reused)."""
        with self._lock:
            now = time.monotonic()
            if self._memo is not None and now - self._memo[0] < self._max_age:
                return self._memo[1]
            result = self._read()
            self._memo = (time.monotonic(), result)
            return result

    def _read(self) -> tuple[list[MetricAlertState], list[RuleState]]:
        alerts: list[MetricAlertState] = []
        rules: list[RuleState] = []
        if not self._path.exists():
            return alerts, rules
        outbox = Outbox(self._path)
        try:
            for run in self._run_names(outbox):
                record = outbox.run(run)
                config: Mapping[str, Any] = dict(record.config) if record else {}
                latest = outbox.latest(run)
                needs = self._needs()
                series = {
                    f: self._series(outbox, run, f, latest[f][0], need)
                    for f, need in needs.items()
                    if f in latest
                }
                alerts += self._alerts(run, series, config)
                rules += self._rules(run, series, config)
        finally:
            outbox.close()
        return alerts, rules

    def _alerts(
        self, run: str, series: Mapping[str, Series], config: Mapping[str, Any]
    ) -> list[MetricAlertState]:
        out = []
        stages = self._reg.stages_for(config)
        for m in self._alerted:
            s = series.get(m.id)
            if s is None:
                continue
            need = max(a.for_steps for a in m.alerts)
            early = s.before(stages.early_end)
            if not len(early):
                early = Series(s.steps[:EARLY_FALLBACK_POINTS], s.values[:EARLY_FALLBACK_POINTS])
            early_value = float(early.values.mean()) if len(early) else None
            for st in alert_states(m, s.tail(need), config, early_value):
                out.append(
                    MetricAlertState(
                        run,
                        m.id,
                        st.alert.severity,
                        st.alert.condition,
                        st.active,
                        st.consecutive,
                        st.threshold,
                    )
                )
        return out

    def _rules(
        self, run: str, series: Mapping[str, Series], config: Mapping[str, Any]
    ) -> list[RuleState]:
        ctx = RuleContext.of(self._reg, config)
        out = []
        for rule in self._reg.rules:
            present = {m: series[m] for m in rule.metrics if m in series}
            fired = len(present) == len(rule.metrics) and evaluate_rule(rule, present, ctx).fired
            out.append(RuleState(run, rule.id, rule.severity, fired))
        return out

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            ALERT_GAUGE,
            "1 while a registry alert holds for its for_steps consecutive logged steps, else 0.",
            labels=["run", "metric", "severity", "condition"],
        )
        try:
            alerts, _ = self.read()
        except Exception as exc:  # a broken store must not break the scrape
            _log.warning("rlvitals alert states unavailable: %s", exc)
            alerts = []
        # a metric may declare several alerts of one severity and condition (entropy's, scoped by
        # action space; KL's relative and absolute ones): one series each, active if any is
        merged: dict[tuple[str, str, str, str], bool] = {}
        for a in alerts:
            key = (a.run, a.metric, a.severity, a.condition)
            merged[key] = merged.get(key, False) or a.active
        for key, active in merged.items():
            gauge.add_metric(list(key), 1.0 if active else 0.0)
        yield gauge

    def rule_states(self) -> list[RuleState]:
        """For `MetricsEndpoint.set_rule_states`: the multi-metric rules' states."""
        return self.read()[1]


def attach(
    endpoint: MetricsEndpoint, registry: Registry, outbox_path: Path | str
) -> AlertStateCollector:
    """Serve alert and rule states on `endpoint` for the runs it serves."""

    def runs() -> list[str]:
        return [source.live().run for source in endpoint.sources()]

    collector = AlertStateCollector(registry, outbox_path, runs)
    endpoint.registry.register(collector)
    endpoint.set_rule_states(collector.rule_states)
    return collector
