"""`rlvitals runs delete | rename | note | tag`: manage the runs of the embedded store.

They are subcommands of `rlvitals runs` (whose list, `rlvitals runs [--json]`, is
`exporter.store.runs_list`); the store changes are `exporter.store.run_admin`'s, one transaction
each. With InfluxDB configured (RLVITALS_INFLUX_URL) `delete` drops the run's points there first
(`exporter.influx.drop_run`; if InfluxDB refuses, the store is left as it was), and once more
after the store's rows are gone (a forwarder may have sent some in between); `rename` is
refused (`RENAME_REFUSED`).

Refused with one line on stderr and exit 2: an unknown run (close names suggested), a run a
live process writes (its pid and host named), a rename onto a taken name, a bad name, tag or
note, and `delete` without `--yes` when stdin is no terminal to confirm on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from exporter.config import ExporterSettings
from exporter.errors import ExporterError, WriteError
from exporter.influx.drop_run import RENAME_REFUSED, drop_run_points, influxql_string
from exporter.store import run_admin
from exporter.store.outbox import Outbox

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = sub.choices["runs"]  # `exporter.store.runs_list` made it: the list is its default
    runs.description = (
        f"{runs.description} With an ACTION (delete, rename, note, tag), change a run instead; "
        "`rlvitals runs ACTION --help` says how."
    )
    actions = runs.add_subparsers(dest="runs_action", metavar="ACTION")

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_text, description=help_text)
        # SUPPRESS: `rlvitals runs --store D delete R` keeps the D given before the action
        p.add_argument(
            "--store",
            metavar="DIR",
            default=argparse.SUPPRESS,
            help="embedded store folder (default $RLVITALS_STORE)",
        )
        return p

    d = action(
        "delete",
        "delete runs and every row they have in the store (and their points in InfluxDB when "
        "RLVITALS_INFLUX_URL is set); asks first on a terminal",
    )
    d.add_argument("names", nargs="+", metavar="RUN")
    d.add_argument("--yes", action="store_true", help="do not ask (needed when not on a terminal)")
    d.set_defaults(handler=_delete)
    r = action("rename", "rename a run everywhere the store keys it; its logs' tail follows")
    r.add_argument("old", metavar="OLD")
    r.add_argument("new", metavar="NEW")
    r.set_defaults(handler=_rename)
    n = action("note", "set (replace) a run's notes; without TEXT print them")
    n.add_argument("name", metavar="RUN")
    n.add_argument("text", nargs="?", metavar="TEXT")
    n.add_argument("--clear", action="store_true", help="remove the notes")
    n.set_defaults(handler=_note)
    t = action("tag", "add tags to a run (--remove takes them off); without TAG print its tags")
    t.add_argument("name", metavar="RUN")
    t.add_argument("tags", nargs="*", metavar="TAG")
    t.add_argument("--remove", action="store_true", help="take these tags off instead")
    t.set_defaults(handler=_tag)


class _Refused(Exception):
    """Bad input: one line on stderr, exit 2."""


def _settings(args: argparse.Namespace) -> ExporterSettings:
    try:
        settings = ExporterSettings.from_env(os.environ)
    except ExporterError as exc:
        raise _Refused(str(exc).splitlines()[0]) from None
    store = Path(args.store) if getattr(args, "store", None) else settings.store
    settings = settings.replace(store=store)
    if store.exists() and not store.is_dir():
        raise _Refused(f"--store {store} is a file; pass the store folder")
    if not settings.outbox_path.exists():
        raise _Refused(f"no store at {settings.outbox_path}; pass --store or set RLVITALS_STORE")
    return settings


def _run(args: argparse.Namespace, body: Callable[[ExporterSettings, Outbox], int]) -> int:
    try:
        settings = _settings(args)
        with Outbox(settings.outbox_path) as box:
            return body(settings, box)
    except (_Refused, run_admin.RunAdminError) as exc:
        print(f"rlvitals: error: {exc}", file=sys.stderr)
        return 2
    except ExporterError as exc:
        print(f"rlvitals: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1


def _confirm(names: list[str], box: Outbox) -> bool:
    if not sys.stdin.isatty():
        raise _Refused(
            f"refusing to delete {', '.join(repr(n) for n in names)} without confirmation: "
            "stdin is not a terminal to ask on; pass --yes"
        )
    for name in names:
        last = box.last_step(name)
        print(f"  {name}: last step {'-' if last is None else f'{last:,}'}", file=sys.stderr)
    print(f"delete {len(names)} run(s) and all their data? [y/N] ", end="", file=sys.stderr)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _delete(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names))

    def body(settings: ExporterSettings, box: Outbox) -> int:
        known = {r.run: r for r in box.runs()}
        for name in names:  # every name checked before anything is deleted
            if name not in known:
                raise run_admin.UnknownRun(run_admin.unknown_run(name, known))
        if not args.yes and not _confirm(names, box):
            print("nothing deleted", file=sys.stderr)
            return 1
        ttl = settings.lifecycle.lease_ttl_s
        for name in names:
            run_admin.check_deletable(box, name, lease_ttl_s=ttl)
            if settings.influx_url:
                try:
                    drop_run_points(settings, name)
                except WriteError as exc:
                    print(
                        f"rlvitals: error: {exc}; run {name!r} was left in the store as it was: "
                        "run the same command again when InfluxDB answers",
                        file=sys.stderr,
                    )
                    return 1
            counts = run_admin.delete_run(box, name, lease_ttl_s=ttl)
            if settings.influx_url:
                # again: a forwarder (another run's process sends every unsent row of the store)
                # may have read rows of this run before they were deleted and sent them since
                try:
                    drop_run_points(settings, name)
                except WriteError as exc:
                    print(
                        f"rlvitals: warning: {exc}; points of {name!r} sent while it was being "
                        "deleted may be left in InfluxDB: drop them with InfluxQL "
                        f'DROP SERIES WHERE "run" = {influxql_string(name)}',
                        file=sys.stderr,
                    )
            where = " and from InfluxDB" if settings.influx_url else ""
            print(
                f"deleted run {name!r}{where}: {counts.get('samples', 0):,} sample(s), "
                f"{counts.get('events', 0):,} event(s)"
            )
        return 0

    return _run(args, body)


def _rename(args: argparse.Namespace) -> int:
    def body(settings: ExporterSettings, box: Outbox) -> int:
        if settings.influx_url:
            raise _Refused(RENAME_REFUSED)
        run_admin.rename_run(box, args.old, args.new, lease_ttl_s=settings.lifecycle.lease_ttl_s)
        print(f"renamed run {args.old!r} to {args.new!r}")
        return 0

    return _run(args, body)


def _note(args: argparse.Namespace) -> int:
    def body(settings: ExporterSettings, box: Outbox) -> int:
        if args.clear and args.text is not None:
            raise _Refused("give TEXT or --clear, not both")
        if not args.clear and args.text is None:
            record = box.run(args.name)
            if record is None:
                raise run_admin.UnknownRun(
                    run_admin.unknown_run(args.name, [r.run for r in box.runs()])
                )
            print(record.notes)
            return 0
        run_admin.set_notes(box, args.name, "" if args.clear else args.text)
        print(f"{'cleared' if args.clear else 'set'} the notes of run {args.name!r}")
        return 0

    return _run(args, body)


def _tag(args: argparse.Namespace) -> int:
    def body(settings: ExporterSettings, box: Outbox) -> int:
        if args.remove:
            tags = run_admin.set_tags(box, args.name, remove=args.tags)
        else:
            tags = run_admin.set_tags(box, args.name, add=args.tags)
        print(" ".join(tags) if tags else f"run {args.name!r} has no tags")
        return 0

    return _run(args, body)
