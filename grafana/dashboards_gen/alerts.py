"""Grafana-managed alert rules (file provisioning) generated from the registry.

One rule per registry alert (`rlvitals_alert_active`, where the diagnosis engine has counted the
consecutive steps), one per multi-metric rule (`rlvitals_rule_active`), plus "training stalled"
(the step gauge did not change for a wall-clock window) and "exporter unhealthy" (write errors,
a growing outbox backlog, or a scrape target down). Every rule is A (PromQL, instant) -> B (last)
-> C (B > 0.5), with a relative time range on A.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from exporter.lifecycle import Lifecycle, RunStatus
from exporter.prometheus.live_states import ALERT_GAUGE
from exporter.prometheus.metrics_endpoint import HEARTBEAT_GAUGE, STATUS_GAUGE
from grafana.alert_webhook import SECRET_SETTING, SIGNATURE_HEADER, TIMESTAMP_HEADER
from registry import Alert, Metric, Registry, Rule

from .describe import term_url
from .sources import EXPR, PROMETHEUS

__all__ = [
    "ALERT_FOLDER",
    "EXPORTER_COUNTERS",
    "EXPORTER_JOB",
    "Timing",
    "alert_files",
    "alert_rule_groups",
    "metric_alert_expr",
    "rule_alert_expr",
]

ALERT_FOLDER = "RL vitals"
EXPORTER_JOB = "rlvitals-exporter"
_MAX_UID = 40
_CONTACT = "rlvitals-default"


@dataclass(frozen=True)
class Timing:
    """Wall-clock settings: evaluation interval, look-back of queries, health window, and the run
    lifecycle (`exporter.Lifecycle`, the one definition of stalled and ended runs)."""

    interval: str = "1m"
    lookback_seconds: int = 600
    unhealthy: str = "10m"
    backlog_growth: int = 1000
    lifecycle: Lifecycle = field(default_factory=Lifecycle)


def _uid(*parts: str) -> str:
    raw = "-".join(parts)
    clean = re.sub(r"[^A-Za-z0-9_-]", "-", raw)
    if len(clean) <= _MAX_UID:
        return clean
    digest = hashlib.sha1(raw.encode()).hexdigest()[:8]
    return clean[: _MAX_UID - 9] + "-" + digest


EXPORTER_COUNTERS = {"nonfinite_count": "rlvitals_nonfinite_samples_total"}
"""Registry counters the exporter keeps itself (never stored as a field): their alerts read the
exporter's Prometheus counter over the look-back window, against the registry's threshold."""


def metric_alert_expr(
    metric: Metric, alert: Alert, timing: Timing = Timing(), benign: Sequence[str] = ()
) -> str:
    """`benign`: metrics whose non-finite values are facts about the data
    (`limits.undefined_when_constant`), left out of the non-finite counter."""
    counter = EXPORTER_COUNTERS.get(metric.id)
    if counter is not None:
        if benign:
            counter += '{metric!~"' + "|".join(sorted(benign)) + '"}'
        return f"sum by (run) {_increase(counter, f'{timing.lookback_seconds}s')}"
    return (
        f'max by (run) ({ALERT_GAUGE}{{metric="{metric.id}", severity="{alert.severity}", '
        f'condition="{alert.condition}"}})'
    )


def rule_alert_expr(rule: Rule) -> str:
    return f'max by (run) (rlvitals_rule_active{{rule="{rule.id}"}})'


def _increase(series: str, window: str) -> str:
    """Growth over the window, counting a series that appeared inside it from zero (a counter
    first seen at 1 has grown, which `increase()` misses)."""
    return f"({series} - ({series} offset {window} or {series} * 0))"


def _seconds(value: float) -> str:
    return f"{value:g}"


def status_expr(status: RunStatus, by: str = "run") -> str:
    """1 for each run whose recorded status (`exporter.Lifecycle`, served as
    `rlvitals_run_status`) is `status`."""
    return f'max by ({by}) ({STATUS_GAUGE}{{status="{status}"}})'


WRITER_GONE = (
    "no samples: the training process serving this run's /metrics stopped answering (its "
    "target is down or gone) without recording an end: killed, out of memory, or its host "
    "went down"
)
"""The reason a crash read from a vanished self-served target carries (a fixed text: a label)."""


def _newest(selector: str, window: str) -> str:
    """Per run, the time of the newest sample of `selector` within `window` (a subquery every
    15 s: `timestamp` of a selector is its sample's time)."""
    return f"max by (run) (max_over_time(timestamp({selector})[{window}:15s]))"


def crashed_expr(timing: Timing) -> str:
    """1 (or, for a writer gone, when it last answered) for each run, with its reason:

    - a `crashed` status served in the last `ended_after_s` (a training process serving its own
      /metrics answers only until it exits: the crash it recorded is held from its last scrape),
      unless the run was served with another status since (it was resumed);
    - a run whose own training process served `rlvitals_writer_heartbeat_timestamp_seconds`
      with no end recorded at its last scrape, and serves nothing now, nor anyone a status for
      its run since: the process is gone without an end (`kill -9`, out of memory, a zombie: a
      dead process answers no scrape)."""
    window = f"{timing.lifecycle.ended_after_s:g}s"
    crashed = f'{STATUS_GAUGE}{{status="crashed"}}'
    other = f'{STATUS_GAUGE}{{status!="crashed"}}'
    recorded = (
        f"last_over_time({crashed}[{window}]) unless on (run) "
        f"({_newest(other, window)} > on (run) {_newest(crashed, window)})"
    )
    gone = (
        f"(last_over_time({HEARTBEAT_GAUGE}[{window}]) > 0) unless on (run) {HEARTBEAT_GAUGE} "
        f"unless on (run) ({_newest(STATUS_GAUGE, window)} > on (run) "
        f"{_newest(HEARTBEAT_GAUGE, window)})"
    )
    labelled = f'label_replace({gone}, "reason", "{WRITER_GONE}", "", "")'
    return f"max by (run, reason) ({recorded} or {labelled})"


def unhealthy_expr(timing: Timing) -> str:
    w = timing.unhealthy
    errors = _increase("rlvitals_write_errors_total", w)
    backlog = f"(rlvitals_outbox_backlog - (rlvitals_outbox_backlog offset {w} or rlvitals_outbox_backlog))"
    return (
        f"max by (run) (({errors} > bool 0) + ({backlog} > bool {timing.backlog_growth}))"
        f' or max by (run) (1 - up{{job="{EXPORTER_JOB}"}})'
    )


def _data(expr: str, timing: Timing, threshold: float = 0.5) -> list[dict[str, Any]]:
    expr_ds = {"type": EXPR.type, "uid": EXPR.uid}
    return [
        {
            "refId": "A",
            "relativeTimeRange": {"from": timing.lookback_seconds, "to": 0},
            "datasourceUid": PROMETHEUS.uid,
            "model": {
                "refId": "A",
                "datasource": PROMETHEUS.ref(),
                "expr": expr,
                "instant": True,
                "range": False,
                "intervalMs": 15000,
                "maxDataPoints": 43200,
            },
        },
        {
            "refId": "B",
            "relativeTimeRange": {"from": 0, "to": 0},
            "datasourceUid": EXPR.uid,
            "model": {
                "refId": "B",
                "datasource": expr_ds,
                "type": "reduce",
                "expression": "A",
                "reducer": "last",
                "settings": {"mode": "dropNN"},
            },
        },
        {
            "refId": "C",
            "relativeTimeRange": {"from": 0, "to": 0},
            "datasourceUid": EXPR.uid,
            "model": {
                "refId": "C",
                "datasource": expr_ds,
                "type": "threshold",
                "expression": "B",
                "conditions": [{"evaluator": {"type": "gt", "params": [threshold]}}],
            },
        },
    ]


def _rule(
    uid: str,
    title: str,
    expr: str,
    timing: Timing,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    for_: str = "0s",
    threshold: float = 0.5,
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "condition": "C",
        "data": _data(expr, timing, threshold),
        "noDataState": "OK",
        "execErrState": "Error",
        "for": for_,
        "labels": dict(labels),
        "annotations": {k: v if k == "runbook_url" else _escape(v) for k, v in annotations.items()},
        "isPaused": False,
    }


def _escape(text: str) -> str:
    # keep the alert template markers ({{ .Labels.run }}) and protect every dollar sign
    return _literal(text)


def _band_line(metric: Metric) -> str:
    if metric.bands is None:
        return "no band declared"
    basis = "" if metric.bands.basis == "absolute" else f" x {metric.bands.basis}"

    def rng(stage: str) -> str:
        b = metric.bands.for_stage(stage) if metric.bands else None  # type: ignore[arg-type]
        if b is None:
            return f"{stage} -"
        lo = "-inf" if b.low is None else f"{b.low:g}"
        hi = "inf" if b.high is None else f"{b.high:g}"
        return f"{stage} [{lo}, {hi}]"

    return "healthy range" + basis + ": " + ", ".join(rng(s) for s in ("early", "mid", "late"))


def _actions(metric: Metric) -> str:
    items = [c.en for s in metric.failure_scenarios[:2] for c in (*s.check[:1], *s.change[:1])]
    return " ".join(items)


def _alert_groups(metric: Metric) -> list[tuple[Alert, ...]]:
    """The metric's alerts by (severity, condition): one Grafana rule each, since the exporter
    serves one `rlvitals_alert_active` series per pair (active when any of its alerts is)."""
    groups: dict[tuple[str, str], list[Alert]] = {}
    for a in metric.alerts:
        groups.setdefault((a.severity, a.condition), []).append(a)
    return [tuple(g) for g in groups.values()]


def _condition(alert: Alert) -> str:
    basis = "" if alert.basis == "absolute" else f" x {alert.basis}"
    scope = "" if alert.action_space is None else f" ({'/'.join(alert.action_space)} actions)"
    return f"{alert.condition} {alert.threshold:g}{basis} for {alert.for_steps} consecutive steps{scope}"


def _metric_rule(
    metric: Metric, group: tuple[Alert, ...], timing: Timing, benign: Sequence[str] = ()
) -> dict[str, Any]:
    alert = group[0]
    cond = " or ".join(_condition(a) for a in group)
    more = f" (or {len(group) - 1} more, see summary)" if len(group) > 1 else ""
    return _rule(
        _uid("rlv", metric.id, alert.severity[0], alert.condition),
        f"{metric.title.en}: {_condition(alert)}{more}",
        metric_alert_expr(metric, alert, timing, benign),
        timing,
        {"severity": alert.severity, "metric": metric.id, "layer": metric.layer},
        {
            "summary": f"{metric.title.en} ({metric.id}) {cond} in run {{{{ .Labels.run }}}}",
            "description": " ".join(
                p
                for p in (
                    metric.definition.en,
                    _band_line(metric) + ".",
                    "Why this threshold: " + " ".join(a.reason for a in group),
                    f"What to do: {_actions(metric)}" if metric.failure_scenarios else "",
                )
                if p
            ),
            "runbook_url": term_url(metric.id, "en"),
        },
        threshold=alert.threshold if metric.id in EXPORTER_COUNTERS else 0.5,
    )


def _rule_rule(reg: Registry, rule: Rule, timing: Timing) -> dict[str, Any]:
    lead = reg.metric(rule.metrics[0])
    conds = "; ".join(f"{c.metric} {c.label} {c.op} {c.value:g}" for c in rule.conditions)
    return _rule(
        _uid("rlv-rule", rule.id),
        rule.title.en,
        rule_alert_expr(rule),
        timing,
        {
            "severity": rule.severity,
            "metric": ",".join(rule.metrics),
            "layer": lead.layer,
            "rule": rule.id,
        },
        {
            "summary": f"{rule.title.en} in run {{{{ .Labels.run }}}}",
            "description": (
                f"{rule.reading.en} Conditions over the last {rule.window} steps, held for "
                f"{rule.for_steps} evaluation points: {conds}. What to do: "
                + " ".join(a.en for a in rule.actions)
            ),
            "runbook_url": term_url(lead.id, "en"),
        },
    )


def _pipeline_rules(reg: Registry, timing: Timing) -> list[dict[str, Any]]:
    step = next((m for m in reg.metrics if m.layer == "health" and m.kind == "counter"), None)
    step_link = term_url(step.id, "en") if step else ""
    return [
        _rule(
            "rlv-training-stalled",
            "Training stalled",
            status_expr(RunStatus.STALLED),
            timing,
            {"severity": "critical", "metric": "rlvitals_step", "layer": "health"},
            {
                "summary": (
                    f"Run {{{{ .Labels.run }}}}: its writer runs but stored nothing for "
                    f"{_seconds(timing.lifecycle.stall_after_s)} s"
                ),
                "description": (
                    "The training process writing this run is alive but logged nothing for "
                    f"{_seconds(timing.lifecycle.stall_after_s)} s, measured on the exporter's "
                    "clock: it holds the run's lease (logging through the Python API), or, for "
                    "a followed log, it was seen on the follower's host holding the log open "
                    "for writing. The job may be hung (deadlock, NCCL wait, data loader) or "
                    "paused. Runs that finished, crashed, whose history was already quiet when "
                    "the exporter first saw it, or whose quiet logs have no writer the follower "
                    "can see (status quiet) never fire. Check the process and its last log lines."
                ),
                "runbook_url": step_link,
            },
        ),
        _rule(
            "rlv-run-crashed",
            "Run crashed",
            crashed_expr(timing),
            timing,
            {"severity": "critical", "metric": "rlvitals_step", "layer": "health"},
            {
                "summary": "Run {{ .Labels.run }} crashed: {{ .Labels.reason }}",
                "description": (
                    "The run ended with an exception (recorded by the context manager or the "
                    "process's excepthook, or a traceback its followed console log ends with), "
                    "its writing process died without recording an end (killed, out of memory, "
                    "a zombie its launcher never reaped; seen by the lease, by the follower on "
                    "the writer's host, or as a self-served /metrics target that stopped "
                    "answering), or a followed log stopped short of its planned length. It "
                    f"resolves {_seconds(timing.lifecycle.ended_after_s)} s after the crash was "
                    "last served. Read the reason on the run's page, fix it and resume the run."
                ),
                "runbook_url": step_link,
            },
        ),
        _rule(
            "rlv-exporter-unhealthy",
            "rlvitals exporter unhealthy",
            unhealthy_expr(timing),
            timing,
            {"severity": "warning", "metric": "rlvitals_exporter", "layer": "health"},
            {
                "summary": "rlvitals exporter unhealthy (run {{ .Labels.run }})",
                "description": (
                    f"InfluxDB writes failed in the last {timing.unhealthy}, the outbox backlog grew "
                    f"by more than {timing.backlog_growth} rows, or Prometheus cannot scrape the "
                    "exporter. Samples are kept in the local outbox and replayed; check "
                    "RLVITALS_INFLUX_URL / token and `rlvitals doctor`."
                ),
                "runbook_url": step_link,
            },
            for_="2m",
        ),
    ]


def alert_rule_groups(reg: Registry, timing: Timing = Timing()) -> dict[str, Any]:
    """The alert rules file as a mapping (apiVersion 1, three groups)."""
    benign = [m.id for m in reg.metrics if m.limits.undefined_when_constant]
    metric_rules = [
        _metric_rule(m, group, timing, benign) for m in reg.metrics for group in _alert_groups(m)
    ]
    rule_rules = [_rule_rule(reg, r, timing) for r in reg.rules]
    groups: Sequence[tuple[str, list[dict[str, Any]]]] = (
        ("rlvitals-metric-alerts", metric_rules),
        ("rlvitals-diagnosis-rules", rule_rules),
        ("rlvitals-pipeline", _pipeline_rules(reg, timing)),
    )
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": name,
                "folder": ALERT_FOLDER,
                "interval": timing.interval,
                "rules": rules,
            }
            for name, rules in groups
        ],
    }


