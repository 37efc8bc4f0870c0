"""Replay a training run's logs through the diagnosis engine, card by card, at every logged step.

`load_run(folder)` reads a run's event files as `rlvitals import` would (the registry's names,
its transforms, the framework detected from the keys, the run context from the logs' text
summaries and keys); `timeline(run)` builds every core metric's card at every logged step from
the history up to that step, as a dashboard refreshed at that moment would show it; `verdict()`
condenses that into the first watch / warning / critical steps, the status at the end, and the
evidence of the first flag, and compares it with an expected verdict (tests/fixtures/runs/
expected.yaml).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from exporter.config import ExporterSettings
from exporter.ingest.commands import import_into
from exporter.ingest.followed_end import part_name
from exporter.schema import TRANSFORMS_FIELD, read_by_itself
from exporter.sources import TRACKER_FORMATS, discover
from exporter.sources.wandb_offline import is_wandb_log
from exporter.store.outbox import Outbox
from exporter.translate.derive import NONFINITE_FIELD
from grafana.datasource.cards import run_cards
from grafana.datasource.config import DatasourceConfig
from grafana.datasource.history.embedded import EmbeddedHistory
from grafana.datasource.history.memory import MemoryHistory
from registry import Recognition, Registry, recognise
from registry.diagnosis.card import (
    TUNABLE_KINDS,
    Card,
    Evidence,
    context_of,
    is_fact,
    reference_findings,
    rejudge,
)
from registry.diagnosis.context import RunContext
from registry.diagnosis.run_cards import run_status, verdict_cards
from registry.diagnosis.stats import Series, as_series
from registry.diagnosis.tuning import Tuning

__all__ = [
    "FAILURE_KINDS",
    "Expected",
    "LoadedRun",
    "RunVerdict",
    "StepStatus",
    "failure_kinds",
    "judged_steps",
    "load_run",
    "load_runs",
    "run_name_of",
    "tags_cell",
    "timeline",
    "totals",
    "verdict",
]

CARD_WINDOW = DatasourceConfig.card_window  # the points a card reads, as `rlvitals serve`'s
_RANK = {"no_data": -1, "ok": 0, "watch": 1, "warning": 2, "critical": 3}
FAILURE_KINDS = (
    "entropy_collapse",
    "entropy_explosion",
    "trust_region",
    "reward_collapse",
    "never_improved",
    "value_divergence",
    "grad_explosion",
    "nonfinite",
    "dead_policy",
    "reward_hacking",
    "length_limit",
)
# which failure a flagged card names, by metric (a firing rule names its own: _RULE_KINDS)
_METRIC_KINDS: dict[str, str] = {
    "policy_entropy": "entropy_collapse",
    "policy_kl": "trust_region",
    "clip_fraction": "trust_region",
    "kl_clip_ratio": "trust_region",
    "episodic_return": "reward_collapse",
    "raw_reward": "reward_collapse",
    "grad_norm": "grad_explosion",
    "zero_std_group_fraction": "dead_policy",
    "reward_std": "dead_policy",
    "value_loss": "value_divergence",
    "total_loss": "value_divergence",
    "td_error": "value_divergence",
    "q_value": "value_divergence",
    "nonfinite_count": "nonfinite",
    "action_std": "entropy_explosion",
    "truncation_rate": "length_limit",
}
# which failure a flagged piece of evidence names, whatever its card
_EVIDENCE_KINDS: dict[str, str] = {
    "nonfinite": "nonfinite",
    "value_scale": "value_divergence",
    "sentinel": "reward_hacking",  # a card's sentinels: shaping, length, refusal, RM over-fit
}
_FINDING_KINDS = {
    "never_improved": "never_improved",
    "below_random": "never_improved",
}


@dataclass(frozen=True)
class LoadedRun:
    """A run as the store holds it after `rlvitals import`: every stored field's raw points
    (registry metrics, derived ones, `nonfinite_count`, each metric's non-finite marks), the
    stored run config, and what was read from the logs."""

    name: str
    framework: str | None
    fields: Mapping[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
    config: Mapping[str, Any]
    context: RunContext
    recognition: Recognition | None = None
    """How many of its logged names the registry recognised; suggestions for the others."""
    logged: tuple[str, ...] = ()
    """The fields the run logged (its hyperparameters, stored at step 0, aside)."""

    @property
    def series(self) -> dict[str, Series]:
        """The registry metrics' finite points (what the cards read, without the marks)."""
        return {f: as_series(p).finite() for f, p in self.fields.items() if f in self._metrics}

    @property
    def _metrics(self) -> frozenset[str]:
        return frozenset(f for f in self.fields if "/" not in f)

    def until(self, step: int) -> MemoryHistory:
        """The store as it was when the run had logged up to `step`: what `/api/cards` reads."""
        cut = {}
        for f, (steps, values) in self.fields.items():
            k = int(np.searchsorted(steps, step, side="right"))
            if k:
                cut[f] = (steps[:k], values[:k])
        return MemoryHistory({self.name: cut}, configs={self.name: dict(self.config)})


class ReplayError(Exception):
    """A run's logs could not be imported for the replay (the import's own message)."""


def load_run(
    folder: Path,
    registry: Registry,
    framework: str | None = None,
    config: Mapping[str, Any] | None = None,
    reading: Sequence[str] = (),
) -> LoadedRun:
    """The run of the logs under `folder` (its first training, when a console log holds
    several: `load_runs`)."""
    return load_runs(folder, registry, framework, config, reading)[0]


def load_runs(
    folder: Path,
    registry: Registry,
    framework: str | None = None,
    config: Mapping[str, Any] | None = None,
    reading: Sequence[str] = (),
) -> list[LoadedRun]:
    """The run from the logs under `folder`, imported as `rlvitals import FOLDER` imports it
    (into a store of its own, thrown away after), then read back as the datasource reads it;
    after it, the run of each later training its console log holds (`name-part2`, ...).
    `config` (`--config`/`--set`) overrides what the logs say; `registry` carries any `--map`;
    `reading` are import's flags for how the logs are read (`--format`, `--step-key`, ...)."""
    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no such file or folder")
    name = run_name_of(folder)
    with tempfile.TemporaryDirectory(prefix="rlvitals-replay-") as tmp:
        settings = ExporterSettings(store=Path(tmp))
        err = io.StringIO()
        with _warnings_to(err):
            code, received = import_into(
                [folder],
                settings=settings,
                reg=registry,
                run=name,
                config=dict(config or {}),
                framework=framework,
                reading=reading,
                err=err,
            )
        said = [line for line in err.getvalue().splitlines() if "error" in line]
        if code != 0:
            # the row names the run: import's own `rlvitals: error:` prefix is not repeated
            last = said[-1].removeprefix("rlvitals: error: ") if said else None
            raise ReplayError(last or f"{folder}: import exit code {code}")
        names = {r.name: r.names for r in received}
        runs = [_read_back(settings, registry, name, names.get(name, ()))]
        part = 1
        while (later := part_name(name, part)) in names:
            runs.append(_read_back(settings, registry, later, names[later]))
            part += 1
    return runs


def _read_back(
    settings: ExporterSettings, registry: Registry, name: str, received_names: Collection[str]
) -> LoadedRun:
    store = EmbeddedHistory(settings.outbox_path)
    fields = {}
    for f in store.fields(name):
        p = store.series(name, f, None, None, _ALL_POINTS)
        fields[f] = (p.steps, p.values)
    cfg = dict(store.run_config(name))
    info = store.run_info(name)
    logged = store.logged_fields(name)
    with Outbox(settings.outbox_path) as box:
        read_as = read_by_itself(box.transforms(name))
    series = {f: as_series(p).finite() for f, p in fields.items() if "/" not in f}
    series = {f: s for f, s in series.items() if registry.has_metric(f)}
    ranges = {
        f: (float(np.min(s.values)), float(np.max(s.values)))
        for f, s in ((f, as_series(fields[f]).finite()) for f in logged)
        if not registry.has_metric(f) and len(s)
    }
    names = recognise(registry, received_names, info.framework, ranges, read_as)
    fields = {f: p for f, p in fields.items() if f != TRANSFORMS_FIELD}
    return LoadedRun(
        name, info.framework, fields, cfg, context_of(registry, cfg, series), names, tuple(logged)
    )


_ALL_POINTS = 2**62  # raw points, never bucketed


def run_name_of(path: Path) -> str:
    """A replayed run's name: a tracker run's own (MLflow's run name, W&B's display name), else
    its folder's, or for a log file named alone, the file's stem."""
    if path.is_dir() or is_wandb_log(path):
        logs = [log for log in discover([path]) if log.format in TRACKER_FORMATS]
        if len(logs) == 1 and path in (logs[0].path, logs[0].path.parent):
            return logs[0].run
    return path.name if path.is_dir() else path.stem


@contextlib.contextmanager
def _warnings_to(out: io.StringIO) -> Iterator[None]:
    """The exporter's warnings (unknown names, ...) into `out` while the replay imports: the
    evaluation's table says what it found of the names, once per run."""
    log = logging.getLogger("exporter")
    handler = logging.StreamHandler(out)
    saved = log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = saved


@dataclass(frozen=True)
class JudgedCard:
    """A card reduced to what another `Tuning` could change: its status without the tunable
    evidence, its physical facts, and the tunable evidence with its numbers
    (`rlvitals evaluate --leave-one-family-out` judges the replay again without rebuilding it)."""

    metric: str
    status: str
    warmup: bool
    fixed: str  # the most severe evidence no tuning changes
    facts: str  # the most severe physical fact (all a card in warm-up alarms)
    kinds: frozenset[str]  # failures its rules and fixed evidence name when flagged
    tunable: tuple[Evidence, ...]

    @classmethod
    def of(cls, card: Card) -> JudgedCard:
        fixed = facts = "ok"
        kinds = set()
        for r in card.rules:
            if r.fired and r.rule.sentinel in _SENTINEL_KINDS:
                kinds.add(_SENTINEL_KINDS[r.rule.sentinel])
            if r.fired and r.rule.id in _RULE_KINDS:
                kinds.add(_RULE_KINDS[r.rule.id])
        tunable = []
        for e in card.evidence:
            if e.kind in TUNABLE_KINDS:
                tunable.append(e)
                continue
            fixed = _worse(fixed, e.severity)
            if is_fact(e):
                facts = _worse(facts, e.severity)
            kinds |= _evidence_kinds(e, e.severity)
        return cls(
            card.metric, card.status, card.warmup, fixed, facts, frozenset(kinds), tuple(tunable)
        )

    def under(self, tuning: Tuning) -> tuple[str, frozenset[str]]:
        """Its status under `tuning`, and the failures it names when flagged."""
        if self.status == "no_data":
            return self.status, self.kinds
        status, kinds = self.fixed, set(self.kinds)
        for e in self.tunable:
            sev = rejudge(e, tuning)
            status = _worse(status, sev)
            kinds |= _evidence_kinds(e, sev, tuning)
        if self.warmup:
            status = self.facts
            for e in self.tunable:
                status = _worse(status, rejudge(e, tuning, facts_only=True))
        if self.metric in _METRIC_KINDS:
            kinds.add(_METRIC_KINDS[self.metric])
        return status, frozenset(kinds)


def _worse(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


@dataclass(frozen=True)
class StepStatus:
    step: int
    status: str
    worst: tuple[Card, ...]  # the training-health cards at that status
    statuses: Mapping[str, str] = field(default_factory=dict)  # every card's, by metric
    judged: tuple[JudgedCard, ...] = ()  # with timeline(keep=True): every training-health card
    kinds: frozenset[str] | None = None  # the failures the worst cards name (None: from worst)


def judged_steps(registry: Registry, run: LoadedRun) -> list[int]:
    """The steps the replay judges: every step the run logged a registry metric, but those
    where only per-episode values arrived (CleanRL logs each finished episode at its own step),
    which are left out but for the last: a card reads them as one point per update interval,
    so they change nothing until the next update (or the run's end) is logged. The exporter's
    `nonfinite_count`, written at every step anything was logged, paces the replay only where
    it is not 0: its 0 beside an episode's values is no news (judging each of a CleanRL run's
    3,292 episodes made its replay 40 times longer), a non-finite value is."""
    logged = [f for f in run.logged if registry.has_metric(f)]
    if not logged:  # no name recognised: no card, and no step to build one at
        return []
    paced = [
        f for f in logged if registry.metric(f).sampling != "per_episode" and f != NONFINITE_FIELD
    ]
    if not paced:
        return sorted({int(s) for f in logged for s in run.fields[f][0]})
    last = max(int(run.fields[f][0][-1]) for f in logged)
    found = [run.fields[f][0] for f in paced]
    if NONFINITE_FIELD in logged:
        steps, values = run.fields[NONFINITE_FIELD]
        found.append(steps[values != 0])
    return [int(s) for s in np.unique(np.concatenate([*found, [last]]))]


def timeline(
    registry: Registry, run: LoadedRun, steps: Sequence[int] | None = None, keep: bool = False
) -> list[StepStatus]:
    """The run's status at every step `judged_steps` gives (or at `steps`): the cards
    `/api/cards` answers for the run cut at that step, and the worst training-health card."""
    out = []
    for step in judged_steps(registry, run) if steps is None else steps:
        cards = run_cards(registry, run.until(int(step)), run.name, None, "en", CARD_WINDOW)
        status, worst = run_status(registry, cards)
        judged = tuple(JudgedCard.of(c) for c in verdict_cards(registry, cards)) if keep else ()
        out.append(
            StepStatus(int(step), status, worst, {c.metric: c.status for c in cards}, judged)
        )
    return out


def _evidence_kinds(e: Evidence, severity: str, tuning: Tuning | None = None) -> set[str]:
    """The failures a piece of evidence names at `severity` (none below warning); a return's
    references with the findings `tuning` makes (None: those the evidence holds)."""
    if _RANK[severity] < _RANK["warning"]:
        return set()
    if e.kind in _EVIDENCE_KINDS:
        return {_EVIDENCE_KINDS[e.kind]}
    if e.kind == "entropy_spread":
        grew = e.data.get("per_dim_nats")
        return {"entropy_explosion" if isinstance(grew, float) and grew > 0 else "entropy_collapse"}
    if e.kind == "return_reference":
        found = e.data.get("findings") if tuning is None else reference_findings(e, tuning)
        listed = list(found) if isinstance(found, list | tuple) else []
        kinds = {_FINDING_KINDS[f] for f in listed if f in _FINDING_KINDS}
        if "worse_than_start" in listed:
            # below the start after having learned is a collapse; without ever having
            # learned, the run never improved (and got worse)
            kinds.add("reward_collapse" if e.data.get("improved") else "never_improved")
        return kinds
    return set()


def failure_kinds(card: Card) -> set[str]:
    """The failures a flagged card names: its metric's, and each firing rule's sentinel."""
    kinds = set()
    if card.metric in _METRIC_KINDS:
        kinds.add(_METRIC_KINDS[card.metric])
    for e in card.evidence:
        kinds |= _evidence_kinds(e, e.severity)
    for r in card.rules:
        if r.fired and r.rule.sentinel in _SENTINEL_KINDS:
            kinds.add(_SENTINEL_KINDS[r.rule.sentinel])
        if r.fired and r.rule.id in _RULE_KINDS:
            kinds.add(_RULE_KINDS[r.rule.id])
    return kinds


_SENTINEL_KINDS = {"collapse": "entropy_collapse", "instability": "trust_region"}
_RULE_KINDS = {
    "dead_policy": "dead_policy",
    "dead_policy_no_gradient": "dead_policy",
    "grpo_groups_dead": "dead_policy",
    "dead_policy_zero_gradient": "dead_policy",
    "reward_collapse_from_best": "reward_collapse",
    "reward_regression_from_best": "reward_collapse",
    "task_reward_halved": "reward_collapse",
    "token_entropy_surge_with_reward_collapse": "reward_collapse",
    "length_limit_with_reward_collapse": "length_limit",
    "answers_cut_and_groups_alike": "length_limit",
    "token_entropy_cliff_with_answers_at_limit": "entropy_collapse",
    "reward_gone_groups_without_variance": "dead_policy",
    "ref_kl_surge_with_reward_collapse": "reward_collapse",
    "loss_rising_with_ref_kl_reward_flat": "trust_region",
    # a policy no update moves cannot improve: the failure is that it never does
    "policy_unmoved_since_start": "never_improved",
    "learning_rate_zero_since_start": "never_improved",
    "no_learning_policy_unmoved": "never_improved",
    "no_learning_learning_rate_zero": "never_improved",
}


@dataclass(frozen=True)
class Expected:
    verdict: str
    dead_at_end: bool
    failure_step: int | None = None
    failure: str | None = None
    also: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Expected:
        also = []
        for item in doc.get("also") or ():
            kind, _, step = str(item).partition("@")
            also.append((kind, int(step)))
        return cls(
            str(doc["verdict"]),
            bool(doc.get("dead_at_end", False)),
            doc.get("failure_step"),
            doc.get("failure"),
            tuple(also),
        )

    @property
    def kinds(self) -> set[str]:
        return {k for k in (self.failure, *(a for a, _ in self.also)) if k}


@dataclass(frozen=True)
class RunVerdict:
    name: str
    context: str
    first: Mapping[str, int | None]  # first step at watch / warning / critical
    end_status: str
    verdict: str  # healthy (never warning or critical) / flagged
    flag_step: int | None  # first warning or critical
    flag_kinds: tuple[str, ...]  # failures the cards at the first flag name
    flag_reading: str | None
    lag_points: int | None  # logged update points from the failure step to the first flag
    expected: Expected | None = None
    problems: tuple[str, ...] = field(default_factory=tuple)
    recognition: Recognition | None = None

    @property
    def passed(self) -> bool:
        return not self.problems


def _points_between(run: LoadedRun, start: int, end: int) -> int:
    """Logged update points in (start, end] (negative when end is before start)."""
    steps = _update_steps(run)
    if end >= start:
        return int(np.count_nonzero((steps > start) & (steps <= end)))
    return -int(np.count_nonzero((steps > end) & (steps <= start)))


def _update_steps(run: LoadedRun) -> np.ndarray[Any, np.dtype[np.int64]]:
    for m in ("policy_entropy", "policy_kl", "grad_norm", "policy_loss", "value_loss"):
        if m in run.series:
            return run.series[m].steps
    if not run.series:
        return np.array([], dtype=np.int64)
    return np.unique(np.concatenate([s.steps for s in run.series.values()]))


MAX_LAG_POINTS = 2


def verdict(
    registry: Registry,
    run: LoadedRun,
    expected: Expected | None = None,
    replayed: Sequence[StepStatus] | None = None,
) -> RunVerdict:
    """The run's verdict from its timeline (`replayed`, when it was built already), and what
    disagrees with `expected`."""
    tl = timeline(registry, run) if replayed is None else replayed
    first: dict[str, int | None] = {"watch": None, "warning": None, "critical": None}
    for st in tl:
        for level in first:
            if first[level] is None and _RANK[st.status] >= _RANK[level]:
                first[level] = st.step
    flagged = [st for st in tl if _RANK[st.status] >= _RANK["warning"]]
    flag = flagged[0] if flagged else None
    kinds: set[str] = set()
    if flag is not None and flag.kinds is not None:
        kinds = set(flag.kinds)
    elif flag is not None:
        for c in flag.worst:
            kinds |= failure_kinds(c)
    end = tl[-1].status if tl else "no_data"
    lag = None
    problems: list[str] = []
    if expected is not None:
        if expected.verdict == "healthy" and flag is not None:
            problems.append(f"healthy run flagged {flag.status} at step {flag.step:,}")
        if expected.verdict == "destabilised":
            fs = expected.failure_step
            if flag is None:
                problems.append("destabilised run never flagged")
            elif fs is not None:
                lag = _points_between(run, fs, flag.step)
                if lag > MAX_LAG_POINTS:
                    problems.append(f"flagged {lag} logged updates after the failure step {fs:,}")
                if not kinds & expected.kinds:
                    problems.append(
                        f"first flag names {sorted(kinds) or 'nothing'}, not {sorted(expected.kinds)}"
                    )
        if expected.dead_at_end and end != "critical":
            problems.append(f"dead at end but the last step is {end}")
    reading = None
    if flag is not None and flag.worst:
        reading = flag.worst[0].reading
    return RunVerdict(
        name=run.name,
        context=run.context.describe(),
        first=first,
        end_status=end,
        verdict="flagged" if flag is not None else "healthy",
        flag_step=None if flag is None else flag.step,
        flag_kinds=tuple(sorted(kinds)),
        flag_reading=reading,
        lag_points=lag,
        expected=expected,
        problems=tuple(problems),
        recognition=run.recognition,
    )


def _fmt(step: int | None) -> str:
    return "–" if step is None else f"{step:,}"


def table(verdicts: Sequence[RunVerdict]) -> str:
    """The evaluation as a Markdown table, and the totals under it."""
    rows = [
        "| run | expected | failure step | first watch | first warning | first critical | end | lag (updates) | names | ok | tags |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in verdicts:
        e = v.expected
        exp = "–" if e is None else e.verdict + (", dead at end" if e.dead_at_end else "")
        fail = "–" if e is None or e.failure_step is None else f"{e.failure_step:,} {e.failure}"
        lag = "–" if v.lag_points is None else f"{v.lag_points:+d}"
        rows.append(
            f"| {v.name} | {exp} | {fail} | {_fmt(v.first['watch'])} | {_fmt(v.first['warning'])} |"
            f" {_fmt(v.first['critical'])} | {v.end_status} | {lag} | {', '.join(v.flag_kinds) or '–'} |"
            f" {'yes' if v.passed else 'NO: ' + '; '.join(v.problems)} | {tags_cell(v.recognition)} |"
        )
    rows.append("")
    rows.append(totals(verdicts))
    return "\n".join(rows)


def totals(verdicts: Sequence[RunVerdict]) -> str:
    """One line: runs as expected, and each of the three acceptance counts."""
    judged = [v for v in verdicts if v.expected is not None]
    passed = sum(v.passed for v in judged)
    healthy = [v for v in judged if v.expected and v.expected.verdict == "healthy"]
    bad = [v for v in judged if v.expected and v.expected.verdict == "destabilised"]
    dead = [v for v in judged if v.expected and v.expected.dead_at_end]
    in_time = sum(
        v.flag_step is not None
        and not any("updates after" in p or "names" in p for p in v.problems)
        for v in bad
    )
    return (
        f"{passed}/{len(judged)} runs as expected; healthy never warned: "
        f"{sum(v.flag_step is None for v in healthy)}/{len(healthy)}; destabilised flagged within "
        f"{MAX_LAG_POINTS} updates naming the failure: {in_time}/{len(bad)}; "
        f"dead at end critical: {sum(v.end_status == 'critical' for v in dead)}/{len(dead)}"
    )


def tags_cell(names: Recognition | None) -> str:
    """What a run's row says of its tag names: how many were recognised, and when none was,
    the `--map` flags its names suggest."""
    if names is None:
        return "–"
    if names.recognised:
        return names.line()
    offers = "; ".join(s.phrase() for s in names.suggestions) or (
        "no registry metric looks like any of them; name them with --map TAG=METRIC"
    )
    return f"no recognised tags ({names.total} names): --map suggestions: {offers}"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
