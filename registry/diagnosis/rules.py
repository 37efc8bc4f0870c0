"""Evaluate the registry's multi-metric rules over step windows.

At an evaluation point (a step where any of the rule's metrics was logged) each condition's
statistic is computed from the rule's window: the last `window` logged points of its metric up
to that step (points, not steps: an SB3 point is a rollout of hundreds of env steps, a TRL
point one update, so a window in steps fits one framework only); the conjunction holds when every metric has at least `min_points` finite points there and
every condition holds. A rule fires when the conjunction held at its last `for_steps` evaluation
points in a row. Statistics (see `rules.schema.json`): last, mean, min, max, std (population),
cv = std / |mean|, slope_per_1k, change_pct (last quarter of the points vs the first quarter, in
percent of the first), abs_change_pct, outside_band (1 when the latest value is outside its stage
band, 0 inside), relative_to_early (latest / mean of the run's early-stage values), abs_max,
share_above (the share of the window's points above the condition's `level`: how often, not
how long in a row), fraction_of_scale (latest / the metric's scale: ln n for a discrete policy's entropy, else the
early value), drop_from_best (see `drop_from_best`: the share of the run's gain lost since its
running best, over the whole history, not the window), since_start_abs_max (the largest
magnitude over the whole history, not the window: "exactly 0 since training began"),
never_improved (1 when the return's references (`return_refs`) find it never rose above its start
by more than its noise, 0 when it did; over the whole history, with the run's context as the
cards read it: first update, end of exploration, planned length, random-policy return).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..catalog import Registry
from ..model import Metric, Rule, Stages
from .bands import band_state, early_mean, max_entropy
from .context import log_starts_mid_run, printed_resolution, zero_by_construction
from .stats import Series, change_pct, latest, slope_per_1k

__all__ = [
    "STATS",
    "Observation",
    "PointResult",
    "RuleContext",
    "RuleResult",
    "evaluate_point",
    "evaluate_rule",
    "evaluate_rules",
    "fired_at",
    "window_stat",
]

STATS = (
    "last",
    "mean",
    "min",
    "max",
    "std",
    "cv",
    "slope_per_1k",
    "change_pct",
    "abs_change_pct",
    "outside_band",
    "relative_to_early",
    "abs_max",
    "fraction_of_scale",
    "drop_from_best",
    "acceleration",
    "share_above",
    "since_start_abs_max",
    "never_improved",
)


@dataclass(frozen=True)
class RuleContext:
    """What rule statistics need besides the series: stage boundaries, run config, metric bands."""

    stages: Stages
    config: Mapping[str, Any]
    metrics: Mapping[str, Metric]
    # the most points a window may span: a tenth of the run (registry timing), since a change
    # over the whole run is its convergence, not an event; None: the rule's own window
    max_window: int | None = None
    # metrics the run's setup makes 0 whatever its health (`zero_by_construction`, read from
    # the config): a rule over one is unknown, never an alarm
    constructed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # half the last digit the run's log printed its values with (`printed_resolution`): a
    # condition on a value's own level finer than that is unknown, never an alarm
    resolution: float | None = None

    @classmethod
    def of(
        cls,
        registry: Registry,
        config: Mapping[str, Any] | None = None,
        stages: Stages | None = None,
        run_points: int | None = None,
    ) -> RuleContext:
        cfg = dict(config or {})
        cap = None
        if run_points is not None and "stage_boundaries" not in cfg:
            cap = max(4, math.ceil(registry.timing.early_fraction * run_points))
        return cls(
            stages or registry.stages_for(cfg),
            cfg,
            {m.id: m for m in registry.metrics},
            cap,
            zero_by_construction(cfg),
            printed_resolution(cfg),
        )

    def window(self, rule: Rule) -> tuple[int, int]:
        """The rule's window and minimum points, in points, within the cap. A rule of shares
        only (`share_above`) is not capped: it counts how often, not how far a value moved, so
        the cap's reason (a change over the whole run is its convergence) does not hold, and a
        capped window of a short run would make a short burst a share."""
        shares = all(c.stat == "share_above" for c in rule.conditions)
        if self.max_window is None or rule.window <= self.max_window or shares:
            return rule.window, rule.min_points
        return self.max_window, min(rule.min_points, self.max_window)


def window_stat(
    stat: str,
    window: Series,
    ctx: RuleContext,
    metric_id: str,
    early_value: float | None,
    history: Series | None = None,
    level: float | None = None,
) -> float | None:
    """One condition statistic over a window of finite points; None when it is undefined there.
    `history` (the whole series up to the window's end) is what `drop_from_best` reads, `level`
    what `share_above` counts the points above."""
    if stat == "drop_from_best":
        so_far = history if history is not None else window
        if log_starts_mid_run(ctx.config.get("planned_steps"), so_far.steps):
            return None  # what the run gained before its log began is not in it
        return drop_from_best(so_far)
    if stat == "acceleration":
        return acceleration(window, history)
    if stat == "since_start_abs_max":
        whole = (history if history is not None else window).finite().values
        return float(np.abs(whole).max()) if whole.size else None
    if stat == "never_improved":
        return _never_improved(history if history is not None else window, ctx.config)
    f = window.finite()
    v = f.values
    if v.size == 0:
        return None
    if stat == "abs_max":
        return float(np.abs(v).max())
    if stat == "share_above":
        return None if level is None else float(np.mean(v > level))
    if stat == "fraction_of_scale":
        scale = _scale(ctx, metric_id, early_value)
        return None if scale is None else float(v[-1]) / scale
    if stat == "last":
        return float(v[-1])
    if stat == "mean":
        return float(v.mean())
    if stat == "min":
        return float(v.min())
    if stat == "max":
        return float(v.max())
    if stat == "std":
        return float(v.std())
    if stat == "cv":
        m = float(v.mean())
        return None if m == 0.0 else float(v.std()) / abs(m)
    if stat == "slope_per_1k":
        return slope_per_1k(f)
    if stat == "change_pct":
        return change_pct(f)
    if stat == "abs_change_pct":
        c = change_pct(f)
        return None if c is None else abs(c)
    if stat == "outside_band":
        metric = ctx.metrics.get(metric_id)
        point = latest(f)
        if metric is None or point is None:
            return None
        band = band_state(metric, point.step, point.value, ctx.stages, ctx.config, early_value)
        if band is None or band.inside is None:
            return None
        return 0.0 if band.inside else 1.0
    if stat == "relative_to_early":
        if early_value is None or early_value == 0.0:
            return None
        return float(v[-1]) / early_value
    if stat == "significant_relative_to_early":
        return _significant_ratio(f, history, early_value)
    if stat == "max_relative_to_early":
        if early_value is None or early_value <= 0.0:
            return None
        return float(v.max()) / early_value
    raise ValueError(f"unknown rule statistic {stat!r}")


def _never_improved(history: Series, config: Mapping[str, Any]) -> float | None:
    """1.0 when the return never rose above its start, 0.0 when it did, None while too short to
    tell: the return references' own finding (`return_refs.findings`), one decision for the card
    and the rules. The context fields it needs are those `card.with_context` puts in the config."""
    from .context import RunContext  # here: return_refs reads this module's constants
    from .return_refs import findings, return_reference
    from .tuning import Tuning

    def _int(key: str) -> int | None:
        v = config.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    random = config.get("random_return")
    ctx = RunContext(
        planned_steps=_int("planned_steps"),
        first_update=_int("first_update"),
        exploration_end=_int("exploration_end"),
        random_return=float(random) if isinstance(random, int | float) else None,
    )
    ref = return_reference(history, ctx)
    if ref is None:
        return None
    return 1.0 if "never_improved" in findings(ref, Tuning()) else 0.0


def _significant_ratio(f: Series, history: Series | None, early: float | None) -> float | None:
    """The latest value as a multiple of the early value, judged only when it differs from
    the early value by more than `SIGNIFICANCE` standard errors of one point against the early
    median (the error from the history's point-to-point differences, as `drop_from_best`):
    a batch mean over a few prompts swings by itself, and halving within that swing is noise."""
    if early is None or early <= 0.0:
        return None
    past = (history if history is not None else f).finite().values
    if past.size < 3:
        return None
    sigma = float(np.std(np.diff(past))) / math.sqrt(2.0)
    last = float(f.values[-1])
    if abs(last - early) <= SIGNIFICANCE * sigma * math.sqrt(1.0 + 1.0 / EARLY_POINTS):
        return None
    return last / early


def _scale(ctx: RuleContext, metric_id: str, early_value: float | None) -> float | None:
    metric = ctx.metrics.get(metric_id)
    space = ctx.config.get("action_space")
    bands = None if metric is None else metric.bands_for(space)
    if bands is not None and bands.basis == "max_entropy":
        scale = max_entropy(ctx.config)
        if scale is not None:
            return scale
    if metric is not None and metric.unit == "nats" and space == "continuous":
        return None  # differential entropy has no scale to be a fraction of
    return early_value if early_value is not None and early_value > 0 else None


EARLY_POINTS = 5  # the early median's points (registry timing baseline_points)
SMOOTH_FRACTION = 0.1  # the rolling mean spans 10 % of the points so far (at least 5)
SMOOTH_MIN = 5
SIGNIFICANCE = (
    3.0  # a gain or a drop counts past 3 standard errors of a difference of two such means
)


_LEVEL_NOISE = 0.05
"""Rises under 5 % of a metric's level are noise to `acceleration`: the floor of its divisor."""


def _rise(v: npt.NDArray[np.float64]) -> float:
    q = max(1, v.size // 4)
    return float(v[-q:].mean() - v[:q].mean())


def acceleration(window: Series, history: Series | None) -> float | None:
    """How much faster the metric rises in the window than over as many points just before it:
    rise(window) / rise(previous), each rise the mean of the last quarter minus the mean of the
    first (as `change_pct` reads a window). The previous rise is floored at 5 % of the previous
    level, so a rise after a flat stretch reads as a large acceleration.

    None (not judged) without a previous window of four finite points, or when the previous
    window sits at exactly zero and did not rise: a quantity that starts at zero by construction
    (the KL to a reference the policy starts equal to) has no level yet to surge from, and its
    climb out of zero is how every run starts, not a symptom."""
    if history is None:
        return None
    n = len(window)
    before = history.values[max(0, len(history) - 2 * n) : len(history) - n]
    now = window.values[np.isfinite(window.values)]
    before = before[np.isfinite(before)]
    if now.size < 4 or before.size < 4:
        return None
    previous = _rise(before)
    level = abs(float(before.mean()))
    if level == 0.0 and previous <= 0.0:
        return None
    return _rise(now) / max(previous, _LEVEL_NOISE * level, 1e-12)


def drop_from_best(series: Series) -> float | None:
    """The share of the run's gain lost since its best: (best - now) / (best - start) of the
        rolling mean of the reward (over 10 % of the points so far, at least 5), so 0 at a new best,
        1 back at the start level, above 1 below it. None (not judged) while the gain or the drop is
        within noise: under 3 standard errors of the difference of two rolling means (sqrt 2 times a
    rolling mean's), the error estimated from
        point-to-point differences (robust to trends: MAD of the differences / sqrt 2)."""
    v = series.finite().values
    k = max(SMOOTH_MIN, round(v.size * SMOOTH_FRACTION))
    if v.size < 4 * k:  # a start, a best and a present that do not overlap
        return None
    kernel = np.ones(k) / k
    rolling = np.convolve(v, kernel, mode="valid")
    # point-to-point differences cancel a trend; their plain std keeps the heavy tail of
    # per-episode returns (a robust spread would call two long episodes a significant best)
    sigma = float(np.std(np.diff(v))) / math.sqrt(2.0)
    noise = SIGNIFICANCE * math.sqrt(2.0) * sigma / math.sqrt(k)
    start = float(rolling[0])
    best = float(rolling.max())
    now = float(rolling[-1])
    gain = best - start
    if gain <= max(noise, 1e-12) or best - now <= noise:
        return 0.0 if gain > max(noise, 1e-12) else None
    return (best - now) / gain


@dataclass(frozen=True)
class Observation:
    metric: str
    stat: str
    op: str
    threshold: float
    observed: float | None
    holds: bool
    points: int

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "stat": self.stat,
            "op": self.op,
            "threshold": self.threshold,
            "observed": self.observed,
            "holds": self.holds,
            "points": self.points,
        }


@dataclass(frozen=True)
class PointResult:
    step: int
    held: bool
    observations: tuple[Observation, ...]
    reason: str | None = None


def evaluate_point(
    rule: Rule,
    step: int,
    windows: Mapping[str, Series],
    early: Mapping[str, float | None],
    ctx: RuleContext,
    histories: Mapping[str, Series] | None = None,
) -> PointResult:
    """The rule's conjunction at one step, given each metric's window ending there."""
    short = []
    size, min_points = ctx.window(rule)
    for m in rule.metrics:
        w = windows.get(m)
        if w is None or int(np.isfinite(w.values).sum()) < min_points:
            short.append(m)
    obs = []
    for c in rule.conditions:
        w = windows.get(c.metric)
        n = 0 if w is None else int(np.isfinite(w.values).sum())
        hist = (histories or {}).get(c.metric)
        value = (
            None
            if w is None
            else window_stat(c.stat, w, ctx, c.metric, early.get(c.metric), hist, c.level)
        )
        holds = (
            value is not None and math.isfinite(value) and c.holds(value) and c.metric not in short
        )
        obs.append(Observation(c.metric, c.stat, c.op, c.value, value, holds, n))
    reason = None
    if short:
        reason = (
            f"fewer than {min_points} finite points in the last {size} points: {', '.join(short)}"
        )
    constructed = [m for m in rule.metrics if m in ctx.constructed]
    if constructed:
        why = "; ".join(f"{m}: {ctx.constructed[m][0]}" for m in constructed)
        return PointResult(step, False, tuple(obs), why)
    finer = [c for c in rule.conditions if _finer_than_printed(c.stat, c.op, c.value, ctx)]
    if finer:
        why = "; ".join(
            f"{c.metric} {c.stat} {c.op} {c.value:g} cannot be told from values printed to "
            f"±{ctx.resolution:g}"
            for c in finer
        )
        return PointResult(step, False, tuple(obs), why)
    return PointResult(step, not short and all(o.holds for o in obs), tuple(obs), reason)


# statistics in the metric's own units (a level of the values themselves), as opposed to
# ratios, slopes and shares, which rounding does not bound the same way
_LEVEL_STATS = frozenset({"abs_max", "since_start_abs_max", "max", "min", "mean", "last"})


def _finer_than_printed(stat: str, op: str, value: float, ctx: RuleContext) -> bool:
    """A "at most this small" condition whose level the printed values cannot resolve: a value
    printed as 0.000 may be anything under 0.0005, so "at most 1e-6" is not known."""
    return (
        ctx.resolution is not None
        and stat in _LEVEL_STATS
        and op in ("<=", "<")
        and 0 <= value < ctx.resolution
    )


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    step: int | None
    consecutive: int
    observations: tuple[Observation, ...] = ()
    reason: str | None = None

    @property
    def fired(self) -> bool:
        return self.consecutive >= self.rule.for_steps

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule.id,
            "severity": self.rule.severity,
            "fired": self.fired,
            "step": self.step,
            "consecutive": self.consecutive,
            "for_steps": self.rule.for_steps,
            "window": self.rule.window,
            "observations": [o.to_dict() for o in self.observations],
            "reason": self.reason,
        }


def evaluate_rule(
    rule: Rule, series: Mapping[str, Series], ctx: RuleContext, end: int | None = None
) -> RuleResult:
    """The rule at its latest evaluation point (at or before `end`), counting held points back."""
    present = {
        m: series[m].until(end) if end is not None else series[m]
        for m in rule.metrics
        if m in series
    }
    missing = [m for m in rule.metrics if m not in present or present[m].empty]
    if missing:
        return RuleResult(rule, None, 0, (), f"no data for {', '.join(missing)}")
    # only the last for_steps evaluation points can matter; they are among each series' last ones
    tails = [s.steps[-rule.for_steps :] for s in present.values()]
    points = np.unique(np.concatenate(tails))[-rule.for_steps :]
    first: PointResult | None = None
    consecutive = 0
    for t in points[::-1].tolist():
        res = _point(rule, int(t), present, ctx)
        if first is None:
            first = res
        if not res.held:
            break
        consecutive += 1
        if consecutive >= rule.for_steps:
            break
    assert first is not None
    return RuleResult(rule, first.step, consecutive, first.observations, first.reason)


def fired_at(
    rule: Rule, series: Mapping[str, Series], ctx: RuleContext, steps: Iterable[int]
) -> Iterator[bool]:
    """Whether the rule fires at each of `steps`, lazily: `evaluate_rule(rule, series, ctx,
    end=t).fired` for each t, with each evaluation point judged once (a point's verdict reads
    the series up to it only), not once per later step whose last `for_steps` points hold it:
    a scan of a run step by step stays linear in its points instead of `for_steps` times that."""
    present = {m: series[m] for m in rule.metrics if m in series}
    if len(present) < len(rule.metrics) or any(s.empty for s in present.values()):
        for _ in steps:
            yield False
        return
    start = max(int(s.steps[0]) for s in present.values())  # before it: "no data for" one
    points = np.unique(np.concatenate([s.steps for s in present.values()]))
    held: dict[int, bool] = {}
    for t in steps:
        if t < start:
            yield False
            continue
        k = int(np.searchsorted(points, t, side="right"))
        last = points[max(0, k - rule.for_steps) : k].tolist()
        fired = len(last) >= rule.for_steps
        for p in reversed(last):  # newest first, as evaluate_rule counts them
            if p not in held:
                held[p] = _point(rule, int(p), present, ctx).held
            if not held[p]:
                fired = False
                break
        yield fired


def _point(rule: Rule, step: int, series: Mapping[str, Series], ctx: RuleContext) -> PointResult:
    # the rule reads its own metrics only
    histories = {m: series[m].until(step) for m in rule.metrics if m in series}
    windows = {m: h.tail(ctx.window(rule)[0]) for m, h in histories.items()}
    early = {m: early_mean(h, ctx.stages) for m, h in histories.items()}
    return evaluate_point(rule, step, windows, early, ctx, histories)


def evaluate_rules(
    registry: Registry,
    series: Mapping[str, Series],
    config: Mapping[str, Any] | None = None,
    metric_id: str | None = None,
    stages: Stages | None = None,
    run_points: int | None = None,
) -> tuple[RuleResult, ...]:
    """Every registry rule (or those that involve `metric_id`), in registry order. `run_points`,
    the run's (planned) length in logged points, caps every window at a tenth of it."""
    ctx = RuleContext.of(registry, config, stages, run_points)
    rules = [r for r in registry.rules if metric_id is None or metric_id in r.metrics]
    return tuple(evaluate_rule(r, series, ctx) for r in rules)
