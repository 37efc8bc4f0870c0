"""`rlvitals evaluate PATH...`: replay runs' event files through the diagnosis engine at every
logged step and compare each verdict with the expected one (see `evaluate.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import registry
from exporter.errors import ExporterError
from exporter.ingest.arguments import (
    add_config_arguments,
    add_format_arguments,
    add_path_arguments,
    format_argv,
    given_paths,
)
from exporter.ingest.commands import mapped_config, read_config_arguments
from exporter.sources import TRACKER_FORMATS, LogFile, UnreadableLog, compile_pattern, discover
from registry import FRAMEWORKS

from .expected import given, read_expected
from .lofo import Fold, Judged, leave_one_family_out, lofo_table
from .replay import (
    ReplayError,
    RunVerdict,
    load_runs,
    run_name_of,
    table,
    tags_cell,
    timeline,
    verdict,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "evaluate",
        description="Each PATH is a run: a folder holding its logs (any format `rlvitals "
        "import` reads), or one log file; a folder of run folders gives one run per folder. Every core metric's card is built at every logged "
        "step from the history up to it; per run: the first watch / warning / critical step, the "
        "status at the end, and, with --expected, the lag of the first flag behind the failure "
        "step (in logged updates) and whether the flag names the failure, and how many of "
        "its tag names the registry recognised (none: the --map flags its names suggest). "
        "Exit 0; 1 when a run disagrees with --expected; 2 on bad input or when a run's files "
        "could not be read (every other run's row is printed first).",
    )
    add_path_arguments(p, "paths", "run folders or log files (or folders of run folders)")
    p.add_argument(
        "--expected",
        metavar="FILE",
        help="expected verdicts (YAML: runs: {name: {verdict, failure_step, failure, also, "
        "dead_at_end, family, given: {map: {TAG: METRIC}, set: {KEY: VALUE}}}}; given is what "
        "that run's user passes as --map / --set), e.g. tests/fixtures/runs/expected.yaml",
    )
    p.add_argument("--framework", choices=("auto", *FRAMEWORKS), default="auto")
    registry.add_registry_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    p.add_argument(
        "--leave-one-family-out",
        action="store_true",
        help="also measure generalisation: for each family of runs (the expected file's "
        "family:), choose the engine's tunable levels (registry/diagnosis/tuning.py) on the "
        "other families and judge the held-out one with them; prints a table per family",
    )
    add_format_arguments(p)
    add_config_arguments(p)
    p.set_defaults(handler=_evaluate)


def _fail(message: str) -> int:
    print(f"rlvitals: error: {message}", file=sys.stderr)
    return 2


def _run_folders(
    paths: list[str], fmt: Any = "auto", pattern: str | None = None
) -> tuple[list[Path], list[tuple[str, str]]]:
    """The runs under the PATHs: a log file is a run; a folder holding logs itself is a run; a
    folder of run folders gives each sub-folder that holds logs (any format `import` reads),
    and each tracker run below it (an MLflow run folder, a W&B run folder) is a run of its own.
    Also the PATHs that hold no log, with why: each gets its row, the others are evaluated.
    `fmt` and `pattern` are `--format` and `--pattern`, as `discover` takes them."""

    def logs(where: Path) -> list[LogFile]:
        return discover([where], fmt, pattern=pattern)

    out: list[Path] = []
    unread: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or folder")
        if path.is_file():
            try:
                logs(path)  # a file whose format cannot be told: named, with why
            except UnreadableLog as exc:
                unread.append((run_name_of(path), str(exc)))
            else:
                out.append(path)
            continue
        if _holds_logs(path, logs):
            out.append(path)
            continue
        trackers = sorted({_tracker_run(log) for log in logs(path) if _is_tracker(log)})
        subs = sorted(
            d
            for d in path.iterdir()
            if d.is_dir()
            and not d.is_symlink()  # W&B's `latest-run` is another run's folder
            and not any(_is_tracker(log) for log in logs(d))
            and logs(d)
        )
        if not subs and not trackers:
            unread.append(
                (
                    run_name_of(path),
                    f"{path}: no training logs in it or its folders (TensorBoard event files, "
                    "JSON Lines, SB3 progress.csv, trainer_state.json, a trainer's console log, "
                    "MLflow or W&B runs)",
                )
            )
        out += trackers + subs
    if not out and unread:
        raise FileNotFoundError(unread[0][1])
    return out, unread


def _is_tracker(log: LogFile) -> bool:
    return log.format in TRACKER_FORMATS


def _tracker_run(log: LogFile) -> Path:
    """A tracker run's folder: the MLflow run folder, the W&B log's folder."""
    return log.path if log.path.is_dir() else log.path.parent


def _holds_logs(folder: Path, logs: Callable[[Path], list[LogFile]]) -> bool:
    """Logs in the folder itself (or it is a Hugging Face output folder or a tracker's run
    folder), not only below it. A log that is a folder (a Hugging Face output folder, an MLflow
    run) is the run itself: the folder above it is a folder of runs, not one."""
    return any(
        log.path == folder or (log.path.parent == folder and not log.path.is_dir())
        for log in logs(folder)
    )


def _as_json(v: RunVerdict) -> dict[str, Any]:
    return {
        "run": v.name,
        "context": v.context,
        "first": dict(v.first),
        "end": v.end_status,
        "verdict": v.verdict,
        "flag_step": v.flag_step,
        "flag_names": list(v.flag_kinds),
        "lag_updates": v.lag_points,
        "reading": v.flag_reading,
        "as_expected": v.passed if v.expected is not None else None,
        "problems": list(v.problems),
        "tags": None
        if v.recognition is None
        else {
            "recognised": len(v.recognition.recognised),
            "names": v.recognition.total,
            "unrecognised": list(v.recognition.unknown),
            "bookkeeping": list(v.recognition.bookkeeping),
            "suggestions": [
                {
                    "name": x.name,
                    "metric": x.metric,
                    "also": list(x.alternatives),
                    "already_logged": x.already_logged,
                }
                for x in v.recognition.suggestions
            ],
            "summary": tags_cell(v.recognition),
        },
    }


def _unread(name: str, why: str) -> RunVerdict:
    """The row of a run whose files could not be read: it says why, and the others go on."""
    return RunVerdict(
        name=name,
        context=f"not read: {why}",
        first=dict.fromkeys(("watch", "warning", "critical")),
        end_status="not read",
        verdict="not read",
        flag_step=None,
        flag_kinds=(),
        flag_reading=None,
        lag_points=None,
        problems=(f"not read: {why}",),
    )


def _evaluate(args: argparse.Namespace) -> int:
    paths = given_paths(args)
    if not paths:
        return _fail("name the runs to evaluate: rlvitals evaluate PATH... (or --logdir PATH)")
    if args.format == "regex" and args.pattern is None:
        return _fail("--format regex needs --pattern REGEX")
    try:
        if args.pattern is not None:
            compile_pattern(args.pattern)
        reg = registry.registry_from_args(args)
        config = mapped_config(reg, read_config_arguments(args))
        folders, unreadable = _run_folders(paths, args.format, args.pattern)
        expected = {} if args.expected is None else read_expected(Path(args.expected))
    except (registry.RegistryError, ExporterError, OSError, ValueError) as exc:
        return _fail(str(exc).splitlines()[0])
    if args.leave_one_family_out and (
        not expected or any(e.family is None for e in expected.values())
    ):
        return _fail(
            "--leave-one-family-out needs --expected with a family: for every run "
            "(e.g. tests/fixtures/runs/expected.yaml)"
        )
    framework = None if args.framework == "auto" else args.framework
    verdicts = []
    judged: list[Judged] = []
    unread = 0
    for name, why in unreadable:
        print(f"rlvitals: error: {name}: {why}", file=sys.stderr)
        verdicts.append(_unread(name, why))
        unread += 1
    for folder in folders:
        name = run_name_of(folder)
        entry = expected.get(name)
        try:
            run_reg, run_config = given(reg, config, entry)
            runs = load_runs(folder, run_reg, framework, run_config, format_argv(args))
            replayed = [
                (run, timeline(run_reg, run, keep=args.leave_one_family_out)) for run in runs
            ]
        except (OSError, ValueError, ExporterError, ReplayError, registry.RegistryError) as exc:
            # one unreadable run must not cost the others their rows
            why = str(exc).splitlines()[0]
            print(f"rlvitals: error: {name}: {why}", file=sys.stderr)
            verdicts.append(_unread(name, why))
            unread += 1
            continue
        # a console log holding several trainings gives a row for each (`name-part2`, ...)
        for run, steps in replayed:
            entry = expected.get(run.name)
            exp = None if entry is None else entry.expected
            verdicts.append(verdict(run_reg, run, exp, steps))
            if args.leave_one_family_out and entry is not None and entry.family is not None:
                judged.append(Judged(run, tuple(steps), entry.expected, entry.family))
            print(f"rlvitals: {run.name}: {verdicts[-1].context}", file=sys.stderr)
    folds = leave_one_family_out(reg, judged) if judged else []
    if args.json:
        out: Any = [_as_json(v) for v in verdicts]
        if args.leave_one_family_out:
            out = {"runs": out, "leave_one_family_out": [_fold_json(f) for f in folds]}
        print(json.dumps(out, indent=2))
    else:
        print(table(verdicts))
        if args.leave_one_family_out:
            print()
            print(lofo_table(folds))
    if unread:
        return 2
    return 1 if any(not v.passed for v in verdicts if v.expected is not None) else 0


def _fold_json(f: Fold) -> dict[str, Any]:
    return {
        "family": f.family,
        "tuning": f.tuning.to_dict(),
        "changed": f.changed,
        "runs": [_as_json(v) for v in f.verdicts],
    }
