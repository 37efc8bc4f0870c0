"""Drive scenarios through the real exporter (`exporter.init`) and read the diagnosis back.

Each scenario is one run in the store. Values go through `Run.log` exactly as a trainer's would
(non-finite values included: the exporter turns them into health events), events through
`Run.event`, and a resume is a second `exporter.init` of the same run name that logs steps it
already saw, as a restarted job does. With `RLVITALS_INFLUX_URL` set the exporter also forwards
everything to InfluxDB; the diagnosis is read back from the local outbox either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter.config import ExporterSettings
from exporter.run import Run, init
from exporter.store.outbox import Outbox
from registry import Registry
from registry.diagnosis import Card, RuleResult, Series, as_series, evaluate_rules
from registry.diagnosis.run_cards import diagnose

from .scenarios import SCENARIOS, Scenario, build
from .simulate import SimConfig, SimEvent, Trajectory
from .verdict import Detection, detect

__all__ = ["DemoOptions", "DemoResult", "run_demo", "run_scenario"]


@dataclass(frozen=True)
class DemoOptions:
    steps: int = 2000
    seed: int = 0
    prefix: str = "demo"
    project: str = "rlvitals-demo"
    lang: str = "en"


@dataclass(frozen=True)
class DemoResult:
    run: str
    scenario: Scenario
    steps: int
    injection: int | None
    detection: Detection | None
    cards: tuple[Card, ...]
    firing: tuple[RuleResult, ...]
    events: Mapping[str, int]
    seconds: float


def _free_name(outbox: Outbox, wanted: str) -> str:
    taken = {r.run for r in outbox.runs()}
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


def _log_trajectory(
    reg: Registry,
    tr: Trajectory,
    name: str,
    settings: ExporterSettings,
    project: str,
) -> str:
    """Log a trajectory as a run named `name` (or `name-2`... when taken); returns the name."""
    # Derived metrics (kl_clip_ratio, entropy_gradient) and the per-step NaN/Inf count are not
    # logged: the exporter computes them, as it does for a real trainer.
    by_step: dict[int, list[SimEvent]] = {}
    for e in tr.events:
        by_step.setdefault(e.step, []).append(e)

    def start(resume: bool) -> Run:
        return init(
            name,
            project=project,
            config=tr.config,
            registry=reg,
            settings=settings,
            resume=resume,
        )

    run = start(False)
    name = run.name
    previous = -1
    try:
        for index in tr.order.tolist():
            step = int(tr.steps[index])
            if step <= previous:  # the job died and a new process resumes from a checkpoint
                run.finish(settings.flush_timeout)
                run = start(True)
            run.log(step, tr.rows(index))
            for e in by_step.get(step, ()):
                run.event(step, e.kind, e.text, **dict(e.fields))
            previous = step
    finally:
        run.finish(max(settings.flush_timeout, 30.0))
    return name


def _read_back(outbox: Outbox, run: str) -> tuple[dict[str, Series], dict[str, object]]:
    series = {f: as_series(outbox.series(run, f)) for f in outbox.fields(run)}
    record = outbox.run(run)
    return series, dict(record.config) if record else {}


def run_scenario(
    reg: Registry,
    sc: Scenario,
    options: DemoOptions,
    settings: ExporterSettings,
) -> DemoResult:
    """Simulate one scenario, log it through the exporter, and diagnose what was stored."""
    began = time.monotonic()
    cfg = SimConfig(steps=options.steps, seed=options.seed)
    tr = build(reg, sc, cfg)
    with Outbox(settings.outbox_path) as outbox:
        name = _free_name(outbox, f"{options.prefix}-{sc.name}")
    name = _log_trajectory(reg, tr, name, settings, options.project)
    with Outbox(settings.outbox_path) as outbox:
        series, config = _read_back(outbox, name)
        events = outbox.events(name)
    detection = None
    if sc.expect is not None:
        detection = detect(reg, sc.expect, tr.injection, sc.tolerance, series, events, config)
    cards = tuple(
        diagnose(
            reg, series, config, [m.id for m in reg.core_metrics() if m.id in series], options.lang
        )
    )
    firing = tuple(r for r in evaluate_rules(reg, series, config) if r.fired)
    counts: dict[str, int] = {}
    for e in events:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return DemoResult(
        run=name,
        scenario=sc,
        steps=options.steps,
        injection=tr.injection,
        detection=detection,
        cards=cards,
        firing=firing,
        events=counts,
        seconds=time.monotonic() - began,
    )


def run_demo(
    reg: Registry,
    scenarios: Sequence[Scenario] | None,
    options: DemoOptions,
    settings: ExporterSettings,
    progress: Callable[[DemoResult], None] | None = None,
) -> list[DemoResult]:
    """Every chosen scenario (all by default), one run each, in the order given."""
    results = []
    for sc in scenarios if scenarios is not None else SCENARIOS:
        result = run_scenario(reg, sc, options, settings)
        if progress is not None:
            progress(result)
        results.append(result)
    return results
