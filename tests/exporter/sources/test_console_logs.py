"""A trainer's console log, as verl, the Hugging Face Trainer (TRL) and OpenRLHF print it, read for
its metrics: the right steps, names and counts, whatever surrounds them (docs/console-logs.md).

The logs are written the way the trainers write them (consolemakers.py: verl's line format,
Ray's prefix, transformers' own ProgressCallback and tqdm); expectations come from what was
logged, not from what the reader returns."""

from __future__ import annotations

import json
import math
import pprint
from pathlib import Path

import numpy as np
import pytest
from consolemakers import (
    grpo_logs,
    hf_console,
    openrlhf_bar,
    ray,
    ray_block,
    verl_line,
    verl_log,
    verl_metrics,
)
from hypothesis import given
from hypothesis import strategies as st

from exporter import Outbox
from exporter.ingest.log_context import console_context
from exporter.sources import EndMark, LineFileSource, Malformed, Record, detect_format
from exporter.sources.console import ConsoleParser, console_header, looks_like_console_log
from exporter.sources.console_text import strip_ansi
from rlvitals.cli import main


def _read(path: Path) -> tuple[list[Record], list[Malformed], dict[str, object]]:
    problems: list[Malformed] = []
    source = LineFileSource(path, ConsoleParser(), problems.append)
    records = list(source.poll(final=True))
    facts = source.facts()
    source.close()
    return records, problems, facts


def _numbers(metrics: dict[str, object]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if not isinstance(v, bool | str)}  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    return tmp_path / "store" / "outbox.sqlite"


# verl


@pytest.mark.parametrize("style", ["pformat", "3f"])
def test_a_verl_line_behind_a_coloured_ray_prefix_gives_its_step_and_every_number(
    tmp_path: Path, style: str
) -> None:
    path = tmp_path / "train.log"
    path.write_text(verl_log(range(1, 4), style=style))
    records, problems, facts = _read(path)
    assert [r.step for r in records] == [1, 2, 3]
    expected = _numbers(verl_metrics(2))
    got = records[1].values
    assert set(got) == set(expected)
    for key, value in expected.items():
        # the old format prints 3 decimals: read what was printed, nothing more
        tolerance = 5e-4 if style == "3f" else 1e-12
        assert got[key] == pytest.approx(value, abs=tolerance), key
    assert problems == []
    assert facts["step_source"] == "printed"


def test_a_verl_pair_that_is_not_a_number_is_named_and_the_rest_of_the_line_is_read(
    tmp_path: Path,
) -> None:
    line = ray(
        "step:5 - actor/pg_loss:0.25 - actor/entropy:tensor([0.1, 0.2]) - critic/lr(1e-4):0.1"
    )
    path = tmp_path / "train.log"
    path.write_text(line + "\n")
    records, problems, _ = _read(path)
    assert records == [Record(5, {"actor/pg_loss": 0.25, "critic/lr(1e-4)": 0.1})]
    assert len(problems) == 1 and problems[0].line == 1
    assert "actor/entropy" in problems[0].reason


def test_nan_and_inf_as_python_and_numpy_print_them_are_values(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "step:1 - a:nan - b:np.float64(nan) - c:inf - d:-inf - e:np.float32(-inf) - f:np.int64(3)\n"
    )
    (record,), problems, _ = _read(path)
    v = record.values
    assert math.isnan(float(v["a"])) and math.isnan(float(v["b"]))  # type: ignore[arg-type]
    assert v["c"] == math.inf and v["d"] == -math.inf and v["e"] == -math.inf and v["f"] == 3
    assert problems == []


def test_a_line_printed_twice_and_other_output_between_lines_change_nothing(
    tmp_path: Path,
) -> None:
    one, two = (ray(verl_line(s, verl_metrics(s))) for s in (1, 2))
    noise = [
        ray("Saving actor checkpoint to /ckpt/global_step_1", actor="WorkerDict", pid=99),
        "WARNING:2025-01-01 00:00:00,000:some other process",
        ray("{'n': 1, 'logprobs': 1, 'max_tokens': 512, 'temperature': 1.0}", actor="WorkerDict"),
    ]
    path = tmp_path / "train.log"
    path.write_text("\n".join([one, one, *noise, two]) + "\n")
    records, problems, _ = _read(path)
    assert [r.step for r in records] == [1, 2]
    assert problems == []


def test_a_log_cut_in_the_middle_of_a_metric_line_names_that_line_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    text = verl_log(range(1, 3))
    path = tmp_path / "train.log"
    path.write_text(text + ray("step:3 - actor/pg_loss:0.01 - actor/entr"))
    records, problems, _ = _read(path)
    assert [r.step for r in records] == [1, 2]
    assert [(p.line, "middle of this metric line" in p.reason) for p in problems] == [(3, True)]


