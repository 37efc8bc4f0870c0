"""`rlvitals import` / `rlvitals tail` end to end: real logs into a real InfluxDB 1.x, landing
under canonical ids with one point per step."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from logmakers import Sb3Csv, cleanrl_stdout, sb3_rows, write_event_file

from exporter.store.outbox import Outbox
from rlvitals.cli import main

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")


@pytest.fixture
def env(influx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RLVITALS_INFLUX_URL", influx.url)
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", influx.name)
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("RLVITALS_POLICY", "warn")
    return influx


def test_import_of_a_run_directory_lands_under_canonical_ids(
    env: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    write_event_file(
        logs / "CartPole__ppo__1",
        [
            (s, {"losses/approx_kl": s / 1e4, "losses/clipfrac": 0.2, "charts/SPS": 900.0})
            for s in range(0, 2048, 512)
        ],
    )
    (logs / "PPO_1").mkdir(parents=True)
    writer = Sb3Csv(logs / "PPO_1" / "progress.csv")
    for row in sb3_rows(3):
        writer.write(row)
    writer.close()
    (logs / "grpo").mkdir()
    (logs / "grpo" / "metrics.jsonl").write_text(
        '{"step": 1, "reward": 0.5, "rewards/format/mean": 1.0}\n'
        "this line is broken\n"
        '{"step": 2, "reward": 0.75, "rewards/format/mean": 0.0}\n'
    )
    assert main(["import", str(logs), "--registry", MINI]) == 0
    err = capsys.readouterr().err
    assert f"{logs / 'grpo' / 'metrics.jsonl'}:2" in err  # malformed line reported with file:line
    assert "framework cleanrl (detected from the keys)" in err
    assert "framework sb3 (detected from the keys)" in err

    kl = env.query('SELECT "policy_kl", "step" FROM "policy" WHERE "run" = \'CartPole__ppo__1\'')
    assert [(r["time"], r["step"], r["policy_kl"]) for r in kl] == [
        (0, 0, 0.0),
        (512, 512, pytest.approx(0.0512)),
        (1024, 1024, pytest.approx(0.1024)),
        (1536, 1536, pytest.approx(0.1536)),
    ]
    entropy = env.query('SELECT "policy_entropy" FROM "policy" WHERE "run" = \'PPO_1\'')
    assert [(r["time"], r["policy_entropy"]) for r in entropy] == [
        (4096, pytest.approx(0.68)),  # SB3's train/entropy_loss negated
        (6144, pytest.approx(0.67)),
    ]
    rewards = env.query(
        'SELECT "raw_reward", "reward_component/format" FROM "reward" WHERE "run" = \'grpo\''
    )
    assert [(r["time"], r["raw_reward"], r["reward_component/format"]) for r in rewards] == [
        (1, 0.5, 1.0),
        (2, 0.75, 0.0),
    ]


def test_import_of_a_text_log_with_a_pattern_and_a_named_run(env: Any, tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_text(cleanrl_stdout(4))
    pattern = r"global_step=(?P<step>\d+), episodic_return=\[(?P<charts__episodic_return>[-\d.]+)\]"
    code = main(
        [
            "import",
            str(log),
            "--pattern",
            pattern,
            "--run",
            "cli-run",
            "--project",
            "demo",
            "--registry",
            MINI,
        ]
    )
    assert code == 0
    rows = env.query(
        'SELECT "raw_reward" FROM "reward" WHERE "run" = \'cli-run\' AND "project" = \'demo\''
    )
    assert [(r["time"], r["raw_reward"]) for r in rows] == [
        (128, 10.0),
        (256, 11.0),
        (384, 12.0),
        (512, 13.0),
    ]


def test_tail_picks_up_a_resumed_runs_new_event_file(env: Any, tmp_path: Path) -> None:
    run_dir = tmp_path / "PPO_2"
    write_event_file(run_dir, [(s, {"train/approx_kl": 0.01}) for s in (100, 200, 300)])
    args = ["tail", str(tmp_path), "--registry", MINI, "--poll", "0.1", "--max-polls", "20"]
    result: list[int] = []
    sidecar = threading.Thread(target=lambda: result.append(main(args)))
    sidecar.start()
    time.sleep(0.5)  # the sidecar is following; the run resumes from its step-200 checkpoint
    write_event_file(
        run_dir, [(s, {"train/approx_kl": 0.02}) for s in (200, 300, 400)], wall_time=1.8e9
    )
    sidecar.join(60)  # it stops by itself after 20 polls
    assert result == [0]
    rows = env.query('SELECT "policy_kl" FROM "policy" WHERE "run" = \'PPO_2\'')
    assert [(r["time"], r["policy_kl"]) for r in rows] == [
        (100, pytest.approx(0.01)),
        (200, pytest.approx(0.02)),
        (300, pytest.approx(0.02)),
        (400, pytest.approx(0.02)),
    ]
    events = env.query(
        'SELECT "text" FROM "events" WHERE "run" = \'PPO_2\' AND "kind" = \'resume\''
    )
    assert [r["time"] for r in events] == [200]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "/no/such/dir"], "no such file or directory"),
        (["import", ".", "--pattern", "(?P<step"], "not a valid regular expression"),
        (["import", ".", "--format", "regex"], "needs --pattern"),
        (["tail", ".", "--poll", "0"], "--poll"),
    ],
)
def test_bad_input_gives_one_line_and_exit_code_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--registry", MINI]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_file_of_unknown_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"\x00\x01\x02")
    assert main(["import", str(path), "--registry", MINI]) == 2
    assert "--format" in capsys.readouterr().err


def _rollup(row: dict[str, Any]) -> bool:
    return str(row["_measurement"]).startswith("rlvitals_rollup_")


def test_direct_import_and_import_via_the_outbox_store_the_same_points(
    env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Everything the translation does on the way: both KL keys of CleanRL, an unknown key,
    # a NaN, a value outside its limits, derived metrics, and steps going back (a resume).
    def values(step: int) -> dict[str, float]:
        out = {
            "losses/approx_kl": 0.01 + step / 1e5,
            "losses/old_approx_kl": 0.02,
            "losses/clipfrac": 1.5 if step == 20 else 0.1 + (step % 7) / 100,
            "losses/entropy": 0.69 - step / 1e4,
            "losses/value_loss": math.nan if step == 10 else 0.5 / (1 + step),
            "charts/episodic_return": 100.0 + step,
            "charts/episodic_length": 200.0,
            "custom/thing": step * 0.5,
        }
        return out

    steps = [*range(0, 120), *range(90, 130)]
    write_event_file(tmp_path / "logs" / "run_a", [(s, values(s)) for s in steps])
    assert main(["import", str(tmp_path / "logs")]) == 0
    outbox_db = f"{env.name}_outbox"
    env.server.post_query(f'CREATE DATABASE "{outbox_db}"')
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", outbox_db)
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store_outbox"))
    assert main(["import", str(tmp_path / "logs"), "--via-outbox"]) == 0

    query = "SELECT * FROM /.*/ GROUP BY *"
    direct = env.query(query)
    via_outbox = env.server.query(outbox_db, query)
    key = lambda row: (row["_measurement"], row["time"], json.dumps(row, sort_keys=True))  # noqa: E731
    # the run_config point (the run context the import read) carries the wall time of each import
    for row in (*direct, *via_outbox):
        if row["_measurement"] == "run_config":
            row["wall_time"] = None
    raw = [[r for r in rows if not _rollup(r)] for rows in (direct, via_outbox)]
    assert sorted(raw[0], key=key) == sorted(raw[1], key=key)
    # the rollups' sums are added in another order on each path (numpy, or InfluxDB's `sum()`)
    rolled = [
        {(r["_measurement"], r["time"]): r for r in rows if _rollup(r)}
        for rows in (direct, via_outbox)
    ]
    assert rolled[0].keys() == rolled[1].keys()
    for where, row in rolled[0].items():
        assert row == pytest.approx(rolled[1][where], rel=1e-12), where
    measurements = {r["_measurement"] for r in direct}
    assert {"policy", "value", "unregistered", "events", "health"} <= measurements
    kinds = {r["kind"] for r in direct if r["_measurement"] == "events"}
    assert {"resume", "health"} <= kinds
    kl = {r["time"]: r["policy_kl"] for r in direct if r.get("policy_kl") is not None}
    assert kl[5] == pytest.approx(0.01005)  # k3 (approx_kl), as the registry prefers


def test_direct_import_sends_spread_and_transforms_to_influxdb(env: Any, tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = tmp_path / "logs" / "CartPole__ppo__1"
    writer = EventFileWriter(str(folder))
    for step, tag, value in [
        (512, "charts/episodic_return", 9.0),
        (512, "charts/episodic_return", 15.0),
        (512, "losses/value_loss", 2.0),
        (1024, "charts/episodic_return", 4.0),
    ]:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=1.7e9 + step, step=step, summary=summary))
    writer.close()
    sb3 = tmp_path / "sb3" / "PPO_1"
    sb3.mkdir(parents=True)
    (sb3 / "progress.json").write_text(
        '{"time/total_timesteps": 64, "train/value_loss": 8.0, "train/approx_kl": 0.01}\n'
    )
    assert main(["import", str(tmp_path / "logs"), str(tmp_path / "sb3")]) == 0
    (spread,) = env.query('SELECT * FROM "spread" WHERE "run" = \'CartPole__ppo__1\'')
    assert spread["time"] == 512
    assert (
        spread["episodic_return/count"],
        spread["episodic_return/min"],
        spread["episodic_return/max"],
    ) == (
        2,
        9,
        15,
    )
    means = env.query('SELECT "episodic_return" FROM "reward" WHERE "run" = \'CartPole__ppo__1\'')
    assert [r["episodic_return"] for r in means] == [12, 4]
    (config,) = env.query('SELECT "transforms_json" FROM "run_config" WHERE "run" = \'PPO_1\'')
    assert json.loads(config["transforms_json"])["value_loss"] == [
        {"factor": 0.5, "framework": "sb3", "kind": "scale", "name": "train/value_loss"}
    ]


def test_a_direct_import_of_an_event_file_writes_every_line_but_the_refused_one(
    env: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # steps read as columns (an event file's blocks) isolate a refused line as rows do
    url = f"{env.url}/write?db={env.name}&precision=s"
    body = b'unregistered,run=earlier my_thing="text" 50'
    with urllib.request.urlopen(urllib.request.Request(url, data=body)) as r:
        assert r.status == 204
    steps = [(s, {"losses/clipfrac": 0.25, "losses/entropy": 0.5}) for s in range(300)]
    steps[250][1]["my_thing"] = 1.0
    write_event_file(tmp_path / "logs" / "run1", steps)
    code = main(["import", str(tmp_path / "logs"), "--framework", "cleanrl"])
    out, err = capsys.readouterr()
    points = env.query('SELECT "clip_fraction" FROM "policy" WHERE "run" = \'run1\'')
    assert [p["time"] for p in points] == list(range(300))
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        (refused,) = box.rejected("run1")
    assert "my_thing=1" in refused[1] and "field type conflict" in refused[2]
    assert "refused by InfluxDB 1" in out
    assert code == 1 and "not stored" in err
