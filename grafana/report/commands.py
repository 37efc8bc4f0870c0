"""`rlvitals report --run RUN [--out FILE] [--lang en|zh|both] [--png FILE]`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from registry import add_registry_argument

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        description="Write one HTML file (no external requests) with the run's core curves, raw "
        "and smoothed, healthy bands by stage, events, diagnosis cards and the registry's "
        "explanations, in English and Chinese. Reads InfluxDB when RLVITALS_INFLUX_URL is set, "
        "else the embedded store under RLVITALS_STORE.",
    )
    p.add_argument(
        "--run", required=True, metavar="RUN", help="run name (see `rlvitals serve` /api/runs)"
    )
    p.add_argument(
        "--out", type=Path, metavar="FILE", help="HTML file (default rlvitals-report-RUN.html)"
    )
    p.add_argument(
        "--lang",
        choices=("en", "zh", "both"),
        default="both",
        help="languages (default both, with a toggle)",
    )
    p.add_argument(
        "--png",
        type=Path,
        metavar="FILE",
        help="also save a full-page PNG (needs playwright and Chromium)",
    )
    p.add_argument(
        "--chromium",
        default=None,
        metavar="PATH",
        help="Chromium for --png (default /usr/bin/chromium)",
    )
    p.add_argument("--points", type=int, default=1000, help="max points per series (default 1000)")
    p.add_argument("--smoothing", type=float, default=0.6, help="EMA weight 0-0.999 (default 0.6)")
    p.add_argument("--store", type=Path, help="embedded store folder (default RLVITALS_STORE)")
    add_registry_argument(p)
    p.set_defaults(handler=_report)


def _default_out(run: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run)
    return Path(f"rlvitals-report-{safe}.html")


def _report(args: argparse.Namespace) -> int:
    import registry
    from grafana.datasource.config import ConfigError, DatasourceConfig
    from grafana.datasource.history import HistoryError

    from .build import write_report
    from .png import DEFAULT_CHROMIUM, PngError, screenshot

    if not 2 <= args.points <= 100_000:
        print("rlvitals report: --points must be between 2 and 100000", file=sys.stderr)
        return 2
    if not 0.0 <= args.smoothing < 1.0:
        print("rlvitals report: --smoothing must be in [0, 1)", file=sys.stderr)
        return 2
    try:
        config = DatasourceConfig.from_env(os.environ)
        if args.store is not None:
            config = config.replace(store=args.store)
        reg = registry.registry_from_args(args)
        out = args.out or _default_out(args.run)
        write_report(
            config, reg, args.run, out, lang=args.lang, points=args.points, smoothing=args.smoothing
        )
    except (ConfigError, registry.RegistryError, HistoryError, LookupError, OSError) as exc:
        print(f"rlvitals report: {exc}", file=sys.stderr)
        return 2
    print(f"report written to {out.resolve()}")
    if args.png is not None:
        try:
            screenshot(out, args.png, chromium=args.chromium or DEFAULT_CHROMIUM)
        except PngError as exc:
            print(f"rlvitals report: {exc}", file=sys.stderr)
            return 2
        print(f"screenshot written to {args.png.resolve()}")
    return 0