def test_a_resumed_verl_run_printing_steps_again_stores_the_later_values(
    tmp_path: Path, store: Path
) -> None:
    run = tmp_path / "logs" / "verl-resumed"
    run.mkdir(parents=True)
    first = [ray(verl_line(s, {"actor/pg_loss": 1.0, "actor/entropy": 0.5})) for s in range(1, 6)]
    again = [ray(verl_line(s, {"actor/pg_loss": 2.0, "actor/entropy": 0.5})) for s in range(4, 8)]
    (run / "train.log").write_text(
        "\n".join([*first, "Resuming from global_step_3", *again]) + "\n"
    )
    assert main(["import", str(run.parent)]) == 0
    with Outbox(store) as box:
        steps, values = box.series("verl-resumed", "policy_loss")
    assert steps.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert values.tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("how", ["restarted", "printed again"])
def test_steps_starting_again_are_a_second_training_unless_they_repeat_the_first(
    tmp_path: Path, how: str
) -> None:
    # a job started again from scratch in the same log prints other values from step 1: a run
    # of its own; another rank's buffered copy of the same lines (or a restart that printed
    # the same numbers) is the same training, read once
    first = [
        ray(verl_line(s, {"actor/pg_loss": 1.0 / s, "actor/entropy": 0.5})) for s in range(1, 6)
    ]
    if how == "restarted":
        again = [
            ray(verl_line(s, {"actor/pg_loss": 3.0 / s, "actor/entropy": 0.7})) for s in range(1, 4)
        ]
    else:
        again = first[:3]
    path = tmp_path / "train.log"
    path.write_text("\n".join([*first, "Traceback? no: a new launch", *again]) + "\n")
    records, problems, _ = _read(path)
    assert problems == []
    parts = [(r.step, r.part) for r in records]
    later = 1 if how == "restarted" else 0
    assert parts == [(s, 0) for s in range(1, 6)] + [(s, later) for s in range(1, 4)]


# Hugging Face Trainer / TRL


CLOSING = {
    "train_runtime": 12.5,
    "train_samples_per_second": 3.2,
    "train_steps_per_second": 0.8,
    "train_loss": 0.01,
    "total_flos": 1e12,
}


def test_trainer_dicts_take_their_step_from_the_bar_tqdm_redraws_after_each(
    tmp_path: Path,
) -> None:
    logs = grpo_logs(6, every=10, per_epoch=100)
    path = tmp_path / "out.txt"
    # the loop here is far faster than tqdm's 0.1 s redraw interval: the bar printed before a
    # dict lags behind, the one redrawn after it does not
    path.write_text(hf_console(logs, max_steps=60, closing={**CLOSING, "epoch": 0.6}))
    records, problems, facts = _read(path)
    assert [r.step for r in records[:-1]] == [step for step, _ in logs]
    for record, (_, logged) in zip(records, logs, strict=False):
        for key, value in logged.items():
            # transformers prints every float to 4 significant digits
            assert record.values[key] == pytest.approx(value, rel=5e-4), key
    closing = records[-1]
    assert closing.step == 60 and closing.values["train_runtime"] == 12.5
    assert "total_flos" not in closing.values  # the callback drops it
    assert facts == {"step_source": "progress bar"}
    assert problems == []
    # the closing dict is also the run's normal end (run_end.py), as the console prints it
    source = LineFileSource(path, ConsoleParser(), problems.append, console=True)
    marks = [m for m in source.poll_marked(final=True) if isinstance(m, EndMark)]
    source.close()
    assert [m.kind for m in marks] == ["closing"]


def test_dicts_without_a_bar_are_placed_by_logging_order_and_the_printed_cadence(
    tmp_path: Path,
) -> None:
    logs = grpo_logs(4, every=10)
    body = hf_console(logs, max_steps=40, bar=False)
    path = tmp_path / "out.txt"
    path.write_text("GRPOConfig(output_dir='out', logging_steps=10, beta=0.04)\n" + body)
    records, _, facts = _read(path)
    assert [r.step for r in records] == [10, 20, 30, 40]
    assert facts["step_source"] == "logging order"
    path.write_text(body)  # no cadence printed: steps count logging lines, and say so
    records, _, facts = _read(path)
    assert [r.step for r in records] == [1, 2, 3, 4]
    assert facts["step_source"] == "logging order"


def test_a_later_dict_without_its_redraw_is_placed_by_its_epoch(tmp_path: Path) -> None:
    logs = grpo_logs(5, every=4, per_epoch=40)
    text = hf_console(logs, max_steps=20)
    lines = text.split("\n")
    # stdout (the dicts) flushed in a burst: the last three dicts arrive together at the end,
    # while stderr's bars, clearings and redraws were written as they happened
    dicts = [i for i, line in enumerate(lines) if line.rstrip().endswith("}")]
    burst = []
    for i in dicts[2:]:
        bars, _, text = lines[i].rpartition("\r")
        lines[i] = bars
        burst.append(text)
    path = tmp_path / "out.txt"
    path.write_text("\n".join(lines) + "\n" + "\n".join(burst) + "\n")
    records, _, _ = _read(path)
    assert sorted(r.step for r in records) == [4, 8, 12, 16, 20]


