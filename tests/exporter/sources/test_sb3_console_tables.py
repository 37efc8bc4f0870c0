"""Stable-Baselines3's console tables (`verbose=1`), read for their metrics (docs/console-logs.md).

The tables are written by SB3's own `HumanOutputFormat`, from real training where it matters:
the expectation is what SB3's `progress.csv` holds for the same dumps (written by the same
logger at the same time), or the values handed to the formatter, never what the reader returns.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from stable_baselines3.common.logger import CSVOutputFormat, HumanOutputFormat, Logger

from exporter import Outbox
from exporter.sources import LineFileSource, Malformed, Record, detect_format
from exporter.sources.console import ConsoleParser, looks_like_console_log
from rlvitals.cli import main

STEP = "time/total_timesteps"


def _table(values: dict[str, object], **kw: int) -> str:
    """One dump as SB3 prints it (`HumanOutputFormat.write`)."""
    out = io.StringIO()
    HumanOutputFormat(out, **kw).write(values, dict.fromkeys(values, None))
    return out.getvalue()


def _read(path: Path) -> tuple[list[Record], list[Malformed], dict[str, object]]:
    problems: list[Malformed] = []
    source = LineFileSource(path, ConsoleParser(), problems.append)
    records = list(source.poll(final=True))
    facts = source.facts()
    source.close()
    return records, problems, facts


def _sb3_run(folder: Path, algorithm: str, steps: int) -> tuple[Path, Path]:
    """A real SB3 training run logging to a console file and progress.csv at once."""
    import gymnasium as gym
    from stable_baselines3 import DQN, PPO

    folder.mkdir(parents=True)
    console = folder / "console.log"
    with open(console, "w") as fh:
        logger = Logger(
            str(folder), [HumanOutputFormat(fh), CSVOutputFormat(str(folder / "progress.csv"))]
        )
        if algorithm == "ppo":
            model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=128, batch_size=64, seed=3)
        else:
            model = DQN(
                "MlpPolicy", gym.make("CartPole-v1"), learning_starts=200, train_freq=4, seed=3
            )
        model.set_logger(logger)
        model.learn(steps, log_interval=4 if algorithm == "dqn" else 1)
        logger.close()
    return console, folder / "progress.csv"


def _csv_rows(path: Path) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            step = int(row.pop(STEP))
            out[step] = {k: float(v) for k, v in row.items() if v != ""}
    return out


@pytest.mark.parametrize("algorithm", ["ppo", "dqn"])
def test_a_real_sb3_run_s_tables_give_the_steps_and_values_of_its_progress_csv(
    tmp_path: Path, algorithm: str
) -> None:
    console, progress = _sb3_run(tmp_path / algorithm, algorithm, 1500)
    expected = _csv_rows(progress)
    records, problems, facts = _read(console)
    assert problems == []
    assert facts["step_source"] == "printed"
    assert [r.step for r in records] == sorted(expected)
    assert len(records) >= 3
    for record in records:
        want = expected[record.step]
        assert set(record.values) == set(want), record.step
        for key, value in want.items():
            got = record.values[key]
            assert isinstance(got, float)
            # a float is printed with 3 significant digits (`:<8.3g`): read what was printed
            assert got == pytest.approx(value, rel=5e-3, abs=1e-12), (record.step, key)


def test_import_finds_an_sb3_console_behind_its_banner_and_stores_it_as_sb3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    console, progress = _sb3_run(tmp_path / "logs" / "cartpole-ppo", "ppo", 1000)
    banner = "Using cpu device\nWrapping the env with a `Monitor` wrapper\n" * 40
    console.write_text(banner + console.read_text())
    progress.unlink()  # the console alone, as a job's redirected stdout
    assert looks_like_console_log(console)
    assert detect_format(console) == "console"
    assert main(["import", str(console.parent)]) == 0
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        record = box.run("cartpole-ppo")
        assert record is not None
        assert record.framework == "sb3"


def test_a_name_sb3_cut_to_fit_its_table_is_named_and_not_read(tmp_path: Path) -> None:
    long = "custom/" + "a_very_long_metric_name_for_this_table_width"
    values = {STEP: 2048, "rollout/ep_rew_mean": 12.5, long: 0.25}
    path = tmp_path / "console.log"
    path.write_text(_table(values))
    records, problems, _ = _read(path)
    assert records == [Record(2048, {"rollout/ep_rew_mean": 12.5})]
    assert len(problems) == 1
    assert "cut this name" in problems[0].reason


def test_nan_inf_a_float32_in_full_and_a_key_without_a_prefix_are_read(tmp_path: Path) -> None:
    import numpy as np

    values: dict[str, object] = {
        STEP: 4096,
        "train/value_loss": math.nan,
        "train/loss": math.inf,
        "train/approx_kl": np.float32(0.0049003074),  # not a float: printed by str, in full
        "zz_custom": 7,  # no prefix: printed unindented after the last prefix's rows
    }
    path = tmp_path / "console.log"
    path.write_text(_table(values))
    records, problems, _ = _read(path)
    assert problems == []
    (record,) = records
    assert record.step == 4096
    got = dict(record.values)
    assert math.isnan(got.pop("train/value_loss"))  # type: ignore[arg-type]
    kl = str(np.float32(0.0049003074))  # float32's shortest digits, as printed
    assert got == {"train/loss": math.inf, "train/approx_kl": float(kl), "zz_custom": 7.0}


def test_a_value_that_is_not_a_number_is_named_and_the_rest_of_the_table_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "console.log"
    path.write_text(_table({STEP: 10, "train/loss": 0.5, "train/note": "warmup"}))
    records, problems, _ = _read(path)
    assert records == [Record(10, {"train/loss": 0.5})]
    assert [p.reason for p in problems] == [
        "in the SB3 table this border closes: train/note='warmup' is not a number"
    ]


def test_tables_among_other_output_progress_bars_and_eval_lines_are_each_read_once(
    tmp_path: Path,
) -> None:
    text = "Using cuda device\n"
    for k in range(1, 4):
        text += f"\r{k * 30}%|###       | {k}/10 [00:01<00:02]\r" + " " * 40 + "\r"
        text += f"Eval num_timesteps={k * 1000}, episode_reward=-{k}.00 +/- 0.50\n"
        text += _table(
            {STEP: k * 1000, "eval/mean_reward": -float(k), "rollout/ep_rew_mean": k / 2}
        )
    path = tmp_path / "console.log"
    path.write_text(text + "Process finished\n")
    records, problems, _ = _read(path)
    assert problems == []
    assert records == [
        Record(k * 1000, {"eval/mean_reward": -float(k), "rollout/ep_rew_mean": k / 2})
        for k in range(1, 4)
    ]


def test_a_table_without_its_step_is_placed_by_its_order(tmp_path: Path) -> None:
    # a custom `logger.dump()` of keys that do not include SB3's step
    path = tmp_path / "console.log"
    path.write_text("".join(_table({"custom/score": float(k)}) for k in range(3)))
    records, problems, facts = _read(path)
    assert problems == []
    assert records == [Record(k + 1, {"custom/score": float(k)}) for k in range(3)]
    assert facts["step_source"] == "logging order"


def test_a_two_column_table_that_is_not_sb3_s_is_ordinary_output(tmp_path: Path) -> None:
    path = tmp_path / "notes.log"
    path.write_text("-" * 20 + "\n| name | value |\n| lr   | 0.1   |\n" + "-" * 20 + "\n")
    assert _read(path) == ([], [], {})
    assert not looks_like_console_log(path)


def test_a_log_cut_inside_a_table_reads_its_rows_with_the_step_and_names_the_cut(
    tmp_path: Path,
) -> None:
    whole = _table({STEP: 512, "rollout/ep_rew_mean": 9.0, "train/loss": 0.5})
    lines = whole.splitlines(keepends=True)
    cut_after_step = "".join(lines[:-3])  # up to time/total_timesteps, then the job was killed
    cut_before_step = "".join(lines[:4])  # the rollout rows only
    for text, expected in [
        (cut_after_step, [Record(512, {"rollout/ep_rew_mean": 9.0})]),
        (cut_before_step, []),
    ]:
        path = tmp_path / "console.log"
        path.write_text(whole + text)
        records, problems, _ = _read(path)
        assert records == [Record(512, {"rollout/ep_rew_mean": 9.0, "train/loss": 0.5}), *expected]
        assert len(problems) == 1
        assert "ends inside an SB3 table" in problems[0].reason


def test_a_table_written_while_it_is_read_is_read_whole_once_its_border_comes(
    tmp_path: Path,
) -> None:
    # a follower polls a growing log: a table half written at one poll is held, not read short
    whole = _table({STEP: 256, "rollout/ep_rew_mean": 3.0, "train/loss": 0.25})
    half = len(whole) // 2
    path = tmp_path / "console.log"
    path.write_text(whole[:half])
    problems: list[Malformed] = []
    source = LineFileSource(path, ConsoleParser(), problems.append)
    assert list(source.poll()) == []
    with open(path, "a") as fh:
        fh.write(whole[half:])
    assert list(source.poll()) == [Record(256, {"rollout/ep_rew_mean": 3.0, "train/loss": 0.25})]
    source.close()
    assert problems == []


def test_a_table_without_its_step_among_tables_that_print_it_is_named_not_placed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "console.log"
    path.write_text(
        _table({STEP: 100, "rollout/ep_rew_mean": 1.0})
        + _table({"custom/score": 5.0})
        + _table({STEP: 200, "rollout/ep_rew_mean": 2.0})
    )
    records, problems, _ = _read(path)
    assert records == [
        Record(100, {"rollout/ep_rew_mean": 1.0}),
        Record(200, {"rollout/ep_rew_mean": 2.0}),
    ]
    assert len(problems) == 1
    assert "without time/total_timesteps" in problems[0].reason


def test_the_entropy_sb3_logs_for_a_17_dimension_gaussian_policy_is_stored_not_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SB3 logs the entropy of the whole action, the sum over its dimensions: a Humanoid-sized
    # Gaussian policy at its initial std of 1 logs 17 x 0.5 ln(2 pi e) = 24.1 nats
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO

    class Reach(gym.Env[np.ndarray, np.ndarray]):
        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (17,), np.float32)

        def reset(self, *, seed: int | None = None, options: dict | None = None):  # type: ignore[no-untyped-def, override]
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(4, np.float32), {}

        def step(self, action):  # type: ignore[no-untyped-def, override]
            self.t += 1
            return np.zeros(4, np.float32), -float(np.square(action).sum()), self.t >= 16, False, {}

    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    folder = tmp_path / "logs" / "humanoid-sized"
    folder.mkdir(parents=True)
    with open(folder / "console.log", "w") as fh:
        model = PPO("MlpPolicy", Reach(), n_steps=64, batch_size=32, n_epochs=1, seed=0)
        model.set_logger(Logger(str(folder), [HumanOutputFormat(fh)]))
        model.learn(128)
    printed = [
        r.values["train/entropy_loss"]
        for r in _read(folder / "console.log")[0]
        if "train/entropy_loss" in r.values
    ]
    assert printed and printed[0] == pytest.approx(
        -17 * 0.5 * math.log(2 * math.pi * math.e), rel=5e-3
    )
    assert main(["import", str(folder)]) == 0
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        assert box.run("humanoid-sized") is not None
        _, stored = box.series("humanoid-sized", "policy_entropy")
    assert stored.tolist() == pytest.approx([-v for v in printed])


def test_a_console_written_with_windows_line_endings_is_found_and_read(tmp_path: Path) -> None:
    # SB3 on Windows (or a paste saved there): every line ends in CR LF
    text = "Using cpu device\n" + "".join(
        _table({STEP: 100 * k, "rollout/ep_rew_mean": float(k)}) for k in (1, 2)
    )
    path = tmp_path / "console.log"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    assert looks_like_console_log(path)
    records, problems, _ = _read(path)
    assert problems == []
    assert records == [Record(100 * k, {"rollout/ep_rew_mean": float(k)}) for k in (1, 2)]


@pytest.mark.parametrize("reset", [True, False])
def test_a_second_learn_call_is_a_run_of_its_own_when_its_steps_start_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reset: bool
) -> None:
    # a script training twice into one console: SB3's `learn()` counts from 0 again by default
    # (a second training: a run of its own), and goes on with reset_num_timesteps=False (a
    # curriculum's next stage: the same run)
    import gymnasium as gym
    from stable_baselines3 import PPO

    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    folder = tmp_path / "logs" / "twice"
    folder.mkdir(parents=True)
    with open(folder / "console.log", "w") as fh:
        logger = Logger(str(folder), [HumanOutputFormat(fh)])
        model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=128, batch_size=64, seed=1)
        model.set_logger(logger)
        model.learn(384)
        print("STAGE 2", file=fh)
        model.learn(384, reset_num_timesteps=reset)
    records, problems, _ = _read(folder / "console.log")
    assert problems == []
    firsts = [128, 256, 384]
    seconds = firsts if reset else [512, 640, 768]
    assert [(r.step, r.part) for r in records] == [
        *((s, 0) for s in firsts),
        *((s, int(reset)) for s in seconds),
    ]
    assert main(["import", str(folder)]) == 0
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        assert box.series("twice", "episodic_return")[0].tolist() == (
            firsts if reset else firsts + seconds
        )
        later = box.run("twice-part2")
        if reset:
            assert later is not None
            assert box.series("twice-part2", "episodic_return")[0].tolist() == seconds
        else:
            assert later is None


def test_a_growing_sb3_console_is_found_once_a_table_appears_and_read_as_it_grows(
    tmp_path: Path,
) -> None:
    # what a follower (`tail`, `serve LOGDIR`) sees of a job's stdout while SB3 trains
    from exporter.sources import LogSet

    problems: list[Malformed] = []
    path = tmp_path / "run" / "stdout.txt"
    path.parent.mkdir()
    path.write_text("Using cpu device\nWrapping the env with a `Monitor` wrapper\n")
    logs = LogSet([tmp_path], problems.append)
    assert [r for _, rs in logs.poll() for r in rs] == []  # a banner: not a log yet
    tables = [_table({STEP: 2048 * k, "rollout/ep_rew_mean": 10.0 * k}) for k in (1, 2, 3)]
    with open(path, "a") as fh:
        fh.write(tables[0] + tables[1][: len(tables[1]) // 2])  # the second being printed
    assert [r.step for _, rs in logs.poll() for r in rs] == [2048]
    with open(path, "a") as fh:
        fh.write(tables[1][len(tables[1]) // 2 :] + tables[2])
    got = [(r.step, dict(r.values)) for _, rs in logs.poll() for r in rs]
    assert got == [(4096, {"rollout/ep_rew_mean": 20.0}), (6144, {"rollout/ep_rew_mean": 30.0})]
    assert problems == []
    logs.close()


def test_endless_table_rows_without_a_border_are_named_once_not_held(tmp_path: Path) -> None:
    # what no SB3 prints: a border, then rows without end (a crafted or broken log): the
    # reader holds a table in memory until its border, so it stops holding one this long
    from exporter.sources.sb3_table import MAX_ROWS

    rows = "".join(f"|    key_{i} | {i} |\n" for i in range(MAX_ROWS + 10))
    path = tmp_path / "console.log"
    path.write_text("-" * 20 + "\n| train/ |  |\n" + rows + _table({STEP: 7, "train/loss": 0.5}))
    records, problems, _ = _read(path)
    assert records == [Record(7, {"train/loss": 0.5})]
    assert len(problems) == 1 and "before a border" in problems[0].reason


def _dumps(*steps: int) -> list[str]:
    """SB3's tables of a few dumps (reward = the step / 512: printed exactly), each as printed."""
    return [_table({STEP: s, "rollout/ep_rew_mean": s / 512, "train/loss": 0.5}) for s in steps]


