"""CleanRL's console lines, `global_step=N, episodic_return=R` (docs/console-logs.md).

The lines are written as CleanRL's scripts print them (vwxyzjn/cleanrl at fe8d8a03,
`cleanrl/ppo.py`: `print(f"global_step={global_step}, episodic_return={info['episode']['r']}")`,
the return a one-element numpy array from gymnasium's RecordEpisodeStatistics, or a float);
expectations are the returns printed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exporter import Outbox
from exporter.sources import LineFileSource, Malformed, Record
from exporter.sources.console import ConsoleParser, looks_like_console_log
from rlvitals.cli import main


def _line(step: int, ret: object) -> str:
    return f"global_step={step}, episodic_return={ret}"


def _read(path: Path) -> tuple[list[Record], list[Malformed]]:
    problems: list[Malformed] = []
    source = LineFileSource(path, ConsoleParser(), problems.append)
    records = list(source.poll(final=True))
    source.close()
    return records, problems


def test_each_step_holds_the_returns_of_every_episode_that_ended_there(tmp_path: Path) -> None:
    # two envs ending at one step print two lines; the array and the float spellings alike
    episodes = [(128, 22.0), (256, 9.0), (256, 31.0), (384, 40.5)]
    lines = [
        "global_step=0 is not a line of returns",
        *(_line(s, np.array([r], dtype=np.float32)) for s, r in episodes[:2]),
    ]
    lines += [_line(s, float(r)) for s, r in episodes[2:]]
    lines.insert(2, "SPS: 1534")
    path = tmp_path / "console.log"
    path.write_text("\n".join(lines) + "\n")
    assert looks_like_console_log(path)
    records, problems = _read(path)
    assert problems == []
    assert records == [
        Record(128, {"charts/episodic_return": 22.0}),
        Record(256, {"charts/episodic_return": [9.0, 31.0]}),
        Record(384, {"charts/episodic_return": 40.5}),
    ]


def test_a_return_that_is_not_a_number_and_a_line_cut_at_the_end_are_named(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    path.write_text(
        _line(100, 5.0)
        + "\n"
        + _line(200, "[nope]")
        + "\n"
        + _line(300, 7.0)
        + "\n"
        + _line(400, "[12")
    )
    records, problems = _read(path)
    assert records == [
        Record(100, {"charts/episodic_return": 5.0}),
        Record(300, {"charts/episodic_return": 7.0}),
    ]
    assert [p.line for p in problems] == [2, 4]
    assert "not a number" in problems[0].reason
    assert "cut while printed" in problems[1].reason


def _imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> Outbox:
    """The store after `rlvitals import` of a run `cleanrl-ppo` whose stdout printed `lines`."""
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    run = tmp_path / "logs" / "cleanrl-ppo"
    run.mkdir(parents=True)
    (run / "stdout.txt").write_text("\n".join(lines) + "\n")
    assert main(["import", str(run)]) == 0
    return Outbox(tmp_path / "store" / "outbox.sqlite")


def test_a_cleanrl_console_imports_its_returns_under_the_registry_s_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_line(s * 128, np.array([float(s)], dtype=np.float32)) for s in range(1, 30)]
    with _imported(tmp_path, monkeypatch, ["SPS: 900", *lines]) as box:
        steps, values = box.series("cleanrl-ppo", "episodic_return")
        record = box.run("cleanrl-ppo")
    assert steps.tolist() == [s * 128 for s in range(1, 30)]
    assert values.tolist() == [float(s) for s in range(1, 30)]
    # read under the name CleanRL writes it to TensorBoard with: the run is known as CleanRL's
    assert record is not None and record.framework == "cleanrl"


def test_envs_ending_together_after_single_episodes_are_stored_as_that_step_s_spread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one return a step, then two envs ending at one step: the step's field is their mean and
    # the spread measurement holds their count, lowest and highest (exporter/schema.py, SPREAD)
    episodes = [(100, 1.0), (200, 2.0), (300, 3.0), (300, 7.0), (400, 5.0)]
    with _imported(tmp_path, monkeypatch, [_line(s, f"[{r}]") for s, r in episodes]) as box:
        steps, values = box.series("cleanrl-ppo", "episodic_return")
        spread = {
            name: box.series("cleanrl-ppo", f"episodic_return/{name}")[1].tolist()
            for name in ("count", "min", "max")
        }
    assert steps.tolist() == [100, 200, 300, 400]
    assert values.tolist() == [1.0, 2.0, 5.0, 5.0]
    assert spread == {"count": [2.0], "min": [3.0], "max": [7.0]}


def test_lines_that_print_the_length_and_other_pairs_too_give_the_return_and_length(
    tmp_path: Path,
) -> None:
    # many CleanRL scripts and their forks print the length beside the return, some an episode
    # count or an exploration rate too (each writes `charts/episodic_length` to TensorBoard)
    path = tmp_path / "console.log"
    path.write_text(
        "global_step=100, episodic_return=[1.5], episodic_length=[10]\n"
        "global_step=200, episode=3, episodic_return=2.50, episodic_length=20, "
        "exploration_rate=0.1\n"
        "global_step=300, episodic_return=[4.], episodic_length=[oops]\n"
    )
    records, problems = _read(path)
    assert records == [
        Record(100, {"charts/episodic_return": 1.5, "charts/episodic_length": 10.0}),
        Record(200, {"charts/episodic_return": 2.5, "charts/episodic_length": 20.0}),
    ]
    assert [p.line for p in problems] == [3]
    assert "episodic_length is not a number" in problems[0].reason