def test_a_dict_the_bar_s_redraws_follow_on_its_line_is_read(tmp_path: Path) -> None:
    # Seen in a real TRL GRPO log (issue 34, round 3): stdout buffered into the file, the
    # dict written without a newline of its own before it, then stderr's bar redraws
    # (`\r 33%|...`) continue on the same line. The dict sits before a carriage return:
    # it must be read like a dict at the end of a line, not dropped.
    logs = grpo_logs(4, every=5, per_epoch=100)
    lines = hf_console(logs, max_steps=20).split("\n")
    dicts = [i for i, line in enumerate(lines) if line.rstrip().endswith("}")]
    assert len(dicts) == 4
    second = dicts[1]
    bars, _, text = lines[second].rpartition("\r")
    # the dict moves to the front of the next line, which holds the bar's later redraws
    lines[second] = bars
    lines[second + 1] = text + "\r" + lines[second + 1]
    path = tmp_path / "out.txt"
    path.write_text("\n".join(lines))
    records, problems, _ = _read(path)
    assert [r.step for r in records] == [5, 10, 15, 20]
    assert records[1].values["reward"] == pytest.approx(logs[1][1]["reward"], rel=5e-4)
    assert problems == []


def test_an_evaluation_dict_belongs_to_the_step_trained_last(tmp_path: Path) -> None:
    logs = grpo_logs(2, every=5)
    evaluation = {"eval_loss": 0.7, "eval_reward": 0.4, "epoch": 0.1}
    path = tmp_path / "out.txt"
    path.write_text(hf_console([*logs, (10, evaluation)], max_steps=10))
    records, _, _ = _read(path)
    assert [(r.step, "eval_loss" in r.values) for r in records] == [
        (5, False),
        (10, False),
        (10, True),
    ]


def test_transformers_4_reprs_and_5_formatted_strings_read_alike(tmp_path: Path) -> None:
    old = "{'loss': 0.0123, 'grad_norm': 0.94921875, 'reward': nan, 'epoch': 0.08}"
    new = "{'loss': '0.0123', 'grad_norm': '0.9492', 'reward': 'nan', 'epoch': '0.08'}"
    path = tmp_path / "out.txt"
    path.write_text(old + "\n" + new + "\n")
    (a, b), problems, _ = _read(path)
    assert a.values["loss"] == b.values["loss"] == 0.0123
    assert math.isnan(float(a.values["reward"])) and math.isnan(float(b.values["reward"]))  # type: ignore[arg-type]
    assert problems == []


