"""One verdict whatever the reading order (issue 35): for every corpus run, the cards
`GET /api/cards` answers and the config table `GET /api/run` shows are the same whether the
run's event file was followed live as it grew (`rlvitals serve LOGDIR` / `tail --follow`) or
imported whole after training (`rlvitals import`).

The followed side is `follow_logs`, the loop `serve LOGDIR` runs in its follower thread
(`exporter/ingest/background.py`), reading a copy of the file that grows between its polls by
whole records, as a trainer's writer flushes them, in `CHUNKS` pieces. The imported side is
`import_into`, what `rlvitals import PATH --run NAME` does. Each goes into a store of its own,
served by a real datasource app. Compared at the run's last step, and at a middle one: the
follower stopped after half the pieces against an import of the file cut there.

First pass, before issue 35's fix: 15 of the 47 corpus runs differed (all SB3 runs but the
A2C/DQN ones whose first dump already names them). The follower decided a run's context from
what the file held when it first read it, the first dump, before the `train/` names that say
"PPO, discrete actions" were logged, and never again: the config table lacked the algorithm and
action space in all 15; in 2 (sb3_ppo_cartpole_lr_high, _noclip, whose first entropy is not
ln 2) the entropy card was judged against the action-space-free absolute band instead of ln 2,
and in 1 (_lr_high) it ended critical followed, warning imported. Cut into 4 equal pieces
instead, 2 runs differed, in the last bits of a mean only: the first read must be small.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from tensorboard.compat.proto.event_pb2 import Event

import registry
from exporter.config import ExporterSettings
from exporter.ingest.commands import follow_logs, import_into, tail_arguments
from exporter.sources.tensorboard import is_event_file
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig
from rlvitals.evaluate.expected import given, read_expected

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
EXPECTED: dict[str, Any] = yaml.safe_load((RUNS / "expected.yaml").read_text())["runs"]
CHUNKS = 4
"""Pieces a followed file grows by: the follower reads it at 4 different lengths."""


def _event_file(name: str) -> Path:
    (path,) = [p for p in (RUNS / name).iterdir() if p.is_file() and is_event_file(p)]
    return path


def _records(data: bytes) -> list[tuple[int, int | None]]:
    """Each TFRecord of `data` (length u64, its CRC u32, the payload, its CRC u32) as (the
    offset where it ends, the step of its scalars or None): where a trainer's writer leaves
    the file between two flushes, and what it had logged by then."""
    out, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        event = Event.FromString(data[at + 12 : at + 12 + length])
        at += 12 + length + 4
        out.append((at, event.step if event.HasField("summary") else None))
    assert out and out[-1][0] == len(data), "not a whole TFRecord file"
    return out


def _pieces(data: bytes, n: int) -> list[bytes]:
    """`data` cut at record boundaries: first what the trainer wrote by its first logged step
    (a follower started with the training reads the file at that length, before the names
    later updates log), then the rest in `n - 1` pieces of about the same size."""
    records = _records(data)
    first = next(step for _, step in records if step is not None)
    later = next(i for i, (_, step) in enumerate(records) if step is not None and step > first)
    head = records[later - 1][0]
    cuts = [0, head]
    for k in range(1, n - 1):
        want = head + k * (len(data) - head) // (n - 1)
        cuts.append(min((e for e, _ in records if e >= want), default=len(data)))
    cuts.append(len(data))
    return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def _sets(config: dict[str, Any]) -> list[str]:
    return [f"--set={k}={json.dumps(v)}" for k, v in config.items()]


def _follow(
    logdir: Path,
    store: Path,
    file: str,
    pieces: list[bytes],
    reg: registry.Registry,
    sets: list[str],
) -> None:
    """`serve LOGDIR`'s follower over a file that holds the first piece when it starts and
    grows by one piece after each of its polls."""
    target = logdir / file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(pieces[0])
    rest = iter(pieces[1:])
    polls = 0

    def grow(_files: object) -> None:
        nonlocal polls
        polls += 1
        if polls == 1:
            return  # called once before the first pass: the file holds its first piece
        piece = next(rest, None)
        if piece is not None:
            with target.open("ab") as f:
                f.write(piece)

    args = tail_arguments(
        [
            str(logdir),
            "--store",
            str(store),
            "--poll",
            "0.01",
            "--max-polls",
            str(len(pieces) + 1),
            *sets,
        ]
    )
    err = io.StringIO()
    code = follow_logs(args, stop=threading.Event(), err=err, on_poll=grow, reg=reg)
    assert code == 0, err.getvalue()


def _import(
    path: Path, store: Path, run: str, reg: registry.Registry, config: dict[str, Any]
) -> None:
    err = io.StringIO()
    code, _ = import_into(
        [path], settings=ExporterSettings(store=store), reg=reg, run=run, config=config, err=err
    )
    assert code == 0, err.getvalue()


def _served(store: Path, reg: registry.Registry, run: str) -> tuple[dict[str, Any], Any]:
    """What the page shows of `run`: each card whole (status, reading, band, evidence, the
    context it was read in) and the config table."""
    client = create_app(DatasourceConfig(store=store), reg).test_client()
    answer = client.get(f"/api/cards?run={run}")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    cards = {c["metric"]: c for c in answer.get_json()["cards"]}
    info = client.get(f"/api/run?run={run}")
    assert info.status_code == 200, info.get_data(as_text=True)
    return cards, info.get_json()["settings"]


@pytest.fixture(autouse=True)
def _no_influx(monkeypatch: pytest.MonkeyPatch) -> None:
    """The follower reads its settings from the environment: the store given, nothing else."""
    for key in ("RLVITALS_INFLUX_URL", "RLVITALS_PROMETHEUS_PORT"):
        monkeypatch.delenv(key, raising=False)


def _diff(a: Any, b: Any, at: str = "") -> list[str]:
    """Where `a` (followed) and `b` (imported) differ, by path."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted({*a, *b}) for d in _diff(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{at}[{i}]")
        ]
    if isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9):
        return []  # a mean summed in another order (the store's running sums) differs in its last bits
    if a != b:
        return [f"{at}: followed {a!r} != imported {b!r}"]
    return []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_run_followed_as_it_grew_reads_as_the_same_run_imported_whole(
    tmp_path: Path, name: str, builtin: registry.Registry
) -> None:
    reg, config = given(builtin, {}, read_expected(RUNS / "expected.yaml").get(name))
    source = _event_file(name)
    pieces = _pieces(source.read_bytes(), CHUNKS)
    sets = _sets(config)
    checks: list[tuple[str, Path, Path]] = []
    # the middle: followed through half the pieces, against the file cut there imported whole
    half = len(pieces) // 2
    cut = tmp_path / "cut" / name / source.name
    cut.parent.mkdir(parents=True)
    cut.write_bytes(b"".join(pieces[:half]))
    _follow(
        tmp_path / "mid" / "logs" / name,
        tmp_path / "mid" / "followed",
        source.name,
        pieces[:half],
        reg,
        sets,
    )
    _import(cut, tmp_path / "mid" / "imported", name, reg, config)
    checks.append(("the middle", tmp_path / "mid" / "followed", tmp_path / "mid" / "imported"))
    # the end
    _follow(
        tmp_path / "end" / "logs" / name,
        tmp_path / "end" / "followed",
        source.name,
        pieces,
        reg,
        sets,
    )
    _import(source, tmp_path / "end" / "imported", name, reg, config)
    checks.append(("the end", tmp_path / "end" / "followed", tmp_path / "end" / "imported"))
    differ = []
    for where, followed, imported in checks:
        f_cards, f_table = _served(followed, reg, name)
        i_cards, i_table = _served(imported, reg, name)
        differ += [f"{where}: config table{d}" for d in _diff(f_table, i_table)]
        differ += [f"{where}: card {d[1:]}" for d in _diff(f_cards, i_cards)]
    assert not differ, "\n".join(differ)
