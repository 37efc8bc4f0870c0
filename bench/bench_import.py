"""Import throughput: a large TensorBoard log through `rlvitals import`'s pipeline into InfluxDB,
versus POSTing the same line-protocol bytes straight to the same InfluxDB's /write.

    python bench/bench_import.py [--steps 20000] [--tags 10] [--stride 128] [--rounds 3]

Starts its own influxd (Debian's `influxdb`) on free loopback ports in a temporary folder, writes
one event file the way torch's SummaryWriter does (one event per scalar, float32 values of a
random walk), then measures, in one run:

  import    what `rlvitals import` does with InfluxDB configured: event file -> sources (steps
            in columns) -> translation -> /write directly (exporter/influx/direct.py: the log file is
            the durable copy), until all is sent and the read positions are stored
  tail      what `rlvitals tail` does first with InfluxDB configured: the same catch-up on the
            existing log, then the hand-over to the outbox path for what comes next
  floor     the very request bodies each of those sent, recorded on their way out, POSTed
            again in the same order over one keep-alive connection to a fresh database
  outbox    (once) the same through the outbox (`import --via-outbox`, and what `tail` did for
            its catch-up before): sources -> Run.log -> worker -> outbox -> forwarder -> /write

Each round runs import, its floor, tail, its floor, each into fresh databases, for `--rounds`
rounds, because a shared 2-core machine varies by tens of percent from one second to the next;
the ratios reported are the medians of the rounds' ratios (goal: >= 0.8 x floor). Also prints
reading alone and the CPU seconds this process and influxd used in each phase.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import InfluxServer  # noqa: E402
from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402

import exporter  # noqa: E402
import exporter.influx.direct  # noqa: E402
import registry  # noqa: E402
from exporter.influx.writers import Writer  # noqa: E402
from exporter.ingest.feed import Ingest  # noqa: E402
from exporter.sources import LogSet, Malformed  # noqa: E402

_TAGS = [
    "losses/approx_kl",
    "losses/old_approx_kl",
    "losses/clipfrac",
    "losses/value_loss",
    "losses/entropy",
    "charts/learning_rate",
    "charts/SPS",
    "charts/episodic_return",
    "charts/episodic_length",
    "losses/policy_loss",
]


def make_log(folder: Path, steps: int, tags: int, stride: int = 128) -> Path:
    writer = EventFileWriter(str(folder), max_queue_size=1000)
    names = (_TAGS * (tags // len(_TAGS) + 1))[:tags]
    names = [n if i < len(_TAGS) else f"{n}_{i}" for i, n in enumerate(names)]
    rng = random.Random(7)
    level = [0.5] * len(names)
    for step in range(steps):
        for i, tag in enumerate(names):
            # a random walk kept inside every metric's limits, like a real training curve
            level[i] = min(0.99, max(0.01, level[i] + rng.gauss(0.0, 0.01)))
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=level[i])])
            writer.add_event(Event(wall_time=1.7e9 + step, step=step * stride, summary=summary))
    writer.close()
    return next(folder.glob("events.out.tfevents.*"))


class _Recording:
    """The pipeline's writer, keeping a copy of every request body it sends."""

    def __init__(self, writer: Writer, bodies: list[bytes]) -> None:
        self._writer = writer
        self._bodies = bodies

    def write(self, body: bytes) -> None:
        self._writer.write(body)
        self._bodies.append(body)

    def close(self) -> None:
        self._writer.close()

    def describe(self) -> str:
        return self._writer.describe()


def create_db(server: InfluxServer, name: str) -> None:
    server.post_query(f'CREATE DATABASE "{name}"')


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count(server: InfluxServer, db: str) -> int:
    rows = server.query(db, 'SELECT count("step") FROM /.*/')
    return sum(int(r["count"]) for r in rows)