def test_dicts_that_are_not_trainer_logs_are_ordinary_output(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text(
        "{'n': 1, 'logprobs': 1, 'max_tokens': 512, 'temperature': 1.0}\n"
        "Final scores: {'accuracy': 0.81}\n"
    )
    assert _read(path)[0] == []
    assert not looks_like_console_log(path)


def test_the_same_dict_from_several_ranks_is_stored_once(tmp_path: Path) -> None:
    line = "{'loss': '0.5', 'reward': '0.1', 'epoch': '0.01'}"
    other = "{'loss': '0.4', 'reward': '0.2', 'epoch': '0.02'}"
    path = tmp_path / "out.txt"
    path.write_text("\n".join(["[rank0]:" + line, "[rank1]:" + line, other, other]) + "\n")
    records, _, _ = _read(path)
    assert [(r.step, r.values["loss"]) for r in records] == [(1, 0.5), (2, 0.4)]


def test_a_trainer_dict_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("{'loss': 0.5, 'reward' 0.1, 'epoch': 0.01}\n")
    records, problems, _ = _read(path)
    assert records == [] and len(problems) == 1 and "could not be read" in problems[0].reason


# OpenRLHF


def test_openrlhf_global_step_lines_give_the_step_and_full_names(tmp_path: Path) -> None:
    lines = [
        "(PPOTrainer pid=11) ppo_trainer.py:547] ✨ Global step 1: "
        "{'policy_loss': 0.1, 'reward': 0.25, 'kl': 0.001, 'response_length': 40.5}",
        "(PPOTrainer pid=11) ppo_trainer.py:547] ✨ Global step 2: "
        "{'policy_loss': 0.2, 'reward': 0.5, 'kl': 0.002, 'response_length': 41.5}",
    ]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    records, problems, _ = _read(path)
    assert [r.step for r in records] == [1, 2]
    assert records[1].values == {
        "policy_loss": 0.2,
        "reward": 0.5,
        "kl": 0.002,
        "response_length": 41.5,
    }
    assert problems == []


def test_openrlhf_training_bar_postfix_is_read_once_per_completed_bar(tmp_path: Path) -> None:
    def bar(n: int, total: int, pg: float) -> str:
        return f"\rTrain epoch [1/1]: {100 * n // total}%|##| {n}/{total} [00:0{n}<00:00, 1.0s/it, pg={pg}, rm=0.5, glen=649, kl=0.001]"

    text = (
        bar(1, 2, -0.1)
        + bar(2, 2, -0.2)
        + "\n"
        + bar(2, 2, -0.2)
        + "\n"
        + bar(1, 2, -0.3)
        + bar(2, 2, -0.4)
        + "\n"
    )
    path = tmp_path / "train.log"
    path.write_text(text)
    records, _, facts = _read(path)
    assert [(r.step, r.values["policy_loss"]) for r in records] == [(1, -0.2), (2, -0.4)]
    assert records[0].values["response_length"] == 649
    assert facts["step_source"] == "logging order"


# OpenRLHF as users published it (docs/console-logs.md, "Real OpenRLHF output read"): the shapes
# of those texts regenerated, not copied.

# the short names of a 2024 actor bar (pg, rm, ...) and a critic's own bar (issue #305)
_ACTOR_V03 = ("pg", "rm", "ret", "glen", "tlen", "kl", "act_lr")


def _ppo_step(step: int) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """One step's mini-batch postfixes of the actor's bar and the critic's, values tqdm prints
    exactly (3 significant digits)."""
    actor = [
        dict(
            zip(
                _ACTOR_V03,
                (-0.25 * step - 0.5 * b, 0.25 * step, 0.5, 649, 900, 0.001, 5e-7),
                strict=True,
            )
        )
        for b in range(3)
    ]
    critic = [{"critic_loss": 0.03 * step + 0.01 * b, "values": 0.42} for b in range(3)]
    return actor, critic


@pytest.mark.parametrize("pasted", [False, True], ids=["as-ray-writes-it", "as-pasted"])
def test_a_critic_s_own_training_bar_adds_to_the_step_it_does_not_count_one(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], pasted: bool
) -> None:
    # issue #305 (2024): the critic's process draws its own `Train epoch [1/1]` bar, its
    # postfix under full names; the actor's bar in another process counts the steps
    blocks = []
    for step in (1, 2):
        actor, critic = _ppo_step(step)
        # the critic's bar closes first in step 1, the actor's in step 2: Ray interleaves them
        bars = [
            ray_block(
                openrlhf_bar("Train epoch [1/1]", critic),
                actor="CriticModelRayActor",
                pid=12,
                pasted=pasted,
            ),
            ray_block(
                openrlhf_bar("Train epoch [1/1]", actor),
                actor="ActorModelRayActor",
                pid=11,
                pasted=pasted,
            ),
        ]
        blocks += bars if step == 1 else bars[::-1]
    run = tmp_path / "logs" / "ppo-critic"
    run.mkdir(parents=True)
    (run / "train.log").write_text("\n".join(blocks) + "\n")
    records, problems, facts = _read(run / "train.log")
    assert [r.step for r in records] == [1, 2]  # a step's two bars are one step
    for step, got in ((r.step, r.values) for r in records):
        actor, critic = _ppo_step(step)
        assert got["policy_loss"] == actor[-1]["pg"] and got["reward"] == actor[-1]["rm"]
        assert got["critic_loss"] == pytest.approx(critic[-1]["critic_loss"])
        assert got["values"] == 0.42 and got["actor_lr"] == 5e-7
    assert problems == [] and facts["step_source"] == "logging order"
    assert main(["import", str(run.parent)]) == 0
    err = capsys.readouterr().err
    # the import says how the steps were counted; a logging cadence has nothing to do with it
    assert "count its completed training bars" in err and "logging_steps" not in err
    with Outbox(store) as box:
        record = box.run("ppo-critic")
        assert record is not None and record.framework == "openrlhf"
        steps, values = box.series("ppo-critic", "value_loss")  # the registry's critic_loss
        assert steps.tolist() == [1, 2] and values.tolist() == pytest.approx([0.05, 0.08])


def test_only_the_last_ppo_epoch_s_bar_completes_a_step(tmp_path: Path) -> None:
    # `--max_epochs 2`: each step draws `Train epoch [1/2]` and `[2/2]`
    lines = []
    for step in (1, 2):
        for epoch in (1, 2):
            postfix = [{"act_loss": step + epoch / 4, "reward": 0.5, "gen_len": 100 * epoch}]
            lines.append(
                ray(openrlhf_bar(f"Train epoch [{epoch}/2]", postfix * 2), actor="PolicyModelActor")
            )
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    records, _, _ = _read(path)
    assert [(r.step, r.values["policy_loss"], r.values["response_length"]) for r in records] == [
        (1, 1.5, 200),
        (2, 2.5, 200),
    ]


def test_global_step_lines_give_the_steps_and_the_training_bars_beside_them_add_none(
    tmp_path: Path,
) -> None:
    # v0.8.1 and later print both; a run resumed from a checkpoint goes on at global step 41
    lines = []
    for step in (41, 42):
        postfix = [{"act_loss": 9.0, "reward": 9.0, "gen_len": 9, "grad_norm": 9.0}] * 2
        lines.append(ray(openrlhf_bar("Train epoch [1/1]", postfix), actor="PolicyModelActor"))
        logged = {"policy_loss": step / 100, "reward": 0.5, "response_length": 640.25}
        lines.append(
            ray(
                f"INFO 12-06 10:00:{step} ppo_trainer.py:547] ✨ Global step {step}: {logged}",
                actor="PPOTrainer",
            )
        )
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    records, problems, facts = _read(path)
    assert [(r.step, r.values) for r in records] == [
        (41, {"policy_loss": 0.41, "reward": 0.5, "response_length": 640.25}),
        (42, {"policy_loss": 0.42, "reward": 0.5, "response_length": 640.25}),
    ]
    assert problems == [] and facts["step_source"] == "printed"


