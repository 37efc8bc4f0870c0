"""`rlvitals serve LOGDIR` beside `tensorboard --logdir` on the same folder.

    python bench/bench_serve_logdir.py [--runs 50] [--steps 50000] [--big 1000000]
    python bench/bench_serve_logdir.py --long 300000 [--rounds 3]

The folder (made once, kept under bench/results/serve-logdir-cache/): `--runs` SB3-like PPO runs,
each an event file of SB3's TensorBoard tags (12, as PPO writes them) every 2048 steps up to
`--steps`, one event per scalar as SB3's SummaryWriter output writes it; and one run of `--big`
steps logging 2 tags every step. Each tool gets its own copy and runs alone (the machine is
shared), with its default poll / reload interval. Measured:

  listed    from the process start until the SB3 runs, then all runs, are listed (rlvitals
            `/api/runs`, TensorBoard `/data/plugin/scalars/tags`)
  ready     from the process start until every run is listed and the big run's data is
            served: rlvitals `/api/runs` lists all, the big run's last step is its last, its
            `/api/fields` and first `/api/field_series` answer; TensorBoard
            `/data/plugin/scalars/tags` lists all and a `/data/plugin/scalars/scalars` request
            for the big run answers with its last step
  new step  one more rollout appended to a run's event file, until the server shows it
  peak RSS  the most the server's processes held at once (sampled every 0.2 s; TensorBoard's
            data server process counted with it)
  restart   a second start on the same folder (and, for rlvitals, the same store) until ready

Prints a table with the ratios (rlvitals / TensorBoard). Needs tensorboard in the venv.

`--long STEPS` measures one thing instead: a single event file of STEPS steps x 10 of SB3's PPO
tags at every step (a SummaryWriter's long run), each tool alone on its own copy, alternating for
`--rounds`: from the process start until the run's whole chart is served (rlvitals: its page's
series of policy KL from step 0 to the last, drawn from the import's sketch while the values are
stored; TensorBoard: its scalars route answering with the last step), and for rlvitals until every
value is stored (each field's series counts STEPS points); the load average beside each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402

from exporter.sources.tfrecord import masked_crc32c  # noqa: E402

# what SB3's PPO writes to TensorBoard each rollout (stable_baselines3 on_policy_algorithm.py and
# ppo.py; time/iterations, time/time_elapsed, train/n_updates are excluded from TensorBoard)
SB3_TAGS = (
    "rollout/ep_len_mean",
    "rollout/ep_rew_mean",
    "time/fps",
    "train/approx_kl",
    "train/clip_fraction",
    "train/clip_range",
    "train/entropy_loss",
    "train/explained_variance",
    "train/learning_rate",
    "train/loss",
    "train/policy_gradient_loss",
    "train/value_loss",
)
BIG_TAGS = ("rollout/ep_rew_mean", "train/approx_kl")
ROLLOUT = 2048
BIG = "big_1M"
WAIT_S = 1800.0


def _record(event: Event) -> bytes:
    """One TFRecord: length, its masked CRC-32C, the payload, its masked CRC-32C."""
    data = event.SerializeToString()
    head = struct.pack("<Q", len(data))
    return (
        head
        + struct.pack("<I", masked_crc32c(head))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _scalar(step: int, tag: str, value: float) -> bytes:
    summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
    return _record(Event(wall_time=1.7e9 + step / 1000, step=step, summary=summary))


def _event_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.tfevents.1700000000.bench.1.0"
    path.write_bytes(_record(Event(wall_time=1.7e9, file_version="brain.Event:2")))
    return path


def _rollout(step: int, i: int) -> bytes:
    return b"".join(
        _scalar(step, tag, 3e-4 if tag == "train/learning_rate" else 0.01 * (k + 1) + i * 1e-3)
        for k, tag in enumerate(SB3_TAGS)
    )


def write_big_run(folder: Path, steps: int) -> Path:
    """The long run: BIG_TAGS at every step from 0 to `steps` - 1, written in chunks."""
    path = _event_file(folder)
    with open(path, "ab") as fh:
        chunk: list[bytes] = []
        for step in range(steps):
            chunk.extend(_scalar(step, tag, 0.5 + (step % 1000) * 1e-4) for tag in BIG_TAGS)
            if len(chunk) >= 20_000:
                fh.write(b"".join(chunk))
                chunk.clear()
        fh.write(b"".join(chunk))
    return path


def make_folder(root: Path, runs: int, steps: int, big: int) -> Path:
    done = root / "done.json"
    want = {"runs": runs, "steps": steps, "big": big}
    if done.exists() and json.loads(done.read_text()) == want:
        return root / "runs"
    shutil.rmtree(root, ignore_errors=True)
    for r in range(runs):
        path = _event_file(root / "runs" / f"PPO_{r + 1}")
        with open(path, "ab") as fh:
            for i, step in enumerate(range(ROLLOUT, steps + 1, ROLLOUT)):
                fh.write(_rollout(step, i))
    write_big_run(root / "runs" / BIG, big)
    done.write_text(json.dumps(want))
    return root / "runs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


class _Peak:
    """The most RSS a process and its children held at once, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self._proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            try:
                procs = [self._proc, *self._proc.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in procs)
            except psutil.Error:
                continue
            self.peak = max(self.peak, rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(2)
        return self.peak


def _until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if proc.poll() is not None:
            raise SystemExit(f"{what}: the server exited ({proc.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not ready in {WAIT_S:.0f} s")
        time.sleep(0.1)


class _Rlvitals:
    name = "rlvitals serve"

    def __init__(self, folder: Path, work: Path, runs: int) -> None:
        self.folder, self.store, self.runs = folder, work / "store", runs

    def start(self, port: int) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
        env["PYTHONPATH"] = str(ROOT)
        argv = [sys.executable, "-m", "rlvitals", "serve", str(self.folder)]
        argv += ["--store", str(self.store), "--port", str(port)]
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listed(self, base: str, runs: int) -> bool:
        body = _get(base + "/api/runs")
        return isinstance(body, dict) and len(body["runs"]) >= runs

    def ready(self, base: str, big_last: int) -> bool:
        body = _get(base + "/api/runs")
        if not isinstance(body, dict):
            return False
        steps = {r["run"]: r["last_step"] for r in body["runs"]}
        if len(steps) < self.runs + 1 or steps.get(BIG) != big_last:
            return False
        q = urllib.parse.urlencode
        fields = _get(f"{base}/api/fields?{q({'run': BIG})}")
        if not isinstance(fields, dict) or not fields.get("fields"):
            return False
        field = fields["fields"][0]["field"]
        series = _get(f"{base}/api/field_series?{q({'run': BIG, 'field': field, 'points': 1000})}")
        return isinstance(series, dict)

    def shows(self, base: str, run: str, step: int) -> bool:
        body = _get(base + "/api/runs")
        return isinstance(body, dict) and any(
            r["run"] == run and r["last_step"] == step for r in body["runs"]
        )


class _TensorBoard:
    name = "tensorboard --logdir"

    def __init__(self, folder: Path, work: Path, runs: int) -> None:
        self.folder, self.runs = folder, runs

    def start(self, port: int) -> subprocess.Popen[bytes]:
        tb = Path(sys.executable).with_name("tensorboard")
        argv = [str(tb), "--logdir", str(self.folder), "--host", "127.0.0.1", "--port", str(port)]
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _last(self, base: str, run: str, tag: str) -> int | None:
        q = urllib.parse.urlencode({"run": run, "tag": tag})
        body = _get(f"{base}/data/plugin/scalars/scalars?{q}")
        return int(body[-1][1]) if isinstance(body, list) and body else None

    def listed(self, base: str, runs: int) -> bool:
        tags = _get(base + "/data/plugin/scalars/tags")
        return isinstance(tags, dict) and len(tags) >= runs

    def ready(self, base: str, big_last: int) -> bool:
        tags = _get(base + "/data/plugin/scalars/tags")
        if not isinstance(tags, dict) or len(tags) < self.runs + 1:
            return False
        return self._last(base, BIG, BIG_TAGS[0]) == big_last

    def shows(self, base: str, run: str, step: int) -> bool:
        return self._last(base, run, "rollout/ep_rew_mean") == step


def _measure(tool: _Rlvitals | _TensorBoard, args: argparse.Namespace) -> dict[str, float]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out: dict[str, float] = {}
    started = time.monotonic()
    proc = tool.start(port)
    peak = _Peak(proc.pid)
    try:
        _until(lambda: tool.listed(base, tool.runs), proc, tool.name)
        out["SB3 listed"] = time.monotonic() - started
        _until(lambda: tool.listed(base, tool.runs + 1), proc, tool.name)
        out["all listed"] = time.monotonic() - started
        _until(lambda: tool.ready(base, args.big - 1), proc, tool.name)
        out["ready"] = time.monotonic() - started
        run = "PPO_1"
        step = (args.steps // ROLLOUT + 1) * ROLLOUT
        event_file = next((tool.folder / run).glob("events.out.tfevents.*"))
        with open(event_file, "ab") as fh:
            fh.write(_rollout(step, 999))
        appended = time.monotonic()
        _until(lambda: tool.shows(base, run, step), proc, f"{tool.name} new step")
        out["new step"] = time.monotonic() - appended
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        out["peak RSS MB"] = peak.stop() / 1e6
    started = time.monotonic()
    proc = tool.start(port)
    try:
        _until(lambda: tool.ready(base, args.big - 1), proc, f"{tool.name} restart")
        out["restart"] = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    return out


LONG = "long"
LONG_TAGS = SB3_TAGS[:10]
LONG_FIELD = "policy_kl"  # train/approx_kl, as the registry stores it
LONG_FIELDS = (  # LONG_TAGS as the registry stores them
    "episode_length",
    "episodic_return",
    "samples_per_second",
    "policy_kl",
    "clip_fraction",
    "clip_epsilon",
    "policy_entropy",
    "explained_variance",
    "learning_rate",
    "total_loss",
)
LONG_TAG = "train/approx_kl"


def write_long_run(folder: Path, steps: int) -> Path:
    """The long run of `--long`: LONG_TAGS (SB3's PPO tags) at every step, as a SummaryWriter
    writes them (one event per scalar)."""
    path = _event_file(folder)
    with open(path, "ab") as fh:
        chunk: list[bytes] = []
        for step in range(steps):
            chunk.extend(
                _scalar(step, tag, 0.5 + (step % 1000) * 1e-4 + k * 1e-3)
                for k, tag in enumerate(LONG_TAGS)
            )
            if len(chunk) >= 20_000:
                fh.write(b"".join(chunk))
                chunk.clear()
        fh.write(b"".join(chunk))
    return path


def _long_series(base: str, field: str) -> dict[str, object] | None:
    q = urllib.parse.urlencode({"run": LONG, "field": field, "points": 1000})
    body = _get(f"{base}/api/field_series?{q}")
    return body if isinstance(body, dict) and body.get("steps") else None


def _measure_long(tool: str, folder: Path, work: Path, steps: int) -> dict[str, float]:
    """From the process start: the long run's whole chart on screen (`whole`: rlvitals' page
    answers its series from its first step to its last; TensorBoard's scalars route answers
    with its last step), and for rlvitals every value stored (`stored`: the series counts
    `steps` stored points for each of the run's fields)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out: dict[str, float] = {"load before": os.getloadavg()[0]}
    started = time.monotonic()
    if tool == "rlvitals":
        proc = _Rlvitals(folder, work, 0).start(port)

        def whole() -> bool:
            # its first point is the first bucket's (a bucket mean sits at its last step)
            body = _long_series(base, LONG_FIELD)
            if body is None:
                return False
            s: list[int] = body["steps"]  # type: ignore[assignment]
            return s[0] <= int(body["bucket_steps"]) - 1 and s[-1] == steps - 1  # type: ignore[call-overload]

        def stored() -> bool:
            bodies = [_long_series(base, n) for n in LONG_FIELDS]
            return all(b is not None and b["source_points"] == steps for b in bodies)

    else:
        tb = _TensorBoard(folder, work, 0)
        proc = tb.start(port)

        def whole() -> bool:
            return tb._last(base, LONG, LONG_TAG) == steps - 1

        stored = whole  # TensorBoard keeps a sample: nothing more comes
    try:
        _until(whole, proc, f"{tool} whole")
        out["whole"] = time.monotonic() - started
        _until(stored, proc, f"{tool} stored")
        out["stored"] = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    out["load after"] = os.getloadavg()[0]
    return out


def long_main(steps: int, rounds: int) -> int:
    """`--long STEPS`: one event file of STEPS steps x 10 tags, rlvitals serve and TensorBoard
    each alone on its own copy, alternating, `rounds` times."""
    root = ROOT / "bench" / "results" / "serve-logdir-long"
    done = root / "done.json"
    if not (done.exists() and json.loads(done.read_text()) == {"steps": steps}):
        shutil.rmtree(root, ignore_errors=True)
        write_long_run(root / "runs" / LONG, steps)
        done.write_text(json.dumps({"steps": steps}))
    size = sum(p.stat().st_size for p in (root / "runs").rglob("*") if p.is_file())
    print(f"one run: {steps:,} steps x {len(LONG_TAGS)} tags, {size / 1e6:.0f} MB", flush=True)
    rows: list[tuple[str, dict[str, float]]] = []
    for _ in range(rounds):
        for tool in ("rlvitals", "tensorboard"):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                shutil.copytree(root / "runs", work / "runs")
                got = _measure_long(tool, work / "runs", work, steps)
                rows.append((tool, got))
                print(f"{tool}: {got}", flush=True)
    print(f"\n{'':12}{'whole chart':>12}{'every value':>13}{'load (1 min)':>14}")
    for tool, got in rows:
        load = f"{got['load before']:.1f}-{got['load after']:.1f}"
        print(f"{tool:12}{got['whole']:>10.1f} s{got['stored']:>11.1f} s{load:>14}")
    ours = [g["whole"] for t, g in rows if t == "rlvitals"]
    theirs = [g["whole"] for t, g in rows if t == "tensorboard"]
    ratio = sorted(ours)[len(ours) // 2] / sorted(theirs)[len(theirs) // 2]
    print(f"whole chart, medians: rlvitals / TensorBoard = {ratio:.2f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument(
        "--long",
        type=int,
        default=None,
        metavar="STEPS",
        help="measure only one event file of STEPS steps x 10 tags (time to a whole-run chart)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="with --long: rounds of both tools")
    args = ap.parse_args()
    if args.long is not None:
        return long_main(args.long, args.rounds)
    made = time.monotonic()
    cache = make_folder(
        ROOT / "bench" / "results" / "serve-logdir-cache", args.runs, args.steps, args.big
    )
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    print(
        f"folder: {args.runs} SB3-like runs x {args.steps:,} steps ({len(SB3_TAGS)} tags every "
        f"{ROLLOUT}), one run of {args.big:,} steps x {len(BIG_TAGS)} tags; "
        f"{size / 1e6:.0f} MB ({time.monotonic() - made:.0f} s to make or find)",
        flush=True,
    )
    results = {}
    for kind in (_Rlvitals, _TensorBoard):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            shutil.copytree(cache, work / "runs")
            tool = kind(work / "runs", work, args.runs)
            results[tool.name] = _measure(tool, args)
            print(f"{tool.name}: {results[tool.name]}", flush=True)
    ours, theirs = results["rlvitals serve"], results["tensorboard --logdir"]
    print(f"\n{'':14}{'rlvitals serve':>16}{'tensorboard':>14}{'ratio':>8}")
    for key in ("SB3 listed", "all listed", "ready", "new step", "restart", "peak RSS MB"):
        unit = "" if key.endswith("MB") else " s"
        print(
            f"{key:14}{ours[key]:>14.1f}{unit:2}{theirs[key]:>12.1f}{unit:2}"
            f"{ours[key] / theirs[key]:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
