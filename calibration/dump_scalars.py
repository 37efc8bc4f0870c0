"""Print every scalar a TensorBoard event file (or a run folder) holds, tag by tag, step by step.

    python calibration/dump_scalars.py tests/fixtures/runs/sb3_dqn_cartpole_healthy
    python calibration/dump_scalars.py RUN --tag rollout/ep_rew_mean --tag train/loss --points 40

For writing expected.yaml by reading the curves: it uses TensorBoard's own `EventAccumulator` (no
rlvitals code), keeps every point (size_guidance 0), and with `--points N` prints N evenly spaced
points per tag plus the first, last, min and max, so a long curve still fits on a screen.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="an event file or a folder holding one")
    parser.add_argument("--tag", action="append", default=[], help="only tags containing this")
    parser.add_argument("--points", type=int, default=0, help="at most this many points per tag")
    args = parser.parse_args(argv)

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(args.path, size_guidance={"scalars": 0})
    acc.Reload()
    for tag in sorted(acc.Tags()["scalars"]):
        if args.tag and not any(t in tag for t in args.tag):
            continue
        events = acc.Scalars(tag)
        values = [e.value for e in events]
        finite = [v for v in values if math.isfinite(v)]
        bad = len(values) - len(finite)
        lo = min(finite) if finite else float("nan")
        hi = max(finite) if finite else float("nan")
        print(
            f"== {tag}: {len(events)} points, steps {events[0].step}..{events[-1].step}, "
            f"min {lo:.4g}, max {hi:.4g}, non-finite {bad}"
        )
        keep = range(len(events))
        if args.points and len(events) > args.points:
            stride = len(events) / args.points
            keep = sorted({int(i * stride) for i in range(args.points)} | {len(events) - 1})
        print("  " + "  ".join(f"{events[i].step}:{events[i].value:.4g}" for i in keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