def test_a_global_step_line_that_cannot_be_read_is_named_and_the_others_are_read(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # published runs quote the lines cut (`...}`) or broken over lines
    one = {"reward": 0.25, "policy_loss": -0.01}
    lines = [
        f"✨ Global step 1: {one}",
        "✨ Global step 2: {'reward': 0.5, 'policy_loss': -0.02,",
        "   'kl': 0.0, 'actor_grad_norm': 4.25}",
        "✨ Global step 3: {'reward': 0.75, 'policy_loss': -0.03, ...}",
        f"✨ Global step 4: {one}",
    ]
    run = tmp_path / "logs" / "quoted"
    run.mkdir(parents=True)
    (run / "notes.txt").write_text("\n".join(lines) + "\n")
    records, problems, _ = _read(run / "notes.txt")
    assert [r.step for r in records] == [1, 4]
    assert [p.line for p in problems] == [2, 4]
    assert all("Global step" in p.reason for p in problems)
    assert main(["import", str(run.parent)]) == 0
    assert "notes.txt:2" in capsys.readouterr().err


@pytest.mark.parametrize("prefix", ["(PolicyModelActor pid=7) ", "[rank0]: ", ""])
def test_a_training_bar_quoted_without_its_rate_or_behind_a_prefix_is_read(
    tmp_path: Path, prefix: str
) -> None:
    # quoted bars are often trimmed of the rate (`[00:02<00:02, pg=...]`); a launcher's
    # prefix may sit in front of the description itself
    lines = [
        f"{prefix}Train epoch [1/1]:  50%|#####     | 1/2 [00:02<00:02, pg=-0.125, rm=0.25, glen=104]",
        f"{prefix}Train epoch [1/1]: 100%|##########| 2/2 [00:03<00:00, pg=0.25, rm=0.375, glen=126]",
    ]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    records, problems, _ = _read(path)
    assert records == [Record(1, {"policy_loss": 0.25, "reward": 0.375, "response_length": 126.0})]
    assert problems == []


def test_another_trainer_s_policy_train_epoch_bar_is_not_read_as_openrlhf_s(
    tmp_path: Path,
) -> None:
    # SkyRL draws `Policy Train epoch [1/1]` with a postfix of its own (`pg=0, glen=7988.0,
    # policy_lr=8e-6, ent=0.26`): its names are not OpenRLHF's
    text = openrlhf_bar("Policy Train epoch [1/1]", [{"pg": 0.5, "glen": 7988.0, "ent": 0.25}] * 2)
    path = tmp_path / "train.log"
    path.write_text(text + "\n")
    records, _, _ = _read(path)
    assert records == []
    assert detect_format(path) is None


def test_a_log_cut_before_its_first_training_bar_completed_is_a_console_log(tmp_path: Path) -> None:
    # issue #305 quotes a critic's bar up to 6 of 64 mini-batches
    text = openrlhf_bar("Train epoch [1/1]", [{"critic_loss": 0.0367, "values": 0.42}] * 3)
    cut = text[: text.find("100%")]  # quoted before the bar completed
    path = tmp_path / "job.out"
    path.write_text(cut.replace("\r", "\n") + "\n")
    assert detect_format(path) == "console"
    records, _, _ = _read(path)
    assert records == []


# finding console logs


def test_a_console_log_is_found_by_its_content_past_a_long_banner(tmp_path: Path) -> None:
    path = tmp_path / "run" / "slurm-1234.out"
    path.parent.mkdir()
    banner = "\n".join(f"INFO starting worker {i}" for i in range(3000))
    path.write_text(banner + "\n" + verl_log(range(1, 3)))
    assert detect_format(path) == "console"
    plain = tmp_path / "run" / "notes.txt"
    plain.write_text("nothing to see\nstep: not a metric line\n")
    assert detect_format(plain) is None


def test_a_file_named_directly_that_holds_no_metrics_is_refused_with_a_reason(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.log"
    path.write_text("Loading model...\nDone.\n")
    assert main(["import", str(path)]) != 0
    err = capsys.readouterr().err
    assert "job.log" in err and "no metric line" in err
    # it says whose lines were looked for: every trainer whose console docs/console-logs.md reads
    for trainer in ("verl", "Hugging Face Trainer", "OpenRLHF", "Stable-Baselines3", "CleanRL"):
        assert trainer in err, err


def test_a_stray_nul_byte_near_the_start_does_not_hide_a_console_log(tmp_path: Path) -> None:
    # a crashed write can leave zero bytes in a log; a binary file is still not a console log
    path = tmp_path / "stdout.txt"
    path.write_bytes(b"INFO start\x00\n" + verl_log(range(1, 3)).encode())
    assert detect_format(path) == "console"
    binary = tmp_path / "dump.txt"  # (named as text: found binary by its bytes)
    binary.write_bytes(np.arange(1024, dtype=np.float32).tobytes() + verl_log(range(1, 3)).encode())
    assert detect_format(binary) is None


def test_a_folder_whose_text_files_hold_no_metrics_names_them_and_why(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a verl job with `trainer.logger: ['wandb']` prints its config and progress, no step line
    # (round 3's held-out WALAR log): the folder search says what it read and why it took none
    run = tmp_path / "job"
    run.mkdir()
    (run / "train.log").write_text(
        "{'trainer': {'logger': ['wandb'], 'total_epochs': 1}}\nTraining Progress:   0%|\n"
    )
    (run / "notes.txt").write_text("nothing to see\n")
    assert main(["import", str(run)]) == 2
    err = capsys.readouterr().err
    assert "no logs found under" in err and "2 text file(s)" in err, err
    assert "train.log" in err and "notes.txt" in err and "no metric line" in err, err
    assert "trainer.logger" in err and "Traceback" not in err, err


def test_import_reads_a_verl_log_with_its_framework_names_and_context(
    tmp_path: Path, store: Path
) -> None:
    config = {
        "actor_rollout_ref": {
            "actor": {"clip_ratio": 0.2, "use_kl_loss": True, "kl_loss_coef": 0.001},
            "rollout": {"n": 5, "temperature": 1.0},
        },
        "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
        "data": {"max_response_length": 1024, "train_batch_size": 256},
        "trainer": {"total_training_steps": 3, "logger": ["console"]},
    }
    dump = [ray(line, actor="TaskRunner") for line in pprint.pformat(config).splitlines()]
    run = tmp_path / "logs" / "qwen-grpo"
    run.mkdir(parents=True)
    body = verl_log(range(1, 4))
    end = ray("'Final validation metrics: None'")
    (run / "train.log").write_text("\n".join(dump) + "\n" + body + end + "\n")
    assert main(["import", str(run.parent)]) == 0
    with Outbox(store) as box:
        record = box.run("qwen-grpo")
        assert record is not None and record.framework == "verl"
        cfg = record.config
        assert cfg["algorithm"] == "GRPO" and cfg["group_size"] == 5
        assert cfg["kl_coef"] == 0.001 and cfg["max_length"] == 1024
        assert cfg["clip_epsilon"] == 0.2 and cfg["planned_steps"] == 3
        assert cfg["step_source"] == "printed"
        assert record.state == "finished"
        steps, values = box.series("qwen-grpo", "policy_entropy")
        assert steps.tolist() == [1, 2, 3]
        assert values.tolist() == pytest.approx([0.899, 0.898, 0.897])


def test_the_header_of_a_console_log_gives_the_hf_planned_steps_and_trl_settings(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out.txt"
    path.write_text(
        "***** Running training *****\n"
        "  Num examples = 7,473\n"
        "  Total optimization steps = 1,200\n"
        "GRPOConfig(output_dir='out', num_generations=8, beta=0.04, max_completion_length=256)\n"
        + hf_console(grpo_logs(1), max_steps=1200)
    )
    context = console_context(console_header(path))
    assert context == {
        "planned_steps": 1200,
        "group_size": 8,
        "action_space": "token",
        "kl_coef": 0.04,
        "max_length": 256,
    }


def test_a_verl_config_dump_broken_by_other_output_still_gives_its_named_fields() -> None:
    config = {
        "actor_rollout_ref": {"actor": {"clip_ratio": 0.28}, "rollout": {"n": 8}},
        "algorithm": {"adv_estimator": "gae"},
        "data": {"max_response_length": 512},
    }
    lines = [ray(line, actor="main_task") for line in pprint.pformat(config, width=40).splitlines()]
    lines.insert(2, "WARNING:2024-12-10 06:50:48,698:Zarr-based strategies")
    lines[3] += "(pid=934604) "  # another process's output run into the dump
    lines[-1] = lines[-1][:-1]  # its closing brace went elsewhere
    context = console_context("\n".join(lines))
    assert context["algorithm"] == "PPO" and context["clip_epsilon"] == 0.28
    assert context["max_length"] == 512
    assert "group_size" not in context  # `n` alone says nothing about where it sits


@pytest.mark.parametrize(
    ("batch", "mini", "epochs", "updates"), [(2, 256, 1, 1), (1024, 256, 1, 4), (512, 256, 2, 4)]
)
def test_a_verl_config_gives_the_optimizer_updates_on_each_batch(
    batch: int, mini: int, epochs: int, updates: int
) -> None:
    # dp_actor's update_policy: one step per mini-batch of ppo_mini_batch_size, ppo_epochs times
    config = {
        "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": mini, "ppo_epochs": epochs}},
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"train_batch_size": batch},
    }
    lines = [ray(line, actor="main_task") for line in pprint.pformat(config).splitlines()]
    assert console_context("\n".join(lines))["updates_per_batch"] == updates
    del config["actor_rollout_ref"]["actor"]["ppo_epochs"]  # not printed: not known
    lines = [ray(line, actor="main_task") for line in pprint.pformat(config).splitlines()]
    assert "updates_per_batch" not in console_context("\n".join(lines))


def test_a_verl_log_printing_rounded_values_gives_their_decimals_and_reprs_give_none(
    tmp_path: Path,
) -> None:
    # verl <= 0.4 formats every value with 3 decimals; numpy 2's reprs (v0.5 on) are exact
    rounded = tmp_path / "old.log"
    rounded.write_text(
        "Training Progress: 0%|\n"
        + ray("step:1 - actor/ppo_kl:0.000 - actor/pg_loss:-0.012 - critic/score/mean:0.450")
        + "\n"
    )
    assert console_context(console_header(rounded))["value_decimals"] == 3
    exact = tmp_path / "new.log"
    exact.write_text(
        ray("step:1 - actor/ppo_kl:np.float64(0.0003) - actor/pg_loss:np.float64(-0.0123)") + "\n"
    )
    assert "value_decimals" not in console_context(console_header(exact))


# following


def test_a_growing_console_log_is_found_once_metrics_appear_and_read_as_it_grows(
    tmp_path: Path,
) -> None:
    from exporter.sources import LogSet

    problems: list[Malformed] = []
    path = tmp_path / "run" / "train.log"
    path.parent.mkdir()
    path.write_text("2025-01-01 INFO Started a local Ray instance.\n")
    logs = LogSet([tmp_path], problems.append)
    assert [r for _, rs in logs.poll() for r in rs] == []  # a banner: not a log yet
    with open(path, "a") as fh:
        fh.write(verl_log(range(1, 3)))
        fh.write(ray("step:3 - actor/pg_loss:0.0")[:-3])  # being printed
    assert [r.step for _, rs in logs.poll() for r in rs] == [1, 2]
    with open(path, "a") as fh:
        fh.write("0.0\n" + ray(verl_line(4, verl_metrics(4))) + "\n")
    assert [(r.step, len(r.values)) for _, rs in logs.poll() for r in rs] == [(3, 1), (4, 13)]
    assert problems == []
    logs.close()


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9_/@.\-]{0,20}(\(1e-4\))?", fullmatch=True),
            st.floats(allow_nan=False, width=64),
            st.sampled_from(["repr", "3f", "np64", "np32", "int"]),
        ),
        min_size=1,
        max_size=30,
        unique_by=lambda t: t[0],
    )
)
def test_every_spelling_of_a_verl_value_reads_as_the_number_printed(
    pairs: list[tuple[str, float, str]],
) -> None:
    from exporter.sources.verl_console import parse_verl

    printed, expected = [], {}
    for key, value, style in pairs:
        if style == "3f":
            text = f"{value:.3f}"
        elif style == "np64":
            text = f"np.float64({value!r})"
        elif style == "np32":
            text = f"np.float32({value!r})"
        elif style == "int" and abs(value) < 1e15:
            text = f"np.int64({int(value)})"
        else:
            text = repr(value)
        printed.append(f"{key}:{text}")
        inner = text[text.find("(") + 1 : -1] if text.startswith("np.") else text
        expected[key] = float(inner)
    line = ray(f"step:7 - {' - '.join(printed)}")
    parsed = parse_verl(strip_ansi(line))
    assert parsed is not None and parsed.step == 7
    assert parsed.values == expected and parsed.bad == []


