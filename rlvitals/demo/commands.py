"""`rlvitals demo [--scenario NAME|all] [--steps N] [--seed S]`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from registry import add_registry_argument

if TYPE_CHECKING:
    from registry import Registry

__all__ = ["register"]

_SERVE_URL = "http://127.0.0.1:8686"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .scenarios import SCENARIOS

    names = [s.name for s in SCENARIOS]
    p = sub.add_parser(
        "demo",
        description="Simulate PPO/GRPO-like training runs (numpy, no GPU, no network), one per "
        "scenario, log them through the exporter into the embedded store (and InfluxDB when "
        "RLVITALS_INFLUX_URL is set), then print each run's diagnosis and where to look. "
        f"Scenarios: {', '.join(names)}.",
    )
    p.add_argument(
        "--scenario",
        default="all",
        choices=("all", *names),
        metavar="NAME",
        help="one scenario, or all (default)",
    )
    p.add_argument("--steps", type=int, default=2000, help="training steps per run (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--store", type=Path, help="embedded store folder (default RLVITALS_STORE)")
    p.add_argument("--prefix", default="demo", help="run name prefix (default demo)")
    p.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write an HTML report per run under <store>/reports (default on)",
    )
    add_registry_argument(p)
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    import registry
    from exporter.config import ExporterSettings
    from exporter.errors import ExporterError

    from .run_demo import DemoOptions, DemoResult, run_demo
    from .scenarios import SCENARIOS, scenario_named
    from .summary import Pointers, format_summary

    if args.steps < 100:
        print(
            f"rlvitals demo: --steps {args.steps} is too short; use at least 100", file=sys.stderr
        )
        return 2
    try:
        settings = ExporterSettings.from_env(os.environ)
        if args.store is not None:
            settings = settings.replace(store=args.store)
        reg = registry.registry_from_args(args)
    except (ExporterError, registry.RegistryError) as exc:
        print(f"rlvitals demo: {exc}", file=sys.stderr)
        return 2
    chosen = list(SCENARIOS) if args.scenario == "all" else [scenario_named(args.scenario)]
    for sc in chosen:
        if sc.expect is not None and args.steps < sc.min_steps:
            print(
                f"rlvitals demo: {sc.name} needs about {sc.min_steps} steps for its failure to be "
                f"flagged inside the run; --steps {args.steps} may end before it is",
                file=sys.stderr,
            )
    options = DemoOptions(steps=args.steps, seed=args.seed, prefix=args.prefix)

    def progress(r: DemoResult) -> None:
        print(f"  logged {r.run}: {r.steps:,} steps in {r.seconds:.1f} s", file=sys.stderr)

    print(
        f"rlvitals demo: {len(chosen)} run(s) of {args.steps:,} steps into {settings.outbox_path}",
        file=sys.stderr,
    )
    results = run_demo(reg, chosen, options, settings, progress)
    reports: tuple[tuple[str, Path], ...] = ()
    if args.report:
        reports = _write_reports(reg, settings.store, [r.run for r in results])
    influx = None
    if settings.influx_url:
        influx = f"{settings.influx_url} (database/bucket {settings.influx_bucket or settings.influx_database})"
    where = Pointers(
        settings.outbox_path, _SERVE_URL, influx, reports, default_store=args.store is None
    )
    print(format_summary(results, where))
    missed = [r for r in results if r.detection is not None and not r.detection.on_time]
    return 1 if missed and args.steps >= max(r.scenario.min_steps for r in missed) else 0


def _write_reports(reg: Registry, store: Path, runs: list[str]) -> tuple[tuple[str, Path], ...]:
    """One report per run, read from the embedded store the runs were just logged into."""
    from grafana.datasource.config import DatasourceConfig
    from grafana.report import write_report

    config = DatasourceConfig(store=store)
    out_dir = store / "reports"
    written = []
    for run in runs:
        path = out_dir / f"{run}.html"
        write_report(config, reg, run, path, lang="both")
        written.append((run, path))
    return tuple(written)