NOT_PAGED = "rlvitals-not-paged"
"""The mute timing of the route every alert below critical takes: always muted."""


def _notifications() -> dict[str, Any]:
    """A webhook contact point and a root policy that pages on critical only; adapt the URL (or
    the receiver type) to yours."""
    return {
        "apiVersion": 1,
        "contactPoints": [
            {
                "orgId": 1,
                "name": _CONTACT,
                "receivers": [
                    {
                        "uid": "rlvitals-webhook",
                        "type": "webhook",
                        "disableResolveMessage": False,
                        "settings": {
                            "url": "${RLVITALS_ALERT_WEBHOOK_URL}",
                            "httpMethod": "POST",
                            # the receiver's own secret signs each body (grafana/alert_webhook.py);
                            # the datasource token never goes to the webhook's URL
                            "hmacConfig": {
                                "secret": "${" + SECRET_SETTING + "}",
                                "header": SIGNATURE_HEADER,
                                "timestampHeader": TIMESTAMP_HEADER,
                            },
                        },
                    }
                ],
            }
        ],
        "policies": [
            {
                "orgId": 1,
                "receiver": _CONTACT,
                "group_by": ["grafana_folder", "alertname", "run"],
                "group_wait": "30s",
                "group_interval": "5m",
                "repeat_interval": "4h",
                "routes": [
                    {
                        "receiver": _CONTACT,
                        "object_matchers": [["severity", "=", "critical"]],
                        "group_wait": "10s",
                        "repeat_interval": "1h",
                    },
                    # a warning or a watch is for the dashboards and the alert list, not a page
                    # (docs/status.md, "What a status means"): its route is muted at every
                    # minute, so Grafana still evaluates and lists it but notifies no one
                    {
                        "receiver": _CONTACT,
                        "object_matchers": [["severity", "!=", "critical"]],
                        "mute_time_intervals": [NOT_PAGED],
                    },
                ],
            }
        ],
        "muteTimes": [
            {
                "orgId": 1,
                "name": NOT_PAGED,
                # every minute of every day: no weekday, day, month or year restricts it
                "time_intervals": [{"times": [{"start_time": "00:00", "end_time": "24:00"}]}],
            }
        ],
    }