@pytest.mark.parametrize(
    "printed",
    [
        # v0.10 and later: nested namespaces from dotted CLI names (openrlhf/utils/config.py)
        "namespace(actor=namespace(eps_clip=0.2, entropy_coef=None), algo=namespace("
        "advantage=namespace(estimator='group_norm', gamma=1, lambd=1), kl=namespace("
        "estimator='k1', init_coef=0.01, use_loss=False)), rollout=namespace("
        "n_samples_per_prompt=8, max_new_tokens=1024))",
        # before v0.10: argparse's flat Namespace
        "Namespace(advantage_estimator='group_norm', eps_clip=0.2, init_kl_coef=0.01, "
        "n_samples_per_prompt=8, generate_max_len=1024, kl_estimator='k1')",
    ],
)
def test_openrlhf_arguments_printed_at_the_start_give_the_run_context(printed: str) -> None:
    context = console_context(printed + "\n")
    assert context == {
        "algorithm": "GRPO",
        "action_space": "token",
        "group_size": 8,
        "kl_coef": 0.01,
        "clip_epsilon": 0.2,
        "max_length": 1024,
    }


@pytest.mark.parametrize("after", ["grpo", "eval"])
def test_a_second_training_after_a_closing_record_is_a_run_of_its_own(
    tmp_path: Path, store: Path, after: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # one job's console: an SFT phase the Trainer closes (train_runtime), then either a GRPO
    # phase whose steps start again and whose file stops mid-run (published: Radar-Lei/SCU_TSC
    # `.docker_run.log`), or the evaluation a script prints after training, at its last step
    sft = [(k * 5, {"loss": 2.0 / k, "grad_norm": 1.0, "learning_rate": 1e-4, "epoch": k / 20})
           for k in range(1, 9)]  # fmt: skip
    closing = {"train_runtime": 28.8, "train_loss": 0.11, "epoch": 0.4}
    text = hf_console(sft, max_steps=40, closing=closing)
    grpo = grpo_logs(6, every=5)
    if after == "grpo":
        text += hf_console(grpo, max_steps=1400)
    else:
        text += "{'eval_loss': 0.09, 'epoch': 0.4}\n"
    run = tmp_path / "logs" / "sft-then-grpo"
    run.mkdir(parents=True)
    (run / "console.log").write_text(text)
    assert main(["import", str(run)]) == 0
    said = capsys.readouterr().err
    part2 = "run 'sft-then-grpo-part2': framework trl (detected from the keys); a later training"
    assert (part2 in said) == (after == "grpo"), said
    with Outbox(store) as box:
        first = box.run("sft-then-grpo")
        second = box.run("sft-then-grpo-part2")
        # the first training ends with its own closing record, whatever follows it
        assert first is not None and first.state == "finished", first
        assert "closing record" in (first.state_reason or "")
        assert box.series("sft-then-grpo", "grad_norm")[0].tolist() == [k * 5 for k in range(1, 9)]
        if after == "eval":
            assert second is None
            return
        # the second, as its own run: its steps, none of the first's values
        assert second is not None
        assert second.state == "ended", second.state_reason
        steps, norms = box.series("sft-then-grpo-part2", "grad_norm")
        assert steps.tolist() == [step for step, _ in grpo]
        assert norms.tolist() == [logs["grad_norm"] for _, logs in grpo]
        # and the first keeps its own values at the steps both logged
        assert set(box.series("sft-then-grpo", "grad_norm")[1].tolist()) == {1.0}


def test_evaluate_gives_each_training_of_a_console_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sft = [(k * 5, {"loss": 2.0 / k, "grad_norm": 1.0, "learning_rate": 1e-4, "epoch": k / 20})
           for k in range(1, 9)]  # fmt: skip
    text = hf_console(sft, max_steps=40, closing={"train_runtime": 28.8, "epoch": 0.4})
    text += hf_console(grpo_logs(6, every=5), max_steps=1400)
    run = tmp_path / "sft-then-grpo"
    run.mkdir()
    (run / "console.log").write_text(text)
    assert main(["evaluate", str(run), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == ["sft-then-grpo", "sft-then-grpo-part2"]


@pytest.mark.parametrize(("console", "other"), [("a.log", "b.jsonl"), ("b.log", "a.jsonl")])
def test_a_runs_other_log_read_after_its_closing_record_does_not_undo_it(
    tmp_path: Path, store: Path, console: str, other: str
) -> None:
    # the Trainer's console (closed at step 40) and the same run's metrics in a JSON Lines
    # file beside it, in either reading order: the other log's earlier steps are not training
    # that went on after the closing record
    logs = [(k * 5, {"loss": 1.0 / k, "learning_rate": 1e-4, "epoch": k / 8}) for k in range(1, 9)]
    closing = {"train_runtime": 12.0, "train_loss": 0.3, "epoch": 1.0}
    run = tmp_path / "logs" / "two-logs"
    run.mkdir(parents=True)
    (run / console).write_text(hf_console(logs, max_steps=40, closing=closing))
    lines = "".join(f'{{"step": {s}, "train/grad_norm": 0.5}}\n' for s, _ in logs)
    (run / other).write_text(lines)
    assert main(["import", str(run)]) == 0
    with Outbox(store) as box:
        record = box.run("two-logs")
        assert record is not None
        assert record.state == "finished", record.state_reason


_BEYOND = 2**63  # one past the largest step the store keeps (exporter/schema.py, MAX_STEP)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (f"step:{_BEYOND} - actor/entropy:0.5 - critic/score/mean:0.4", "largest storable step"),
        ("step:-3 - actor/entropy:0.5 - critic/score/mean:0.4", "'-3', not a step"),
        ("step:2.5 - actor/entropy:0.5 - critic/score/mean:0.4", "'2.5', not a step"),
        ("{'loss': 0.1, 'reward': 0.5, 'epoch': 0.1, 'step': 1e30}", "largest storable step"),
        ("{'loss': 0.1, 'reward': 0.5, 'epoch': 0.1, 'step': -5}", "'step' is -5.0, not a step"),
        (f"✨ Global step {_BEYOND}: {{'reward': 0.5}}", "largest storable step"),
        (f"global_step={_BEYOND}, episodic_return=[3.]", "largest storable step"),
        ("global_step=-400, episodic_return=[3.]", "'-400', not a step"),
        ("global_step=abc, episodic_return=[3.]", "'abc', not a step"),
        ("global_step=400.0, episodic_return=[3.]", "'400.0', not a step"),
    ],
)
def test_a_metric_line_at_no_storable_step_is_named_and_the_others_are_stored(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    # the same format's good lines around it, so the log is that format's (docs/console-logs.md:
    # a line that looks like metrics but cannot be read is named, never dropped unsaid)
    if line.startswith("step:"):
        good = [verl_line(s, {"actor/entropy": 0.5}) for s in (1, 2)]
    elif line.startswith("{"):
        good = [str({"loss": 0.1, "reward": 0.5, "epoch": 0.1, "step": s}) for s in (1, 2)]
    elif "Global" in line:
        good = [f"✨ Global step {s}: {{'reward': 0.5}}" for s in (1, 2)]
    else:
        good = [f"global_step={s}, episodic_return=[1.]" for s in (1, 2)]
    run = tmp_path / "logs" / "odd-step"
    run.mkdir(parents=True)
    (run / "out.log").write_text("\n".join([good[0], line, good[1]]) + "\n")
    assert main(["import", str(run)]) == 0
    err = capsys.readouterr().err
    assert "out.log:2:" in err and said in err, err
    with Outbox(store) as box:
        assert box.fields("odd-step") and box.last_step("odd-step") == 2
