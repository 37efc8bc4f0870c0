"""Import throughput: a large TensorBoard log through `rlvitals import`'s pipeline into InfluxDB,
versus POSTing the same line-protocol bytes straight to the same InfluxDB's /write.

    python bench/bench_import.py [--steps 20000] [--tags 10]

Starts its own influxd (Debian's `influxdb`) on free loopback ports in a temporary folder, writes
one event file the way torch's SummaryWriter does (one event per scalar), then measures, in one run:

  pipeline  what `rlvitals import` does with InfluxDB configured: event file -> sources ->
            translation -> /write directly (exporter/direct.py: the log file is the durable
            copy), until all is sent
  outbox    the same through the outbox (`import --via-outbox`, and what `tail` does): sources ->
            Run.log -> worker -> outbox -> forwarder -> /write, until all is sent
  floor     the same points, rendered to line protocol beforehand, POSTed in batches of the
            forwarder's size over one keep-alive connection

and prints the rates and the ratios (goal: pipeline >= 0.5 x floor). Also times reading alone.
"""

from __future__ import annotations

import argparse
import http.client
import sqlite3
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import InfluxServer  # noqa: E402
from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402

import exporter  # noqa: E402
import registry  # noqa: E402
from exporter.forwarder import render_lines  # noqa: E402
from exporter.ingest import Ingest  # noqa: E402
from exporter.outbox import Outbox  # noqa: E402
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


def make_log(folder: Path, steps: int, tags: int) -> Path:
    writer = EventFileWriter(str(folder), max_queue_size=1000)
    names = (_TAGS * (tags // len(_TAGS) + 1))[:tags]
    names = [n if i < len(_TAGS) else f"{n}_{i}" for i, n in enumerate(names)]
    for step in range(steps):
        for i, tag in enumerate(names):
            value = 0.5 * (step % 97) / 97.0 + 0.01 * i  # inside every metric's limits
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=1.7e9 + step, step=step * 128, summary=summary))
    writer.close()
    return next(folder.glob("events.out.tfevents.*"))


def create_db(server: InfluxServer, name: str) -> None:
    server.post_query(f'CREATE DATABASE "{name}"')


def count(server: InfluxServer, db: str) -> int:
    rows = server.query(db, 'SELECT count("step") FROM /.*/')
    return sum(int(r["count"]) for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--tags", type=int, default=10)
    args = ap.parse_args()
    reg = registry.load()
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench-") as tmp:
        work = Path(tmp)
        server = InfluxServer(work / "influxd")
        (work / "influxd").mkdir()
        server.start()
        try:
            log_dir = work / "logs" / "bench_run"
            t0 = time.perf_counter()
            make_log(log_dir, args.steps, args.tags)
            scalars = args.steps * args.tags
            print(
                f"wrote {scalars:,} scalars ({args.steps:,} steps x {args.tags} tags) "
                f"in {time.perf_counter() - t0:.1f} s"
            )

            problems: list[Malformed] = []
            t0 = time.perf_counter()
            reading = LogSet([log_dir], problems.append)
            n = sum(1 for _, records in reading.poll(final=True) for _ in records)
            read_s = time.perf_counter() - t0
            reading.close()
            print(f"read only:  {n:,} steps in {read_s:.2f} s ({scalars / read_s:,.0f} scalars/s)")

            timings: dict[str, float] = {}
            for name, direct in (("pipeline", True), ("outbox", False)):
                create_db(server, name)
                settings = exporter.ExporterSettings(
                    store=work / f"store-{name}",
                    influx_url=server.url,
                    influx_database=name,
                    policy="warn",
                )
                t0 = time.perf_counter()
                logs = LogSet([log_dir], problems.append)
                ingest = Ingest(registry=reg, settings=settings, framework="cleanrl", direct=direct)
                for log, records in logs.poll(final=True):
                    ingest.feed(log, records)
                while not ingest.flush(timeout=30.0):
                    pass
                timings[name] = time.perf_counter() - t0
                ingest.finish(30.0)
                logs.close()
            pipe_s, outbox_s = timings["pipeline"], timings["outbox"]
            stored = count(server, "pipeline")
            via_outbox = count(server, "outbox")

            # The floor: the very points the pipeline sent, rendered beforehand, POSTed raw.
            db = sqlite3.connect(settings.outbox_path)
            db.execute("UPDATE samples SET sent = 0")
            db.execute("UPDATE events SET sent = 0")
            db.commit()
            db.close()
            batches: list[bytes] = []
            with Outbox(settings.outbox_path) as box:
                pending = box.pending_samples(10**9)
            for i in range(0, len(pending), settings.batch_size):
                lines = render_lines(pending[i : i + settings.batch_size], [])
                batches.append(("\n".join(lines) + "\n").encode())
            total_bytes = sum(len(b) for b in batches)
            create_db(server, "floor")
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            query = urllib.parse.urlencode({"db": "floor", "precision": "s"})
            t0 = time.perf_counter()
            for body in batches:
                conn.request("POST", f"/write?{query}", body=body)
                resp = conn.getresponse()
                resp.read()
                if resp.status != 204:
                    raise SystemExit(f"/write answered {resp.status}")
            floor_s = time.perf_counter() - t0
            conn.close()
            raw_points = count(server, "floor")
        finally:
            server.stop()
    print(
        f"pipeline:   {scalars:,} scalars -> {stored:,} points in {pipe_s:.2f} s "
        f"({scalars / pipe_s:,.0f} scalars/s)"
    )
    print(
        f"outbox:     {scalars:,} scalars -> {via_outbox:,} points in {outbox_s:.2f} s "
        f"({scalars / outbox_s:,.0f} scalars/s, ratio {floor_s / outbox_s:.2f}; `tail`, "
        "`import --via-outbox`)"
    )
    print(
        f"floor:      same {total_bytes / 1e6:.1f} MB of line protocol ({raw_points:,} points) "
        f"POSTed in {floor_s:.2f} s ({scalars / floor_s:,.0f} scalars/s)"
    )
    print(f"ratio pipeline/floor throughput: {floor_s / pipe_s:.2f} (goal >= 0.5)")
    if problems:
        print(f"{len(problems)} malformed record(s): {problems[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