def _records(*steps: int, part: int = 0) -> list[Record]:
    return [
        Record(s, {"rollout/ep_rew_mean": s / 512, "train/loss": 0.5}, part=part) for s in steps
    ]


def test_a_table_whose_closing_border_is_missing_leaves_the_next_tables_read(
    tmp_path: Path,
) -> None:
    # the next table's opening border closes it; that table's rows then open it (a border is
    # closing or opening only by what comes around it: SB3 prints both alike)
    tables = _dumps(512, 1024, 1536, 2048)
    tables[1] = tables[1].rstrip("\n").rpartition("\n")[0] + "\n"  # its closing border lost
    path = tmp_path / "console.log"
    path.write_text("".join(tables))
    records, problems, _ = _read(path)
    assert problems == []
    assert records == _records(512, 1024, 1536, 2048)


def test_sb3_s_first_table_sharing_a_border_with_the_job_s_own_banner_is_read(
    tmp_path: Path,
) -> None:
    banner = "-" * 20 + "\n| device | cuda |\n| seed   | 1    |\n"  # its border is SB3's
    path = tmp_path / "console.log"
    path.write_text(banner + "".join(_dumps(512, 1024)))
    records, problems, _ = _read(path)
    assert problems == []
    assert records == _records(512, 1024)


def test_a_job_relaunched_after_a_table_cut_while_printed_is_a_second_training(
    tmp_path: Path,
) -> None:
    # killed in the middle of its 1536 table, relaunched from scratch into the same file
    first = _dumps(512, 1024, 1536)
    cut = "".join(first[:2]) + "".join(first[2].splitlines(keepends=True)[:4])
    again = [
        _table({STEP: s, "rollout/ep_rew_mean": -s / 512, "train/loss": 0.5}) for s in (512, 1024)
    ]
    path = tmp_path / "console.log"
    path.write_text(cut + "".join(again))
    records, problems, _ = _read(path)
    assert records == [
        *_records(512, 1024),
        *(
            Record(s, {"rollout/ep_rew_mean": -s / 512, "train/loss": 0.5}, part=1)
            for s in (512, 1024)
        ),
    ]
    assert len(problems) == 1  # the cut table: rows without the step, named
    assert "without time/total_timesteps" in problems[0].reason