def post(server: InfluxServer, db: str, bodies: list[bytes]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    query = urllib.parse.urlencode({"db": db, "precision": "s"})
    for body in bodies:
        conn.request("POST", f"/write?{query}", body=body)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 204:
            raise SystemExit(f"/write answered {resp.status}")
    conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--tags", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    # 128: a log step per PPO rollout (CleanRL's global_step); 1: a value at every step, where
    # the 64-step rollups are kept too
    ap.add_argument("--stride", type=int, default=128, help="steps between logged points")
    args = ap.parse_args()
    reg = registry.load()
    scalars = args.steps * args.tags
    problems: list[Malformed] = []
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench-") as tmp:
        work = Path(tmp)
        server = InfluxServer(work / "influxd")
        (work / "influxd").mkdir()
        server.start()
        influxd = server.proc.pid if server.proc else 0

        def timed(action: Callable[[], object]) -> tuple[float, float, float]:
            """Wall seconds, this process's CPU seconds and influxd's CPU seconds."""
            t0, c0, d0 = time.perf_counter(), time.process_time(), cpu_seconds(influxd)
            action()
            return (
                time.perf_counter() - t0,
                time.process_time() - c0,
                cpu_seconds(influxd) - d0,
            )

        def run_import(name: str, direct: bool, *, tail: bool = False) -> None:
            """As `rlvitals import` (or, with `tail`, `rlvitals tail`'s catch-up) does it."""
            settings = exporter.ExporterSettings(
                store=work / f"store-{name}",
                influx_url=server.url,
                influx_database=name,
                policy="warn",
            )
            logs = LogSet([log_dir], problems.append)
            ingest = Ingest(registry=reg, settings=settings, framework="cleanrl", direct=direct)
            for log, records in (logs.poll_blocks if direct else logs.poll)(final=not tail):
                ingest.feed(log, records)
                position = logs.position(log)
                if position is not None:
                    ingest.save_position(log, position)
            while not ingest.flush(timeout=30.0):
                pass
            if tail:
                ingest.hand_over(30.0)
            ingest.finish(30.0)
            logs.close()

        try:
            log_dir = work / "logs" / "bench_run"
            t0 = time.perf_counter()
            make_log(log_dir, args.steps, args.tags, args.stride)
            print(
                f"wrote {scalars:,} scalars ({args.steps:,} steps x {args.tags} tags) "
                f"in {time.perf_counter() - t0:.1f} s"
            )

            def read() -> None:
                reading = LogSet([log_dir], problems.append)
                for _, records in reading.poll(final=True):
                    for _ in records:
                        pass
                reading.close()

            read_s, _, _ = timed(read)
            print(f"read only:  {read_s:.2f} s ({scalars / read_s:,.0f} scalars/s)")

            make_writer = exporter.influx.direct.make_writer
            ratios: dict[str, list[float]] = {"import": [], "tail": []}
            for r in range(args.rounds):
                for kind in ratios:
                    bodies: list[bytes] = []
                    exporter.influx.direct.make_writer = lambda s, b=bodies: _Recording(
                        make_writer(s), b
                    )  # type: ignore[assignment,misc]
                    db = f"{kind}{r}"
                    create_db(server, db)
                    pipe = timed(lambda db=db, k=kind: run_import(db, True, tail=k == "tail"))
                    exporter.influx.direct.make_writer = make_writer
                    create_db(server, f"floor_{db}")
                    floor = timed(lambda db=db, b=bodies: post(server, f"floor_{db}", b))
                    stored, raw = count(server, db), count(server, f"floor_{db}")
                    ratios[kind].append(floor[0] / pipe[0])
                    print(
                        f"round {r + 1} {kind}: {pipe[0]:.2f} s ({scalars / pipe[0]:,.0f} "
                        f"scalars/s, {stored:,} points; CPU here {pipe[1]:.2f} s, influxd "
                        f"{pipe[2]:.2f} s), floor {floor[0]:.2f} s "
                        f"({sum(map(len, bodies)) / 1e6:.1f} MB in {len(bodies)} requests, "
                        f"{raw:,} points; influxd CPU {floor[2]:.2f} s), "
                        f"ratio {ratios[kind][-1]:.2f}"
                    )
            create_db(server, "outbox")
            outbox = timed(lambda: run_import("outbox", False))
            print(
                f"outbox:     {outbox[0]:.2f} s ({scalars / outbox[0]:,.0f} scalars/s, "
                f"{count(server, 'outbox'):,} points; `import --via-outbox`, and `tail`'s "
                "catch-up before it went direct)"
            )
        finally:
            server.stop()
    for kind, values in ratios.items():
        print(
            f"ratio {kind}/floor throughput: median {statistics.median(values):.2f} of "
            f"{', '.join(f'{x:.2f}' for x in values)} (goal >= 0.8)"
        )
    if problems:
        print(f"{len(problems)} malformed record(s): {problems[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
