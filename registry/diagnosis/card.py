"""The diagnosis card: how far a metric is from its own history and band, and what that means.

`build_card(registry, metric_id, series_by_metric, config, lang)` judges the latest value:

- fewer than 5 finite points (or none at all) is `no_data`, with the reason;
- during warm-up (config `warmup_steps`, else the first 10 % of the early stage) the card is at
  most `ok`: the evidence is listed, never alarmed;
- one excursion (outside the stage band, or past an alert threshold for fewer than its
  `for_steps` points) is `watch`;
- an alert threshold crossed for its `for_steps` points is that alert's severity, except that a
  critical alert is `critical` only when corroborated (a related metric strongly coupled,
  |r| > 0.7, or a firing critical rule on this metric) and `warning` otherwise;
- a firing rule on the metric gives the rule's severity; exact zeros persisting after non-zero
  history in a normally non-zero metric (KL, clip fraction, advantage std, grad norm) is
  `warning`: silence can be a symptom;
- metric-specific evidence: entropy shape (staircase or cliff `warning`, sawtooth `watch`) and
  gradient (`watch`), the KL / clip-epsilon zone (`watch`; `warning` after 3 points in danger),
  reward fingerprint (informational) and reward-hacking sentinels (`warning`), a value outside
  the metric's physical limits or a non-finite latest value (`warning`).

The reading names each piece of evidence with its numbers, in English or Chinese.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..catalog import Registry
from ..model import Alert, Metric, Rule, Stages
from ..references import random_returns
from .bands import (
    AlertState,
    BandState,
    alert_states,
    band_state,
    clip_epsilon,
    early_mean,
    in_warmup,
    warmup_end,
)
from .context import RunContext, run_context
from .coupling import COUPLING_STEPS, Coupling, couplings
from .entropy_shape import classify_entropy, entropy_gradient
from .fingerprint import (
    Sentinel,
    components_diverge,
    length_rising_reward_flat,
    refusal_rising_with_reward,
    reward_fingerprint,
    rm_rising_eval_not,
    shaped_up_raw_down,
    shaping_took_the_gain,
)
from .kl_zone import kl_zone
from .return_refs import ReturnReference, findings, return_reference
from .rules import RuleResult, evaluate_rules
from .scale import (
    RETURN_METRICS,
    spread_growth,
    spread_severity,
    value_divergence,
    value_severity,
)
from .stats import (
    RunMean,
    Series,
    SeriesLike,
    Summary,
    Trend,
    as_series,
    change_pct,
    ema,
    ema_lag_steps,
    summarize,
)
from .tuning import Tuning

__all__ = [
    "MIN_POINTS",
    "STATUSES",
    "TUNABLE_KINDS",
    "Card",
    "CardOptions",
    "Evidence",
    "Related",
    "all_rules",
    "build_card",
    "context_of",
    "is_fact",
    "prepare_series",
    "reference_findings",
    "rejudge",
    "with_context",
]

Status = Literal["ok", "watch", "warning", "critical", "no_data"]
STATUSES: tuple[Status, ...] = ("ok", "watch", "warning", "critical", "no_data")
_RANK: dict[Status, int] = {"no_data": -1, "ok": 0, "watch": 1, "warning": 2, "critical": 3}
MIN_POINTS = 3  # the registry's warm-up (2 points) plus one to judge
_KL_DANGER_POINTS = 3
_ALWAYS_READ = ("band", "warmup", "entropy_shape", "kl_zone", "fingerprint")

SentinelFn = Callable[[Series, Series], Sentinel]


@dataclass(frozen=True)
class CardOptions:
    """Which metric ids get which special checks, and the windows. Defaults follow the registry ids."""

    recent_steps: int = 1000
    cv_steps: int = 100
    coupling_steps: int = COUPLING_STEPS
    smoothing: float = 0.6
    silence_points: int = 10
    silence_metrics: tuple[str, ...] = ("policy_kl", "clip_fraction", "advantage_std", "grad_norm")
    entropy_metric: str = "policy_entropy"
    kl_metric: str = "policy_kl"
    tuning: Tuning = field(default_factory=Tuning)
    sentinels: tuple[tuple[str, str, str], ...] = (
        ("shaping_gain", "shaped_reward", "raw_reward"),
        ("reward_hacking", "shaped_reward", "raw_reward"),
        ("length_hacking", "response_length_mean", "raw_reward"),
        ("refusal", "refusal_rate", "raw_reward"),
        ("rm_overoptimization", "rm_score", "eval_score"),
    )


_SENTINEL_FNS: dict[str, SentinelFn] = {
    "shaping_gain": shaping_took_the_gain,
    "reward_hacking": shaped_up_raw_down,
    "length_hacking": length_rising_reward_flat,
    "refusal": refusal_rising_with_reward,
    "rm_overoptimization": rm_rising_eval_not,
}


@dataclass(frozen=True)
class Evidence:
    """One checkable fact behind the verdict: what kind, what it implies, its text and numbers."""

    kind: str
    severity: Status
    text: str
    data: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "text": self.text,
            "data": dict(self.data),
        }


@dataclass(frozen=True)
class Related:
    metric: str
    r: float
    points: int
    change_pct: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "r": self.r,
            "points": self.points,
            "change_pct": self.change_pct,
        }


@dataclass(frozen=True)
class Card:
    """A metric's diagnosis. `mean` is its whole-run mean over `mean_points` finite points (the
    datasource passes it from the store; without it, the mean of the series given), and
    `deviation_pct` is the latest value against it. `median`, `window_mean` and `window_points`
    describe the window of recent points the card read; `recent_mean`/`recent_median` its last
    `recent_steps` steps."""

    metric: str
    title: str
    unit: str
    lang: str
    status: Status
    reading: str
    step: int | None = None
    value: float | None = None
    mean: float | None = None
    mean_points: int = 0
    median: float | None = None
    window_mean: float | None = None
    window_points: int = 0
    recent_mean: float | None = None
    recent_median: float | None = None
    recent_steps: int = 0
    deviation_pct: float | None = None
    cv: float | None = None
    cv_steps: int = 0
    trend: Trend | None = None
    smoothed: float | None = None
    smoothing: float = 0.6
    smoothing_lag_steps: float | None = None
    band: BandState | None = None
    reason: str | None = None
    actions: tuple[str, ...] = ()
    related: tuple[Related, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    rules: tuple[RuleResult, ...] = ()
    context: RunContext | None = None
    warmup: bool = False
    """The latest point is in the run's warm-up: only physical facts are alarmed."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: non-finite numbers become null."""
        raw: dict[str, object] = {
            "metric": self.metric,
            "title": self.title,
            "unit": self.unit,
            "lang": self.lang,
            "step": self.step,
            "value": self.value,
            "mean": self.mean,
            "mean_points": self.mean_points,
            "median": self.median,
            "window_mean": self.window_mean,
            "window_points": self.window_points,
            "recent_mean": self.recent_mean,
            "recent_median": self.recent_median,
            "recent_steps": self.recent_steps,
            "deviation_pct": self.deviation_pct,
            "cv": self.cv,
            "cv_steps": self.cv_steps,
            "trend": None if self.trend is None else self.trend.to_dict(),
            "smoothed": {
                "weight": self.smoothing,
                "value": self.smoothed,
                "lag_steps": self.smoothing_lag_steps,
            },
            "band": None if self.band is None else self.band.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "reading": self.reading,
            "actions": list(self.actions),
            "related": [r.to_dict() for r in self.related],
            "evidence": [e.to_dict() for e in self.evidence],
            "rules": [r.to_dict() for r in self.rules],
            "context": None if self.context is None else self.context.to_dict(),
            "warmup": self.warmup,
        }
        out = _json_ready(raw)
        assert isinstance(out, dict)
        return out


