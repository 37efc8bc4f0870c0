"""Subcommands over the registry and the configuration: `validate`, `build` and `doctor`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import registry

from .build import build_all
from .doctor import diagnose

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate",
        description="Validate the built-in registry plus any user files that add metrics, terms or rules. "
        "Exit 0 when valid; exit 1 printing every problem, one per line.",
    )
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="user registry files extending the built-in one"
    )
    # --registry-dir: the older spelling, for a folder; both take files too
    registry.add_registry_argument(p, "--registry-dir")
    p.set_defaults(handler=_validate)

    b = sub.add_parser(
        "build",
        description="Write every generated file from the registry. With --check, write nothing and exit 1 "
        "if any generated file would change.",
    )
    b.add_argument(
        "--lang",
        choices=("en", "zh", "all"),
        default="all",
        help="language(s) to generate (default all)",
    )
    b.add_argument(
        "--check", action="store_true", help="exit 1 if anything would change; write nothing"
    )
    b.add_argument(
        "--out", metavar="DIR", default=".", help="repository root to write into (default .)"
    )
    b.set_defaults(handler=_build)

    d = sub.add_parser(
        "doctor",
        description="Check the registry, the RLVITALS_* settings, the embedded store, InfluxDB and the "
        "Prometheus port. Exit 0 when everything is fine, 1 listing each problem with its fix.",
    )
    d.add_argument("paths", nargs="*", metavar="PATH", help="user registry files to include")
    registry.add_registry_argument(d)
    d.add_argument(
        "--repair",
        action="store_true",
        help="salvage a damaged embedded store (RLVITALS_STORE) into a new file, keeping the "
        "damaged one beside it, and recompute rollups (store and InfluxDB) that disagree with "
        "their raw points; stop every process writing the store first",
    )
    d.set_defaults(handler=_doctor)


def _validate(args: argparse.Namespace) -> int:
    try:
        reg = registry.registry_from_args(args, extra=args.paths)
    except registry.RegistryInvalid as exc:
        for problem in exc.problems:
            print(problem)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return 1
    print(
        f"registry OK: {len(reg.metrics)} metrics, {len(reg.terms)} terms, {len(reg.rules)} rules, "
        f"{sum(len(m.aliases) for m in reg.metrics)} aliases, "
        f"{len(reg.bookkeeping)} bookkeeping keys"
    )
    return 0


def _doctor(args: argparse.Namespace) -> int:
    if args.repair:
        code = _repair()
        return code or _repair_rollups()
    findings = diagnose(os.environ, (*args.registry, *args.paths))
    for finding in findings:
        print(finding)
    failed = [f for f in findings if not f.ok]
    print(f"{len(failed)} problem(s) found" if failed else "everything looks fine")
    return 1 if failed else 0


def _build(args: argparse.Namespace) -> int:
    try:
        reg = registry.load()
    except registry.RegistryInvalid as exc:
        print(exc, file=sys.stderr)
        return 1
    langs = ("en", "zh") if args.lang == "all" else (args.lang,)
    changed = build_all(reg, Path(args.out), langs=langs, check=args.check)
    for path in changed:
        print(("would change: " if args.check else "wrote: ") + str(path))
    if args.check and changed:
        print(
            "generated files are stale: run `rlvitals build` and commit the result", file=sys.stderr
        )
        return 1
    if not changed:
        print("generated files are up to date")
    return 0


def _repair_rollups() -> int:
    from exporter.config import ExporterSettings
    from exporter.errors import ExporterError
    from exporter.influx.rollups import RollupQueryError

    from .doctor_rollups import repair_rollups

    try:
        done = repair_rollups(ExporterSettings.from_env(os.environ))
    except (ExporterError, RollupQueryError) as exc:
        print(f"rlvitals doctor --repair: rollups not repaired: {exc}", file=sys.stderr)
        return 1
    for line in done:
        print(line)
    if not done:
        print("rollups: every run's rollups equal its raw points; nothing to repair")
    return 0


def _repair() -> int:
    from exporter.config import ExporterSettings
    from exporter.errors import ExporterError
    from exporter.store.repair import RepairError, repair_store

    try:
        path = ExporterSettings.from_env(os.environ).outbox_path
    except ExporterError as exc:
        print(f"rlvitals doctor --repair: {exc}", file=sys.stderr)
        return 2
    if not path.exists():
        print(f"{path} does not exist: nothing to repair")
        return 0
    try:
        report = repair_store(path)
    except RepairError as exc:
        print(f"rlvitals doctor --repair: {exc}", file=sys.stderr)
        return 1
    if not report.repaired:
        print(f"{path}: {report.problem}; nothing to repair")
        return 0
    print(f"{path} was damaged: {report.problem}")
    whole = ", ".join(report.copied) or "none"
    print(f"  tables read whole: {whole}")
    for table, n in report.salvaged.items():
        print(f"  {table}: {n:,} row(s) salvaged from its readable pages")
    print(
        f"  the repaired store holds {report.runs} run(s) and {report.rows.get('samples', 0):,} "
        "sample row(s); statistics and rollups recomputed"
    )
    print(f"  the damaged file is kept as {report.kept}")
    return 0