def test_tables_whose_lines_end_in_a_lone_carriage_return_are_read(tmp_path: Path) -> None:
    tables = _dumps(512, 1024, 1536)
    tables[1] = tables[1].replace("\n", "\r")  # one table's lines ended by CR alone
    path = tmp_path / "console.log"
    path.write_text("".join(tables))
    records, problems, _ = _read(path)
    assert problems == []
    assert records == _records(512, 1024, 1536)


def test_a_table_s_bad_rows_are_named_at_its_closing_border_saying_so(tmp_path: Path) -> None:
    table = _table({STEP: 256, "rollout/ep_rew_mean": 2.0, "train/loss": 0.5})
    lines = table.splitlines(keepends=True)
    loss = next(i for i, line in enumerate(lines) if "loss" in line)
    lines.insert(loss, lines[loss].replace("0.5", "-  "))  # loss printed twice, first not a number
    lines.insert(loss, lines[loss + 1].replace("0.5", "0.7"))
    path = tmp_path / "console.log"
    path.write_text("".join(lines))
    records, problems, _ = _read(path)
    assert records == [Record(256, {"rollout/ep_rew_mean": 2.0, "train/loss": 0.5})]
    border = len(lines)
    assert [p.line for p in problems] == [border, border]
    assert all("in the SB3 table this border closes" in p.reason for p in problems)
    assert "'-' is not a number" in problems[0].reason
    assert "printed twice" in problems[1].reason and "(0.7)" in problems[1].reason