def _json_ready(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return _json_ready(obj.item())
    if isinstance(obj, Mapping):
        return {str(k): _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_ready(v) for v in obj]
    return obj


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a" if x is None else str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


# The reading's status and trend words in Chinese (the codes stay English in the card fields);
# the datasource and report show the same words (grafana/datasource/card_words.py).
ZH_WORDS = {
    "ok": "正常",
    "watch": "关注",
    "warning": "警告",
    "critical": "严重",
    "no_data": "无数据",
    "up": "上升",
    "down": "下降",
    "flat": "平稳",
    # stages, KL / clip-epsilon zones and entropy shapes named in the reading
    "early": "早期",
    "mid": "中期",
    "late": "后期",
    "safe": "安全",
    "danger": "危险",
    "staircase_collapse": "阶梯式坍缩",
    "cliff": "断崖",
    "sawtooth": "锯齿震荡",
    "gradual_decay": "缓慢衰减",
    "plateau": "平台",
    "rising": "上升",
    "irregular": "无规律",
    "insufficient": "点数不足",
}


def _zh(word: str) -> str:
    return ZH_WORDS.get(word, word)


def _against_mean(t: _Lang, summary: Summary) -> str:
    """The deviation from the run mean: in percent, unless the mean is so near zero that the
    percentage is noise magnified (beyond ±1000 %): then the absolute difference."""
    dev = summary.deviation_pct
    if (
        dev is not None
        and abs(dev) > 1000.0
        and summary.value is not None
        and summary.mean is not None
    ):
        diff = summary.value - summary.mean
        return t(
            f"{'+' if diff >= 0 else ''}{_num(diff)}", f"{'+' if diff >= 0 else ''}{_num(diff)}"
        )
    return _pct(dev)


class _Lang:
    def __init__(self, lang: str) -> None:
        self.zh = lang == "zh"

    def __call__(self, en: str, zh: str) -> str:
        return zh if self.zh else en


def _summary_windows(registry: Registry, opts: CardOptions, ctx: RunContext) -> tuple[int, int]:
    """The trend and CV windows in steps: the options', widened at sparse cadence to span the
    registry's `trend_points` / `cv_points` logged points (SB3 logs one point per 2048 steps)."""
    if ctx.cadence is None or ctx.cadence <= 0:
        return opts.recent_steps, opts.cv_steps
    t = registry.timing
    return (
        max(opts.recent_steps, math.ceil(t.trend_points * ctx.cadence)),
        max(opts.cv_steps, math.ceil(t.cv_points * ctx.cadence)),
    )


def _max(a: Status, b: Status) -> Status:
    return a if _RANK[a] >= _RANK[b] else b


def build_card(
    registry: Registry,
    metric_id: str,
    series_by_metric: Mapping[str, SeriesLike],
    config: Mapping[str, Any] | None = None,
    lang: str = "en",
    options: CardOptions | None = None,
    whole_run: RunMean | None = None,
    context: RunContext | None = None,
    prepared: bool = False,
    rules: Sequence[RuleResult] | None = None,
) -> Card:
    """The diagnosis card of one metric from the histories of it and its neighbours.

    `whole_run` is the metric's mean over its whole run when `series_by_metric` holds only a
    recent window of a long one; without it the mean is that of the series given. `context` is
    the run's context (see `context.py`); without it, it is read from `config` and the series.
    `prepared`: `series_by_metric` and `config` already went through `prepare_series` and
    `with_context` for this context (`diagnose` does it once for all of a run's cards), and
    `rules`, when given, are every registry rule evaluated on them (`diagnose` evaluates them
    once; each card keeps those about its metric)."""
    opts = options or CardOptions()
    t = _Lang(lang)
    metric = registry.metric(metric_id)
    title = metric.title.get(lang)
    series = {k: as_series(v) for k, v in series_by_metric.items()}
    ctx = context if context is not None else context_of(registry, config, series)
    if prepared:
        cfg = dict(config or {})
    else:
        cfg = with_context(config, ctx, series)
        series = prepare_series(registry, ctx, series)
    s = series.get(metric_id)
    finite = 0 if s is None else int(np.isfinite(s.values).sum())
    if s is None or finite < MIN_POINTS:
        why = _no_data_reason(t, s, finite, metric, ctx)
        facts = [] if s is None else _physical_facts(t, metric, s, cfg)
        if s is not None:
            facts += [
                e
                for e in _value_scale_evidence(t, metric_id, s, series, ctx, opts.tuning)
                if e.data.get("physical")
            ]
        if any(e.severity != "ok" for e in facts):
            return _facts_card(t, metric, title, lang, s, finite, why, facts, ctx)
        reading = t(f"{title}: no diagnosis: {why}.", f"{title}：无法诊断：{why}。")
        return Card(
            metric_id,
            title,
            metric.unit,
            lang,
            "no_data",
            reading,
            reason=why,
            step=None if s is None else s.last_step,
            context=ctx,
        )
    recent_steps, cv_steps = _summary_windows(registry, opts, ctx)
    summary = summarize(s, recent_steps, cv_steps, whole_run)
    assert summary.step is not None and summary.value is not None
    stages = run_stages(registry, cfg, ctx)
    early = early_mean(s, stages)
    band = band_state(metric, summary.step, summary.value, stages, cfg, early)
    alerts = alert_states(metric, s, cfg, early)
    if rules is None:
        rule_results = evaluate_rules(registry, series, cfg, metric_id, stages, _run_points(ctx))
    else:
        rule_results = tuple(r for r in rules if metric_id in r.rule.metrics)
    fired = tuple(r for r in rule_results if r.fired)
    others = {m: series[m] for m in metric.related if m in series and m != metric_id}
    span = _coupling_span(s, opts.coupling_steps, _run_points(ctx), "stage_boundaries" in cfg)
    coupled = tuple(c for c in couplings(s, others, span) if c.strong)
    related = tuple(_related(c, series[c.metric], span, summary.step) for c in coupled)
    confirming = _confirming(registry, metric, series, cfg, stages)

    evidence: list[Evidence] = []
    mechanics = _mechanics(t, metric_id, s, series, ctx, opts)
    evidence += mechanics
    if not mechanics:
        evidence += _band_evidence(t, band, summary)
    evidence += _limit_evidence(t, metric, s, summary)
    evidence += _sign_evidence(t, metric_id, summary, ctx, opts)
    corroborated = (
        bool(coupled) or bool(confirming) or any(r.rule.severity == "critical" for r in fired)
    )
    evidence += _alert_evidence(t, alerts, corroborated, coupled, confirming)
    evidence += [_rule_evidence(t, r, lang) for r in fired]
    if not mechanics:
        evidence += _silence_evidence(t, metric_id, s, opts)
    if metric_id == opts.entropy_metric:
        evidence += _entropy_evidence(t, s, ctx, early, stages)
        evidence = _converged(t, evidence, series, ctx, early)
    evidence += _spread_evidence(t, metric_id, s, ctx, opts.tuning)
    evidence += _value_scale_evidence(t, metric_id, s, series, ctx, opts.tuning)
    if metric_id == opts.kl_metric:
        evidence += _kl_evidence(t, s, clip_epsilon(cfg))
    if metric.group == "reward" and metric.pattern is None:
        evidence += _fingerprint_evidence(t, s)
    if metric_id in RETURN_METRICS:
        evidence += _return_reference_evidence(t, s, ctx, opts.tuning)
    covered = {r.sentinel for r in registry.rules if r.sentinel}
    if any(r.rule.sentinel == "reward_hacking" for r in fired):
        # the shaped-up-raw-down rule already says it, with its own evidence
        covered.add("shaping_gain")
    evidence += _sentinel_evidence(t, metric_id, series, opts, covered)
    if metric_id == "raw_reward":
        evidence += _component_evidence(t, series, ctx)

    status: Status = "ok"
    for e in evidence:
        status = _max(status, e.severity)
    reason: str | None = None
    warm = registry.timing.warmup_points
    warming = in_warmup(summary.step, stages, cfg, s.finite(), warm)
    if warming and status != "ok":
        end = warmup_end(stages, cfg, s.finite(), warm)
        # physical facts need no history: a NaN, a value past its limits or an update far past
        # any trust region is alarmed in warm-up too
        physical: Status = "ok"
        for e in evidence:
            if is_fact(e):
                physical = _max(physical, e.severity)
        reason = t(
            f"warm-up: step {summary.step:,} < {end:,}; the evidence is listed but not alarmed"
            + (", except physical facts" if physical != "ok" else ""),
            f"预热期：第 {summary.step:,} 步 < {end:,}；证据仅列出，不报警"
            + ("（物理事实除外）" if physical != "ok" else ""),
        )
        evidence.append(Evidence("warmup", "ok", reason, {"step": summary.step, "warmup_end": end}))
        status = physical

    # older points weigh under s^50/(1-s) of the latest: the tail gives the same last value
    tail = max(1000, int(50 / max(1e-3, 1.0 - opts.smoothing)))
    smooth = ema(s.values[-tail:], opts.smoothing)
    finite_idx = np.flatnonzero(np.isfinite(smooth))
    smoothed = float(smooth[finite_idx[-1]]) if finite_idx.size else None
    reading = _reading(t, title, metric, summary, status, evidence, ctx)
    actions = _actions(metric, fired, status, lang, band)
    return Card(
        metric=metric_id,
        title=title,
        unit=metric.unit,
        lang=lang,
        status=status,
        reading=reading,
        step=summary.step,
        value=summary.value,
        mean=summary.mean,
        mean_points=summary.mean_points,
        median=summary.median,
        window_mean=summary.window_mean,
        window_points=summary.window_points,
        recent_mean=summary.recent_mean,
        recent_median=summary.recent_median,
        recent_steps=summary.recent_steps,
        deviation_pct=summary.deviation_pct,
        cv=summary.cv,
        cv_steps=summary.cv_steps,
        trend=summary.trend,
        smoothed=smoothed,
        smoothing=opts.smoothing,
        smoothing_lag_steps=ema_lag_steps(opts.smoothing, s.steps),
        band=band,
        reason=reason,
        actions=actions,
        related=related,
        evidence=tuple(evidence),
        rules=rule_results,
        context=ctx,
        warmup=warming,
    )


def _coupling_span(s: Series, points: int, run_points: int | None, explicit: bool) -> int:
    """The coupling window in steps: the span of the metric's last `points` logged points
    (at most a tenth of the run, at least 5 points), so sparse logging still has points to
    correlate. With explicit stage boundaries it is `points` steps, as before."""
    if explicit or len(s) < 2:
        return points
    k = points if run_points is None else min(points, max(5, run_points // 10))
    k = min(k, len(s))
    return int(s.steps[-1] - s.steps[-k]) + 1


def all_rules(
    registry: Registry, series: Mapping[str, Series], cfg: Mapping[str, Any], ctx: RunContext
) -> tuple[RuleResult, ...]:
    """Every registry rule on a run's prepared series, as `build_card` evaluates them."""
    stages = run_stages(registry, cfg, ctx)
    return evaluate_rules(registry, series, cfg, None, stages, _run_points(ctx))


def run_stages(registry: Registry, config: Mapping[str, Any] | None, ctx: RunContext) -> Stages:
    """The stages a run is judged in: its config's `stage_boundaries`, else fractions of its
    planned length, else counts of logged points at its measured cadence (`Catalog.stages_for`).
    The one decision: the cards, the rules and every chart that shades a stage's band ask it."""
    return registry.stages_for(config, ctx.planned_steps, ctx.cadence)


def _run_points(ctx: RunContext) -> int | None:
    """The run's length in logged points: planned, when the plan and cadence are known, else so far."""
    if ctx.planned_steps and ctx.cadence:
        return max(ctx.points, int(ctx.planned_steps / ctx.cadence))
    return ctx.points or None


def context_of(
    registry: Registry, config: Mapping[str, Any] | None, series: Mapping[str, Series]
) -> RunContext:
    """`run_context` with what the registry knows: its update metrics and random-policy returns."""
    return run_context(config, series, registry.update_metrics(), random_returns())


def with_context(
    config: Mapping[str, Any] | None, ctx: RunContext, series: Mapping[str, Series]
) -> dict[str, Any]:
    """The config the bands and rules read, completed from the context: `n_actions`,
    `clip_epsilon`, `action_space`, `planned_steps`, and the return's references (`first_update`,
    `exploration_end`, `random_return`). A discrete space of unknown size is judged
    against the entropy it has shown (at least ln 2): the smallest action space it can be."""
    cfg = dict(config or {})
    if ctx.action_space is not None:
        cfg.setdefault("action_space", ctx.action_space)
    if ctx.action_space == "discrete" and "n_actions" not in cfg:
        n = ctx.n_actions
        if n is None:
            ent = series.get("policy_entropy")
            top = float(np.nanmax(ent.values)) if ent is not None and len(ent.finite()) else 0.0
            n = max(2, math.ceil(math.exp(top) - 1e-9))
        cfg["n_actions"] = n
    if ctx.clip_epsilon is not None:
        cfg.setdefault("clip_epsilon", ctx.clip_epsilon)
    if ctx.planned_steps is not None:
        cfg.setdefault("planned_steps", ctx.planned_steps)
    # what the return's references are measured from (`return_refs`), for the rules that read
    # them (`never_improved`) as the return's card does
    for key in ("first_update", "exploration_end", "random_return"):
        value = getattr(ctx, key)
        if value is not None:
            cfg.setdefault(key, value)
    return cfg


def prepare_series(
    registry: Registry, ctx: RunContext, series: Mapping[str, Series]
) -> dict[str, Series]:
    """Series as the engine judges them. A framework's cumulative throughput (the registry marks
    SB3's `time/fps` and CleanRL's `charts/SPS` `reduction: cumulative`: steps since start /
    seconds since start) becomes the rate between consecutive points, Δsteps / Δseconds, so a
    slowdown shows when it happens and the first point (measured before any update) drops out."""
    out = dict(series)
    task = ctx.task_reward
    if task is not None and f"reward_component/{task}" in series and "raw_reward" in series:
        # the run says which reward part is the task's own score: that part is the raw reward
        # and the sum optimised is the shaped one (the other parts are bonuses and shaping)
        out.setdefault("shaped_reward", series["raw_reward"])
        out["raw_reward"] = series[f"reward_component/{task}"]
    nonfinite = _health_nonfinite(registry, series)
    if nonfinite is not None:
        out[NONFINITE_COUNT] = nonfinite
    logged = [series[m] for m in registry.update_metrics() if m in series and len(series[m])]
    updates = max(logged, key=len, default=None)
    for metric_id in ("episodic_return", "episode_length"):
        s = series.get(metric_id)
        if s is not None and updates is not None and len(s) > len(updates):
            out[metric_id] = _per_update(s, updates.steps)
    for metric_id, s in series.items():
        if not registry.has_metric(metric_id) or ctx.framework is None:
            continue
        aliases = [a for a in registry.metric(metric_id).aliases if a.framework == ctx.framework]
        if not aliases or aliases[0].reduction != "cumulative" or metric_id != "samples_per_second":
            continue
        f = s.finite()
        ok = (f.values > 0) & (f.steps > 0)
        steps, rate = f.steps[ok], f.values[ok]
        if steps.size < 2:
            continue
        elapsed = steps / rate
        d_t = np.diff(elapsed)
        d_s = np.diff(steps).astype(np.float64)
        keep = d_t > 0
        rates = as_series((steps[1:][keep], d_s[keep] / d_t[keep]))
        # throughput before the first update (an off-policy learner's learning_starts, random
        # actions and no gradient: 10-100x the learning rate) is not the training's
        if ctx.first_update is not None:
            rates = _from(rates, ctx.first_update)
        out[metric_id] = rates
    return out


NONFINITE_COUNT = "nonfinite_count"


def _health_nonfinite(registry: Registry, series: Mapping[str, Series]) -> Series | None:
    """The step's count of non-finite values less those that are facts about the data (a
    variance ratio's NaN on constant returns, `undefined_when_constant`): NaN in the series of
    such a metric is taken off the count at its step."""
    count = series.get(NONFINITE_COUNT)
    if count is None:
        return None
    benign = [
        s.steps[np.isnan(s.values)]
        for m, s in series.items()
        if registry.has_metric(m) and registry.metric(m).limits.undefined_when_constant
    ]
    if not any(b.size for b in benign):
        return None
    values = count.values.copy()
    for steps in benign:
        values[np.isin(count.steps, steps)] -= 1.0
    return Series(count.steps, np.maximum(values, 0.0))


def _per_update(s: Series, updates: npt.NDArray[np.int64]) -> Series:
    """Per-episode values (CleanRL logs each finished episode) as one mean per update interval
    (prev_update, update], the cadence every other metric is judged at; an update that finished
    no episode has no point. Episodes after the last update form a final point at their step."""
    f = s.finite()
    if not len(f):
        return f
    idx = np.searchsorted(updates, f.steps, side="left")  # non-decreasing: steps are sorted
    groups, starts, counts = np.unique(idx, return_index=True, return_counts=True)
    means = np.add.reduceat(f.values, starts) / counts
    last = f.steps[starts + counts - 1]  # episodes after the last update keep their own step
    steps = np.where(groups < updates.size, updates[np.minimum(groups, updates.size - 1)], last)
    return as_series((steps, means))


def _from(s: Series, step: int) -> Series:
    keep = s.steps >= step
    return Series(s.steps[keep], s.values[keep])


def _confirming(
    registry: Registry,
    metric: Metric,
    series: Mapping[str, Series],
    cfg: Mapping[str, Any],
    stages: Stages,
) -> tuple[str, ...]:
    """Related metrics past one of their own alert thresholds for its `for` points now: evidence
    that corroborates at any cadence and on constant series, where correlation cannot."""
    out = []
    for other in metric.related:
        s = series.get(other)
        if s is None or not registry.has_metric(other) or len(s.finite()) < MIN_POINTS:
            continue
        m = registry.metric(other)
        early = early_mean(s, stages)
        if any(a.active for a in alert_states(m, s, cfg, early)):
            out.append(other)
    return tuple(out)


def _sign_evidence(
    t: _Lang, metric_id: str, summary: Summary, ctx: RunContext, opts: CardOptions
) -> list[Evidence]:
    """A negative entropy is healthy for a continuous policy and impossible for a discrete or
    token one: there it means a sign was missed (SB3's entropy_loss is -H)."""
    if metric_id != opts.entropy_metric or summary.value is None or summary.value >= 0:
        return []
    if ctx.action_space not in ("discrete", "token"):
        return []
    text = t(
        f"{_num(summary.value)} nats is negative, impossible for a {ctx.action_space} policy: check the sign of how it is logged",
        f"{_num(summary.value)} nats 为负，{ctx.action_space} 策略不可能如此：请检查记录时的符号",
    )
    return [Evidence("limits", "warning", text, {"value": summary.value})]


def _mechanics(
    t: _Lang,
    metric_id: str,
    s: Series,
    series: Mapping[str, Series],
    ctx: RunContext,
    opts: CardOptions,
) -> list[Evidence]:
    """Values explained by how the run is set up, not by its health: they replace the band and
    silence checks of the metric (alerts and rules still apply)."""
    constructed = ctx.by_construction.get(metric_id)
    if constructed is not None:
        setup = {
            k: v
            for k, v in (
                ("num_iterations", ctx.num_iterations),
                ("updates_per_batch", ctx.updates_per_batch),
            )
            if v is not None
        }
        return [Evidence("mechanics", "ok", t(*constructed), setup)]
    if metric_id in ("clip_fraction", "policy_kl") and ctx.lr_annealed:
        lr = series.get("learning_rate")
        last = None if lr is None or not len(lr.finite()) else float(lr.finite().values[-1])
        text = t(
            f"the learning rate has annealed to ~0 ({_num(last)}): updates shrink by schedule, so a"
            " fading KL or clip fraction is the schedule, not silence; band and silence not judged",
            f"学习率已按计划退火到约 0（{_num(last)}）：更新按计划变小，KL 或 clip 比例的消退来自计划而非沉默；不判断区间与沉默",
        )
        return [Evidence("mechanics", "ok", text, {"learning_rate": last})]
    return []


TUNABLE_KINDS = ("value_scale", "entropy_spread", "return_reference")
"""Evidence whose severity a `Tuning` decides from the numbers in its data (`rejudge`)."""


def rejudge(e: Evidence, tuning: Tuning, facts_only: bool = False) -> Status:
    """The severity a tunable piece of evidence has under `tuning` (others: their own); with
    `facts_only`, only what is a physical fact in it (a value past the bound the returns
    allow), as a card in warm-up alarms."""
    d = e.data
    if e.kind == "value_scale":
        bound, early = d.get("bound"), d.get("early")
        return _status(
            value_severity(
                _f(d["value"]),
                _f(d["held"]),
                None if early is None or facts_only else _f(early),
                None if bound is None else _f(bound),
                tuning,
            )
        )
    if facts_only:
        return "ok"
    if e.kind == "entropy_spread":
        return _status(spread_severity(_f(d["per_dim_nats"]), tuning))
    if e.kind == "return_reference":
        return "warning" if reference_findings(e, tuning) else "ok"
    return e.severity


def reference_findings(e: Evidence, tuning: Tuning) -> tuple[str, ...]:
    """The findings of a `return_reference` evidence under `tuning`."""
    return findings(_reference_of(e.data), tuning)


def _f(x: object) -> float:
    assert isinstance(x, int | float)
    return float(x)


def _status(word: str) -> Status:
    return {"ok": "ok", "watch": "watch", "warning": "warning", "critical": "critical"}[word]  # type: ignore[return-value]


def _reference_of(d: Mapping[str, object]) -> ReturnReference:
    elapsed = d.get("elapsed_fraction")
    random = d.get("random")
    return ReturnReference(
        start=_f(d["start"]),
        best=_f(d["best"]),
        now=_f(d["now"]),
        held=_f(d["held"]),
        noise=_f(d["noise"]),
        window=int(_f(d["window_points"])),
        elapsed=None if elapsed is None else _f(elapsed),
        points=int(_f(d["points_after_first_update"])),
        random=None if random is None else _f(random),
        random_judged=bool(d.get("random_judged")),
        improved=bool(d.get("improved")),
    )


def _value_scale_evidence(
    t: _Lang,
    metric_id: str,
    s: Series,
    series: Mapping[str, Series],
    ctx: RunContext,
    tuning: Tuning,
) -> list[Evidence]:
    """A TD / critic loss or a Q value against the return scale and its own early level
    (`scale.value_divergence`)."""
    d = value_divergence(metric_id, s, series, ctx)
    if d is None:
        return []
    sev = _status(value_severity(d.latest, d.held, d.early, d.bound, tuning))
    # past the bound is a physical fact: judged in warm-up and before the card has history
    physical = value_severity(d.latest, d.held, None, d.bound, tuning) != "ok"
    parts_en, parts_zh = [], []
    if d.bound is not None and d.scale is not None:
        what = "2R²" if metric_id in ("value_loss", "total_loss") else "R"
        parts_en.append(
            f"the returns allow at most {what} = {_num(d.bound)} (R = {_num(d.scale)}, the largest"
            f" |return| logged): {_num(d.latest / d.bound)}x that"
        )
        parts_zh.append(
            f"回报所允许的上限为 {what} = {_num(d.bound)}（R = {_num(d.scale)}，记录到的最大 |回报|）："
            f"为其 {_num(d.latest / d.bound)} 倍"
        )
    if d.growth is not None:
        parts_en.append(f"{_num(d.growth)}x its early level {_num(d.early)}")
        parts_zh.append(f"为早期水平 {_num(d.early)} 的 {_num(d.growth)} 倍")
    detail_en, detail_zh = "; ".join(parts_en), "；".join(parts_zh)
    if sev == "ok":
        text = t(
            f"value scale: {_num(d.latest)}; {detail_en}",
            f"价值尺度：{_num(d.latest)}；{detail_zh}",
        )
    else:
        text = t(
            f"value divergence: {_num(d.latest)}; {detail_en}: the value estimates have left the"
            " range the rewards allow, feeding on their own bootstrapped targets",
            f"价值发散：{_num(d.latest)}；{detail_zh}：价值估计已超出奖励所允许的范围，在自举目标上自我放大",
        )
    return [Evidence("value_scale", sev, text, d.to_dict() | {"physical": physical})]


_CONVERGED_KEPT = 0.9  # the return holds at least 90 % of its gain over the start


def _converged(
    t: _Lang,
    evidence: list[Evidence],
    series: Mapping[str, Series],
    ctx: RunContext,
    early: float | None = None,
) -> list[Evidence]:
    """A low or falling entropy of a run whose return has learned and holds its best is a
    policy that knows what to do, not a collapse: the entropy's warnings (a low level, a cliff,
    a collapsing shape) become `watch`. Critical levels stay (a deterministic policy has no
    gradient left), and so does everything once the return gives its gain back.

    A language model's token entropy falls as RL sharpens its answers (an instruct model starts
    at a few tenths of a nat per token and halves within tens of updates on a task it already
    half solves: published runs in calibration/llm_corpus); what makes that fall a collapse is
    the reward going with it. So for a token policy the entropy's warnings are watched while
    the task reward holds where it started or above, and stay once it falls below that."""
    if ctx.action_space == "token":
        if not _narrowed_a_little(series.get("policy_entropy"), early):
            return evidence
        return _sharpening(t, evidence, series)
    if ctx.action_space not in ("discrete", "continuous"):
        return evidence
    flagged = [e for e in evidence if e.severity == "warning" and _entropy_low(e)]
    if not flagged:
        return evidence
    ret = next((series[m] for m in RETURN_METRICS if m in series), None)
    r = None if ret is None else return_reference(ret, ctx)
    if r is None or not r.improved:
        return evidence
    gain = r.best - r.start
    if r.best - r.now > (1.0 - _CONVERGED_KEPT) * gain + r.noise:
        return evidence
    out = [
        Evidence(e.kind, "watch", e.text, e.data) if any(e is f for f in flagged) else e
        for e in evidence
    ]
    text = t(
        f"converged: the return rose from {_num(r.start)} to {_num(r.best)} and holds"
        f" {_num(r.now)}: a narrow policy here has learned what to do, so its entropy warnings"
        " are watched, not alarmed",
        f"已收敛：回报从 {_num(r.start)} 升到 {_num(r.best)}，当前保持在 {_num(r.now)}：此时策略变窄是学会了"
        "该做什么，熵的警告仅作关注",
    )
    out.append(Evidence("converged", "ok", text, r.to_dict()))
    return out


_HALVED = 0.5
"""A token policy's reward at half its start or less: the line the token rules warn at."""
_SHARPENED_NATS = math.log(2.0)
"""The most a sharpening model's token entropy falls: the effective number of choices per token,
exp(entropy), at most halved."""


def _narrowed_a_little(s: Series | None, early: float | None) -> bool:
    """The token entropy fell less than ln 2 nats from its early level: a pretrained model that
    was already confident (0.2 nats is about 1.2 effective choices per token) sharpening, not a
    wide distribution collapsing (3 nats, about 20 choices, down to 1: a model from scratch, or
    one losing its answers). Published healthy runs fall 0.1-0.5 nats (calibration/llm_corpus);
    a random model on 24 tokens collapsing falls 1.7-2.3 (calibration corpus grpo_*)."""
    if s is None or early is None:
        return True
    f = s.finite()
    if not len(f):
        return True
    return early - float(f.values[-1]) < _SHARPENED_NATS


def _sharpening(t: _Lang, evidence: list[Evidence], series: Mapping[str, Series]) -> list[Evidence]:
    """A token policy's entropy warnings become `watch` unless the task reward went with it
    (see `_converged`): its rolling mean below where it started beyond noise, at half of it or
    less, as the token rules read a fallen reward (a dip of a quarter is a few prompts' batch
    swinging)."""
    flagged = [e for e in evidence if e.severity == "warning" and _entropy_low(e)]
    raw = series.get("raw_reward")
    if not flagged or raw is None:
        return evidence
    r = return_reference(raw, RunContext(action_space="token"))
    if r is not None and r.now < r.start - r.noise and r.now <= _HALVED * r.start:
        return evidence  # the reward went with it: the warnings stand
    if r is None:  # too few points to tell sharpening from collapse: not an alarm yet
        out = [
            Evidence(e.kind, "watch", e.text, e.data) if any(e is f for f in flagged) else e
            for e in evidence
        ]
        text = t(
            "too few reward points yet to tell a sharpening model from a collapsing one: the"
            " entropy's fall is watched until the reward shows which",
            "奖励的点数还太少，尚不能区分模型是在变锐还是在坍缩：熵的下降先作关注，待奖励表明是哪一种",
        )
        return [*out, Evidence("sharpening", "ok", text, {})]
    out = [
        Evidence(e.kind, "watch", e.text, e.data) if any(e is f for f in flagged) else e
        for e in evidence
    ]
    text = t(
        f"sharpening: the task reward holds ({_num(r.start)} at the start, {_num(r.now)} now,"
        f" noise {_num(r.noise)}): a language model's answers narrowing while they keep scoring"
        " is learning, so the entropy's warnings are watched; they stand again if the reward"
        " falls to half its start",
        f"变锐：任务奖励保持住了（起点 {_num(r.start)}，当前 {_num(r.now)}，噪声 {_num(r.noise)}）："
        "语言模型的回答在变窄而得分不降，这是在学习，熵的警告仅作关注；奖励一旦下降即恢复警告",
    )
    out.append(Evidence("sharpening", "ok", text, r.to_dict()))
    return out


def _entropy_low(e: Evidence) -> bool:
    """Entropy evidence that says "too low" (not a physical fact)."""
    if e.kind in ("entropy_cliff", "entropy_shape"):
        return True
    return e.kind == "alert" and e.data.get("condition") == "below" and not e.data.get("physical")


def _return_reference_evidence(
    t: _Lang, s: Series, ctx: RunContext, tuning: Tuning
) -> list[Evidence]:
    """The return against where it started, whether it ever improved, and a random policy's
    return (`return_refs`): a warning naming each finding with its numbers."""
    r = return_reference(s, ctx)
    if r is None:
        return []
    found = findings(r, tuning)
    parts_en, parts_zh = [], []
    if "worse_than_start" in found:
        # a log begun mid-run (`log_starts_mid_run`) starts from what the run had by then
        if r.mid_run:
            where_en, ref_en, had_en = (
                "where its log begins",
                f"at step {r.first_step:,}",
                "it had when its log began",
            )
            where_zh, ref_zh, had_zh = "日志开头时", f"第 {r.first_step:,} 步时为", "日志开始时已有"
        else:
            where_en, ref_en, had_en = "where it started", "at the start", "a fresh policy had"
            where_zh, ref_zh, had_zh = "起点", "起点为", "初始策略就有"
        parts_en.append(
            f"worse than {where_en}: rolling mean {_num(r.now)} vs {_num(r.start)} {ref_en}"
            f" ({r.window}-point means, noise {_num(r.noise)}): the run is losing what {had_en}"
        )
        parts_zh.append(
            f"比{where_zh}更差：滚动均值 {_num(r.now)}，{ref_zh} {_num(r.start)}（{r.window} 点均值，"
            f"噪声 {_num(r.noise)}）：运行正在丢掉{had_zh}的水平"
        )
    if "never_improved" in found:
        parts_en.append(
            f"never improved: the best rolling mean {_num(r.best)} is within noise ({_num(r.noise)})"
            f" of the start {_num(r.start)}, this far into the run: nothing has been learned"
        )
        parts_zh.append(
            f"从未改善：最佳滚动均值 {_num(r.best)} 与起点 {_num(r.start)} 相差在噪声"
            f"（{_num(r.noise)}）以内，而运行已过相当一段：什么也没学到"
        )
    if "below_random" in found:
        parts_en.append(
            f"below a random policy: rolling mean {_num(r.now)} vs {_num(r.random)} for uniformly"
            f" random actions on {ctx.env or 'this task'}"
        )
        parts_zh.append(
            f"低于随机策略：滚动均值 {_num(r.now)}，而 {ctx.env or '该任务'} 上均匀随机动作的回报为"
            f" {_num(r.random)}"
        )
    if found:
        text = t("; ".join(parts_en), "；".join(parts_zh))
    else:
        ref = (
            ""
            if r.random is None
            else t(f", random policy {_num(r.random)}", f"，随机策略 {_num(r.random)}")
        )
        text = t(
            f"references: start {_num(r.start)}, best {_num(r.best)}, now {_num(r.now)}{ref}",
            f"参照：起点 {_num(r.start)}，最佳 {_num(r.best)}，当前 {_num(r.now)}{ref}",
        )
    if r.mid_run:
        planned = f" of the planned {ctx.planned_steps:,}" if ctx.planned_steps else ""
        planned_zh = f"（计划共 {ctx.planned_steps:,} 步）" if ctx.planned_steps else ""
        text += t(
            f"; its log begins at step {r.first_step:,}{planned}: what the run learned before"
            " is not in it, so whether it ever improved is not judged",
            f"；日志从第 {r.first_step:,} 步开始{planned_zh}：此前学到的东西不在日志里，"
            "因此不判断它是否有过改善",
        )
    data = r.to_dict() | {"findings": list(found)}
    severity: Status = "warning" if found else "ok"
    if ctx.action_space == "token" and set(found) <= {"never_improved", "worse_than_start"}:
        # A language model starts from what pretraining taught it, which may be near the
        # task's ceiling (an instruct model at 0.89 on GSM8K: calibration/llm_corpus), and its
        # reward is a batch mean over a few prompts whose difficulty swings (that run dipped
        # to 0.64 and finished at 0.95): holding the start, or dipping below it, is watched;
        # the reward halved with a corroborating symptom, or gone with the groups' variance,
        # is judged by the token rules (rules.yaml)
        severity = "watch" if found else "ok"
    return [Evidence("return_reference", severity, text, data)]


def _spread_evidence(
    t: _Lang, metric_id: str, s: Series, ctx: RunContext, tuning: Tuning
) -> list[Evidence]:
    """A Gaussian policy's entropy judged both ways against its early level (`scale`)."""
    g = spread_growth(metric_id, s, ctx)
    if g is None:
        return []
    sev = _status(spread_severity(g.per_dim, tuning))
    if g.source == "action_std":
        seen_en = f"std {_num(math.exp(g.early))} -> {_num(math.exp(g.value))}"
        seen_zh = f"标准差 {_num(math.exp(g.early))} -> {_num(math.exp(g.value))}"
    else:
        seen_en = f"{_num(g.early)} -> {_num(g.value)} nats over {g.dims} action dimension(s)"
        seen_zh = f"{_num(g.early)} -> {_num(g.value)} nats（{g.dims} 个动作维度）"
    if sev == "ok":
        text = t(
            f"spread: {seen_en} since the start, each std x{_num(g.std_factor)}",
            f"离散度：自起点 {seen_zh}，每维标准差 x{_num(g.std_factor)}",
        )
    elif g.per_dim > 0:
        text = t(
            f"entropy explosion: {seen_en} since the start: each std grew about"
            f" {_num(g.std_factor)}x; the objective pays the policy to be random (an entropy bonus"
            " too large for the reward scale)",
            f"熵爆炸：自起点 {seen_zh}：每维标准差约增大 {_num(g.std_factor)} 倍；目标函数在奖励策略变随机"
            "（熵奖励相对奖励尺度过大）",
        )
    else:
        text = t(
            f"entropy collapse: {seen_en} since the start: each std shrank to about"
            f" {_num(g.std_factor)} of where it began",
            f"熵坍缩：自起点 {seen_zh}：每维标准差缩小到起点的约 {_num(g.std_factor)}",
        )
    return [Evidence("entropy_spread", sev, text, g.to_dict())]


_CLIFF_FRACTION = 0.5  # entropy halved within the cliff window
_CLIFF_NATS = math.log(10.0)  # a Gaussian's entropy falling ln 10 nats: its std shrank tenfold
_CLIFF_POINTS = 5


def _entropy_cliff(t: _Lang, s: Series, ctx: RunContext, early: float | None) -> list[Evidence]:
    """A cliff relative to the entropy's level, not to the window's range: for discrete and
    token policies the latest value at most half the highest of the last points and the fall at
    least a tenth of the scale (ln n, or the run's early level); for continuous (differential,
    possibly negative) entropy a fall of ln 10 nats, the action std shrinking tenfold."""
    f = s.finite()
    if len(f) < 3:
        return []
    # persistence: the last two points both far below the highest of the points before them
    # (one low point is an excursion, `watch` through the band)
    recent = f.tail(_CLIFF_POINTS + 2)
    before = Series(recent.steps[:-2], recent.values[:-2])
    top_i = int(np.argmax(before.values))
    top = float(before.values[top_i])
    now = float(max(recent.values[-2], recent.values[-1]))
    since = int(before.steps[top_i])
    if ctx.action_space == "continuous":
        fall = top - now
        if fall < _CLIFF_NATS:
            return []
        text = t(
            f"entropy cliff: {_num(top)} -> {_num(now)} nats since step {since:,} (a fall of"
            f" {_num(fall)} nats held two points: the action std shrank {math.exp(fall):.0f}x)",
            f"熵断崖：自第 {since:,} 步 {_num(top)} -> {_num(now)} nats（下降 {_num(fall)} nats 并持续两个点：动作标准差缩小 {math.exp(fall):.0f} 倍）",
        )
        return [
            Evidence("entropy_cliff", "warning", text, {"from": top, "to": now, "since": since})
        ]
    scale = ctx.max_entropy if ctx.action_space == "discrete" else early
    if scale is None or scale <= 0 or top <= 0:
        return []
    if now > _CLIFF_FRACTION * top or (top - now) < 0.1 * scale:
        return []
    # ... and far below where the points before stood, not only below a one-point spike among
    # them: an entropy settling back after a brief rise has not collapsed (calibration/
    # llm_corpus: a GRPO run's token entropy 0.09 -> 0.16 for one point, then 0.05 as before)
    level = float(np.median(before.values))
    if now > _CLIFF_FRACTION * level:
        return []
    text = t(
        f"entropy cliff: {_num(top)} -> {_num(now)} nats since step {since:,} (at most {now / top:.0%}"
        f" of that level for the last two points; scale {_num(scale)})",
        f"熵断崖：自第 {since:,} 步 {_num(top)} -> {_num(now)} nats（最近两个点至多为该水平的 {now / top:.0%}；尺度 {_num(scale)}）",
    )
    return [Evidence("entropy_cliff", "warning", text, {"from": top, "to": now, "since": since})]


def _no_data_reason(
    t: _Lang, s: Series | None, finite: int, metric: Metric, ctx: RunContext
) -> str:
    if s is None or s.empty:
        if ctx.algorithm and not _applies(metric, ctx):
            return t(
                f"not logged: {ctx.algorithm} has none (it applies to {', '.join(metric.applies_to)})",
                f"未记录：{ctx.algorithm} 没有这一指标（适用于 {', '.join(metric.applies_to)}）",
            )
        return t("no points logged", "没有记录任何数据点")
    if finite == 0:
        return t(
            f"all {len(s)} logged values are NaN or infinite",
            f"记录的 {len(s)} 个值全部是 NaN 或无穷大",
        )
    return t(
        f"only {finite} finite point(s), at least {MIN_POINTS} needed",
        f"只有 {finite} 个有效数据点，至少需要 {MIN_POINTS} 个",
    )


def _related(c: Coupling, other: Series, window: int, end: int) -> Related:
    return Related(c.metric, c.r, c.points, change_pct(other.window(window, end)))


def _band_evidence(t: _Lang, band: BandState | None, summary: Summary) -> list[Evidence]:
    if band is None:
        return []
    data: dict[str, object] = band.to_dict() | {"value": summary.value, "step": summary.step}
    if band.inside is None:
        text = t(
            f"{band.stage}-stage band is relative to {band.basis}, which this run does not give; band not judged",
            f"{_zh(band.stage)}阶段的健康区间相对于 {band.basis}，本次运行未提供该值，未判断区间",
        )
        return [Evidence("band", "ok", text, data)]
    rng = f"[{_num(band.low)}, {_num(band.high)}]"
    if band.inside:
        text = t(
            f"inside the {band.stage}-stage band {rng}",
            f"处于{_zh(band.stage)}阶段健康区间 {rng} 内",
        )
        return [Evidence("band", "ok", text, data)]
    text = t(
        f"{_num(summary.value)} is outside the {band.stage}-stage band {rng}",
        f"{_num(summary.value)} 超出{_zh(band.stage)}阶段健康区间 {rng}",
    )
    return [Evidence("band", "watch", text, data)]


_FACT_KINDS = ("nonfinite", "limits")


def is_fact(e: Evidence) -> bool:
    """A physical fact: judged from the first point, in warm-up too."""
    return e.kind in _FACT_KINDS or bool(e.data.get("physical"))


def _is_physical(alert: Alert) -> bool:
    """An alert whose one point is already the damage: an absolute threshold held for one point
    (policy KL above 1 nat in one update, a non-finite value counted)."""
    return alert.basis == "absolute" and alert.for_steps == 1


def _applies(metric: Metric, ctx: RunContext) -> bool:
    names = {a.lower() for a in metric.applies_to}
    if names & {"all", "unknown"} or ctx.algorithm is None:
        return True
    algo = ctx.algorithm.lower()
    mine = {algo, *algo.split("/"), "qr-dqn" if algo == "dqn" else algo}
    if ctx.family == "off_policy":
        mine.add("off_policy")
    if ctx.family == "llm":
        mine |= {"llm", "rlhf_ppo"}
    return bool(names & mine)


def _nonfinite_evidence(t: _Lang, metric: Metric, s: Series) -> list[Evidence]:
    """NaN/Inf at the latest points: one is a warning; two in a row, or every value the metric
    ever logged, is critical (a loss that overflowed stays overflowed; parameters a NaN reached
    stay NaN). A variance ratio's NaN on constant input (`undefined_when_constant`) is a fact
    about the batch and only `watch`."""
    bad = ~np.isfinite(s.values)
    if not bad.size or not bad[-1]:
        return []
    good = np.flatnonzero(~bad)
    run = int(bad.size - 1 - good[-1]) if good.size else int(bad.size)
    since = int(s.steps[bad.size - run])
    total = int(bad.sum())
    data: dict[str, object] = {
        "step": s.last_step,
        "since_step": since,
        "consecutive": run,
        "nonfinite_points": total,
        "last_finite_step": int(s.steps[good[-1]]) if good.size else None,
    }
    if not good.size:
        severity: Status = "critical"
        text = t(
            f"every one of the {total} logged value(s) (steps {int(s.steps[0]):,}-{s.last_step:,}) is NaN or"
            " infinite: whatever computes it is broken (an overflowed loss, NaN parameters), and"
            " updates driven by it are not learning",
            f"记录的全部 {total} 个值（第 {int(s.steps[0]):,}-{s.last_step:,} 步）都是 NaN 或无穷大："
            "计算它的环节已经坏了（损失溢出、参数变成 NaN），由它驱动的更新不是在学习",
        )
    else:
        last = int(s.steps[good[-1]])
        severity = "critical" if run >= 2 else "warning"
        text = t(
            f"the last {run} logged value(s) (since step {since:,}) are NaN or infinite; the last"
            f" finite value was at step {last:,}",
            f"最近 {run} 个记录值（自第 {since:,} 步）是 NaN 或无穷大；最后一个有效值在第 {last:,} 步",
        )
    if metric.limits.undefined_when_constant:
        # a ratio whose denominator is a variance is undefined (0/0) on constant inputs: SB3
        # logs explained variance as NaN when the returns do not vary
        severity = "watch"
    return [Evidence("nonfinite", severity, text, data)]


def _physical_facts(t: _Lang, metric: Metric, s: Series, cfg: Mapping[str, Any]) -> list[Evidence]:
    """What a card judges before the metric has history: non-finite values, the latest finite
    value past its physical limits, and the physical alerts (`_is_physical`)."""
    out = _nonfinite_evidence(t, metric, s)
    f = s.finite()
    if not len(f):
        return out
    value = float(f.values[-1])
    if not metric.limits.contains(value):
        out += _limits_evidence(t, metric, value)
    states = [a for a in alert_states(metric, s, cfg, None) if _is_physical(a.alert)]
    out += _alert_evidence(t, states, False, ())
    return out


def _facts_card(
    t: _Lang,
    metric: Metric,
    title: str,
    lang: str,
    s: Series | None,
    finite: int,
    why: str,
    facts: Sequence[Evidence],
    ctx: RunContext,
) -> Card:
    """The card of a metric too new to judge against its history but whose physical facts are
    already alarming."""
    status: Status = "ok"
    for e in facts:
        status = _max(status, e.severity)
    f = None if s is None else s.finite()
    value = float(f.values[-1]) if f is not None and len(f) else None
    step = int(f.steps[-1]) if f is not None and len(f) else (None if s is None else s.last_step)
    texts = "; ".join(e.text for e in facts if e.severity != "ok")
    reading = t(
        f"{title}: {why}, too few to judge against its history; judged on physical facts: {texts}."
        f" Status: {status}. ({ctx.describe()})",
        f"{title}：{why}，不足以对照历史判断；按物理事实判断：{texts}。状态：{_zh(status)}。（{ctx.describe('zh')}）",
    )
    return Card(
        metric.id,
        title,
        metric.unit,
        lang,
        status,
        reading,
        step=step,
        value=value,
        reason=why,
        actions=_actions(metric, (), status, lang),
        evidence=tuple(facts),
        context=ctx,
    )


def _limits_evidence(t: _Lang, metric: Metric, value: float) -> list[Evidence]:
    lim = f"[{_num(metric.limits.min)}, {_num(metric.limits.max)}]"
    return [
        Evidence(
            "limits",
            "warning",
            t(
                f"{_num(value)} is outside the physical limits {lim}: check how it is logged",
                f"{_num(value)} 超出物理范围 {lim}：请检查记录方式",
            ),
            {"value": value, "min": metric.limits.min, "max": metric.limits.max},
        )
    ]


def _limit_evidence(t: _Lang, metric: Metric, s: Series, summary: Summary) -> list[Evidence]:
    out = _nonfinite_evidence(t, metric, s)
    assert summary.value is not None
    if not metric.limits.contains(summary.value):
        out += _limits_evidence(t, metric, summary.value)
    return out


def _alert_evidence(
    t: _Lang,
    alerts: Sequence[AlertState],
    corroborated: bool,
    coupled: Sequence[Coupling],
    confirming: Sequence[str] = (),
) -> list[Evidence]:
    out = []
    for a in alerts:
        if a.threshold is None or a.consecutive == 0:
            continue
        cond = {"above": ">", "below": "<", "abs_above": "|x| >"}[a.alert.condition]
        head = t(
            f"{cond} {_num(a.threshold)} ({a.alert.severity} threshold) for {a.consecutive} consecutive point(s)"
            f" since step {a.since_step:,}, {a.alert.for_steps} needed",
            f"{cond} {_num(a.threshold)}（{_zh(a.alert.severity)}阈值）已连续 {a.consecutive} 个点"
            f"（自第 {a.since_step:,} 步），需要 {a.alert.for_steps} 个",
        )
        severity: Status = "watch"
        if a.active:
            severity = a.alert.severity
            if severity == "critical" and not a.alert.corroborate:
                head += t("; a physical fact, needs no corroboration", "；物理事实，无需佐证")
            elif severity == "critical" and not corroborated:
                severity = "warning"
                head += t(
                    "; no related metric or critical rule corroborates it yet",
                    "；尚无相关指标或严重规则佐证",
                )
            elif severity == "critical" and coupled:
                pairs = ", ".join(f"{c.metric} r={c.r:+.2f}" for c in coupled)
                head += t(f"; corroborated by {pairs}", f"；相关指标佐证：{pairs}")
            elif severity == "critical" and confirming:
                names = ", ".join(confirming)
                head += t(
                    f"; corroborated by {names}, past its own alert threshold at the same time",
                    f"；相关指标 {names} 同时越过其自身告警阈值，佐证成立",
                )
        data = a.to_dict()
        if _is_physical(a.alert):
            data["physical"] = True
        out.append(Evidence("alert", severity, head, data))
    return out


def _rule_evidence(t: _Lang, r: RuleResult, lang: str) -> Evidence:
    obs = "; ".join(
        f"{o.metric} {o.stat} = {_num(o.observed)} {o.op} {_num(o.threshold)}"
        for o in r.observations
    )
    text = t(
        f"rule {r.rule.id} ({r.rule.severity}): {r.rule.reading.get(lang)} [{obs}; held {r.consecutive}"
        f" evaluation point(s) to step {r.step:,}, window {r.rule.window} steps]",
        f"规则 {r.rule.id}（{r.rule.severity}）：{r.rule.reading.get(lang)} [{obs}；连续 {r.consecutive}"
        f" 个评估点成立，至第 {r.step:,} 步，窗口 {r.rule.window} 步]",
    )
    return Evidence("rule", r.rule.severity, text, r.to_dict())


def _silence_evidence(t: _Lang, metric_id: str, s: Series, opts: CardOptions) -> list[Evidence]:
    if metric_id not in opts.silence_metrics:
        return []
    v = s.finite().values
    nonzero = np.flatnonzero(v != 0.0)
    if nonzero.size == 0:
        return []
    zeros = int(v.size - 1 - nonzero[-1])
    if zeros < opts.silence_points:
        return []
    history = int(np.count_nonzero(v[: nonzero[-1] + 1]))
    # silence is a change from active to zero: a metric that was mostly zero all along
    # (a small clip fraction that rarely registers) has gone nowhere
    if history < 0.5 * (nonzero[-1] + 1):
        return []
    text = t(
        f"exactly 0 for the last {zeros} points after {history} non-zero point(s): silence can be a symptom"
        " (collapsed policy, no learning signal)",
        f"在 {history} 个非零点之后，最近 {zeros} 个点恰好为 0：沉默本身可能是症状（策略坍缩、没有学习信号）",
    )
    return [Evidence("silence", "warning", text, {"zero_points": zeros, "nonzero_points": history})]


def _entropy_evidence(
    t: _Lang, s: Series, ctx: RunContext, early: float | None, stages: Stages
) -> list[Evidence]:
    out = _entropy_cliff(t, s, ctx, early)
    shape = classify_entropy(s)
    if shape.kind != "insufficient":
        rng = f"{shape.start_step:,}-{shape.end_step:,}"
        sev: Status = "ok"
        if shape.collapse:
            sizes = ", ".join(f"{_num(d.size)} @ {d.step:,}" for d in shape.drops)
            en = f"entropy shape over steps {rng}: {shape.kind} (drops {sizes}; net {_num(shape.net_change)})"
            zh = f"第 {rng} 步的熵形态：{_zh(shape.kind)}（下降 {sizes}；净变化 {_num(shape.net_change)}）"
            # the shape finds drops relative to the window's range; it is a warning only when
            # they add up to half the entropy's level at the shape's start (a 0.2-nat wobble of a
            # noisy policy at 0.5 nats is a shape, not a collapse)
            f = s.finite()
            first = f.values[f.steps >= (shape.start_step or 0)][:10]
            start = float(first.mean()) if first.size else 0.0
            net = shape.net_change or 0.0
            sev = "warning" if start > 0 and -net >= 0.5 * start else "watch"
        elif shape.kind == "sawtooth":
            en = (
                f"entropy shape over steps {rng}: sawtooth, period ~{_num(shape.period_steps)} steps,"
                f" autocorrelation peak {_num(shape.acf_peak)}, {shape.sign_changes} sign changes"
            )
            zh = (
                f"第 {rng} 步的熵形态：锯齿震荡，周期约 {_num(shape.period_steps)} 步，"
                f"自相关峰值 {_num(shape.acf_peak)}，{shape.sign_changes} 次符号变化"
            )
            sev = "watch"
        else:
            en = (
                f"entropy shape over steps {rng}: {shape.kind} (slope {_num(shape.slope_per_1k)}/1k steps,"
                f" R² {_num(shape.r2)})"
            )
            zh = f"第 {rng} 步的熵形态：{_zh(shape.kind)}（斜率 {_num(shape.slope_per_1k)}/千步，R² {_num(shape.r2)}）"
        out.append(Evidence("entropy_shape", sev, t(en, zh), shape.to_dict()))
    grad = entropy_gradient(s)
    if grad is not None and grad.warning:
        base = "n/a" if grad.baseline_per_step is None else _num(grad.baseline_per_step * 1000)
        eta_en = eta_zh = ""
        if grad.steps_to_zero is not None:
            eta_en = f"; zero in ~{grad.steps_to_zero:,.0f} steps at this rate"
            eta_zh = f"；按此速率约 {grad.steps_to_zero:,.0f} 步后归零"
        out.append(
            Evidence(
                "entropy_gradient",
                "watch",
                t(
                    f"entropy gradient {_num(grad.per_step * 1000)}/1k steps over steps"
                    f" {grad.start_step:,}-{grad.end_step:,} vs {base}/1k before{eta_en}",
                    f"第 {grad.start_step:,}-{grad.end_step:,} 步熵梯度 {_num(grad.per_step * 1000)}/千步，"
                    f"此前为 {base}/千步{eta_zh}",
                ),
                grad.to_dict(),
            )
        )
    return out


def _kl_evidence(t: _Lang, s: Series, eps: float | None) -> list[Evidence]:
    f = s.finite()
    zones = [kl_zone(float(v), eps) for v in f.values[-_KL_DANGER_POINTS:]]
    now = zones[-1] if zones else None
    if now is None:
        return []
    danger_run = (
        all(z is not None and z.zone == "danger" for z in zones) and len(zones) == _KL_DANGER_POINTS
    )
    sev: Status = "ok" if now.zone == "safe" else "watch"
    if danger_run:
        sev = "warning"
    text = t(
        f"KL / clip epsilon = {_num(now.kl)} / {_num(now.clip_epsilon)} = {now.ratio:.2f}: {now.zone} zone"
        " (safe < 0.5, warning 0.5-0.8, danger >= 0.8)",
        f"KL / clip epsilon = {_num(now.kl)} / {_num(now.clip_epsilon)} = {now.ratio:.2f}：{_zh(now.zone)}区"
        "（安全 < 0.5，预警 0.5-0.8，危险 >= 0.8）",
    )
    if danger_run:
        text += t(f" for the last {_KL_DANGER_POINTS} points", f"，已持续 {_KL_DANGER_POINTS} 个点")
    return [Evidence("kl_zone", sev, text, now.to_dict())]


def _fingerprint_evidence(t: _Lang, s: Series) -> list[Evidence]:
    fp = reward_fingerprint(s)
    if fp is None:
        return []
    text = t(
        f"reward fingerprint over the last {fp.points} points: density {fp.density:.2f} (share non-zero),"
        f" variance {_num(fp.variance)}, consistency (lag-1 autocorrelation) {_num(fp.consistency)}",
        f"最近 {fp.points} 个点的奖励指纹：密度 {fp.density:.2f}（非零占比），方差 {_num(fp.variance)}，"
        f"一致性（滞后 1 自相关）{_num(fp.consistency)}",
    )
    return [Evidence("fingerprint", "ok", text, fp.to_dict())]


def _component_evidence(t: _Lang, series: Mapping[str, Series], ctx: RunContext) -> list[Evidence]:
    """The reward's parts moving apart (`components_diverge`), named with each part's change: a
    warning when the part falling is the one the run names its task's (`task_reward`), else a
    watch that says how to name it: with several parts (a multi-objective reward), two moving
    apart can be the trade-off they were written for (calibration/llm_corpus: a healthy run's
    six-part market reward)."""
    parts = {k.split("/", 1)[1]: s for k, s in series.items() if k.startswith("reward_component/")}
    res = components_diverge(parts)
    if not res.fired:
        return []
    changes = ", ".join(f"{k.removesuffix(' change')} {_num(v)}" for k, v in res.observed.items())
    task_falls = ctx.task_reward is not None and ctx.task_reward in res.falling
    if task_falls:
        text = t(
            f"reward parts moving apart over the last {res.window_steps:,} steps ({res.reason};"
            f" changes {changes}): the task's own score ({ctx.task_reward}) falls while another"
            " part rises: the policy buys its reward from the other part: reward hacking",
            f"奖励的各部分在最近 {res.window_steps:,} 步背道而驰（{res.reason}；变化 {changes}）："
            f"任务本身的得分（{ctx.task_reward}）下降而另一部分上升：策略在从另一部分换取奖励，这是奖励作弊",
        )
        return [Evidence("sentinel", "warning", text, res.to_dict())]
    text = t(
        f"reward parts moving apart over the last {res.window_steps:,} steps ({res.reason};"
        f" changes {changes}): if the falling part is the task's own score, the policy buys its"
        " reward from the other (reward hacking); say which part is the task's with --set"
        " task_reward=NAME and this is judged",
        f"奖励的各部分在最近 {res.window_steps:,} 步背道而驰（{res.reason}；变化 {changes}）："
        "若下降的是任务本身的得分，策略就在从另一部分换取奖励（奖励作弊）；用 --set task_reward=NAME"
        " 指明任务的部分即可据此判断",
    )
    return [Evidence("sentinel", "watch", text, res.to_dict())]


def _sentinel_evidence(
    t: _Lang, metric_id: str, series: Mapping[str, Series], opts: CardOptions, covered: set[str]
) -> list[Evidence]:
    out = []
    for name, a, b in opts.sentinels:
        if metric_id not in (a, b) or name in covered or a not in series or b not in series:
            continue
        res = _SENTINEL_FNS[name](series[a], series[b])
        if not res.fired:
            continue
        show = _num if name == "shaping_gain" else _pct  # gains in reward units, not percent
        obs = ", ".join(f"{k} {show(v)}" for k, v in res.observed.items())
        text = t(
            f"sentinel {name}: {a} vs {b} over the last {res.window_steps} steps: {obs}",
            f"哨兵 {name}：最近 {res.window_steps} 步 {a} 与 {b}：{obs}",
        )
        out.append(Evidence("sentinel", "warning", text, res.to_dict()))
    return out


def _reading(
    t: _Lang,
    title: str,
    metric: Metric,
    summary: Summary,
    status: Status,
    evidence: Sequence[Evidence],
    ctx: RunContext | None = None,
) -> str:
    assert summary.step is not None
    unit = "" if metric.unit in ("none", "ratio") else f" {metric.unit}"
    against = _against_mean(t, summary)
    parts = [
        t(
            f"{title} = {_num(summary.value)}{unit} at step {summary.step:,}, {against} vs its"
            f" run mean {_num(summary.mean)} ({summary.mean_points:,} points)",
            f"{title} 在第 {summary.step:,} 步为 {_num(summary.value)}{unit}，相对全程均值 {_num(summary.mean)}"
            f" 偏离 {against}（{summary.mean_points:,} 个点）",
        ),
    ]
    if summary.cv is not None:  # none when the window holds under two points (sparse cadence)
        parts.append(
            t(
                f"CV {_num(summary.cv)} over the last {summary.cv_steps:,} steps",
                f"最近 {summary.cv_steps:,} 步变异系数 {_num(summary.cv)}",
            )
        )
    if summary.trend is not None:
        tr = summary.trend
        parts.append(
            t(
                f"trend {_num(tr.slope_per_1k)}/1k steps ({tr.direction}) over the last {summary.recent_steps:,} steps",
                f"最近 {summary.recent_steps:,} 步趋势 {_num(tr.slope_per_1k)}/千步（{ZH_WORDS.get(tr.direction, tr.direction)}）",
            )
        )
    ranked = sorted(
        (e for e in evidence if e.severity != "ok" or e.kind in _ALWAYS_READ),
        key=lambda e: -_RANK[e.severity],
    )
    parts += [e.text for e in ranked]
    verdict = t(f"Status: {status}.", f"状态：{_zh(status)}。")
    if ctx is not None:
        verdict += t(f" ({ctx.describe()})", f"（{ctx.describe('zh')}）")
    return t("; ".join(parts) + ". " + verdict, "；".join(parts) + "。" + verdict)


def _actions(
    metric: Metric,
    fired: Sequence[RuleResult],
    status: Status,
    lang: str,
    band: BandState | None = None,
) -> tuple[str, ...]:
    if status in ("ok", "no_data"):
        return ()
    items: list[str] = []
    rules: list[Rule] = [r.rule for r in sorted(fired, key=lambda r: -_RANK[r.rule.severity])]
    for rule in rules:
        items += [a.get(lang) for a in rule.actions]
    side = _band_side(band)
    for sc in metric.failure_scenarios:
        # advice by direction: a scenario for one side of the band is skipped on the other side
        if side is not None and sc.direction is not None and sc.direction != side:
            continue
        items += [c.get(lang) for c in sc.check]
        items += [c.get(lang) for c in sc.change]
    return tuple(dict.fromkeys(items))


def _band_side(band: BandState | None) -> str | None:
    if band is None or band.inside is not False:
        return None
    if band.low is not None and band.value < band.low:
        return "below"
    if band.high is not None and band.value > band.high:
        return "above"
    return None