class _Dumper(yaml.SafeDumper):
    """No anchors or aliases: every rule reads on its own."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(doc: Mapping[str, Any], header: str) -> str:
    text = yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return header + text


def _literal(text: str) -> str:
    """Grafana expands `$VAR` in provisioning files; `$$` keeps a registry text's dollar sign."""
    return text.replace("$", "$$")


_HEADER = "# Generated by `rlvitals build` from registry/; do not edit by hand.\n"


def alert_files(reg: Registry, langs: Sequence[str]) -> Mapping[str, str]:
    """`provisioning/alerting/rlvitals-rules.yaml` and `rlvitals-notifications.yaml`."""
    del langs  # alert texts go to notification channels; they are written in English
    return {
        "provisioning/alerting/rlvitals-rules.yaml": _dump(alert_rule_groups(reg), _HEADER),
        "provisioning/alerting/rlvitals-notifications.yaml": _dump(
            _notifications(),
            _HEADER + "# Contact point and notification policy: point the webhook at your\n"
            "# receiver (RLVITALS_ALERT_WEBHOOK_URL) or replace the receiver type (email, slack...).\n"
            "# Only critical alerts notify; warnings and watches are listed in Grafana, their route\n"
            "# muted at every minute (remove its mute timing to be notified of them too).\n"
            "# Each notification is signed with RLVITALS_ALERT_WEBHOOK_SECRET (HMAC-SHA256).\n",
        ),
    }
