"""The command line meets the habits people arrive with: `--logdir PATH` as TensorBoard users type
it, every option a message advises is an option of the command that printed it, and logs that
hold no value are said to hold none (exit code not 0 where the command reads once).

The hints are collected from what the commands print on logs made to need them (a JSONL log
without a step key, a text file of no known format, names the registry does not know, a name
two frameworks mean differently, a console log that prints no step, a run name already taken),
not from a list of the messages; `serve` prints the same through its follower
(tests/grafana/test_serve_terminal.py)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from cli_hints import OPTION, hint_logs, options_of

from rlvitals import cli

ROOT = Path(__file__).resolve().parents[2]
READERS = ("import", "tail", "evaluate")


def _said(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out + err


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith("RLVITALS_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    return hint_logs(tmp_path)


@pytest.mark.parametrize("command", READERS)
def test_every_option_a_reading_command_advises_is_one_it_has(
    command: str, logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = {"tail": ["--no-follow"], "evaluate": [], "import": []}[command]
    said = []
    for argv in (
        [command, str(logs), *extra],
        [command, str(logs), *extra],  # again: the names are taken (import: --resume)
        [command, "notes.txt", *extra],
        [command, "notes.txt", "--format", "regex", *extra],
    ):
        said.append(_said(capsys, *argv)[1])
    advised = set(OPTION.findall("\n".join(said)))
    # the logs did make it advise (else this test could not fail); evaluate prints a row per
    # run, not the import's lines about each log
    made = {"--map", "--format", "--pattern"}
    if command != "evaluate":
        made |= {"--step-key", "--framework", "--set"}
    assert made <= advised
    assert advised <= options_of(command), advised - options_of(command)


def test_every_option_the_sources_name_is_an_option_of_some_command() -> None:
    """A message, help text or docstring naming an option that no command has (a renamed flag,
    a typo) is caught here; what the reading commands print is checked above."""
    every = {"--help", "--version"}
    for command in cli.COMMANDS:
        every |= options_of(command)
    # strings that are not rlvitals options: Chromium's flags, CSS custom properties
    not_ours = {
        "grafana/report/png.py": "Chromium's command-line flags",
        "grafana/report/template.py": "CSS custom properties (--bg, --fg, ...)",
        "exporter/job.py": "torchrun's flags (--standalone, --rdzv-id) its launcher reading names",
    }
    unknown = []
    for package in ("registry", "exporter", "grafana", "rlvitals"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel in not_ours:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    unknown += [
                        f"{rel}:{node.lineno}: {o}"
                        for o in OPTION.findall(node.value)
                        if o not in every
                    ]
    assert not unknown, unknown


@pytest.mark.parametrize("command", READERS)
def test_logdir_is_taken_as_a_path(
    command: str, logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--no-follow"] if command == "tail" else []
    store = (lambda name: ["--store", name]) if command != "evaluate" else (lambda name: [])
    run = logs / "own"
    code, by_path = _said(capsys, command, str(run), *extra, *store("a"))
    assert code == 0, by_path
    code, by_flag = _said(capsys, command, "--logdir", str(run), *extra, *store("b"))
    assert code == 0, by_flag
    # the same run read the same way (the store's path aside)
    assert by_flag.replace("/b", "/a") == by_path
    assert "own" in by_path


@pytest.mark.parametrize("command", READERS)
def test_no_path_at_all_is_refused_naming_both_spellings(
    command: str, logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = _said(capsys, command)
    assert code == 2
    assert f"rlvitals {command} PATH" in said and "--logdir PATH" in said


def _header_only(root: Path) -> Path:
    run = root / "empty" / "PPO_1"
    run.mkdir(parents=True)
    (run / "progress.csv").write_text("time/total_timesteps,train/approx_kl,train/entropy_loss\n")
    return root / "empty"


@pytest.mark.parametrize(
    "argv",
    [["import"], ["tail", "--no-follow"], ["evaluate"]],
    ids=["import", "tail", "evaluate"],
)
def test_a_header_only_log_is_said_to_hold_no_value_with_a_failing_exit(
    argv: list[str], logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _header_only(tmp_path)
    code, said = _said(capsys, argv[0], str(folder), *argv[1:])
    assert code != 0
    assert "read no metric values" in said and "hold no step with a value" in said
    # and an import made no run that is not there
    if argv[0] != "evaluate":
        assert "PPO_1" not in _said(capsys, "runs")[1]


@pytest.mark.parametrize("argv", [["import"], ["tail", "--no-follow"], ["evaluate"]])
def test_an_empty_folder_is_said_to_hold_no_logs_with_a_failing_exit(
    argv: list[str], logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nothing").mkdir()
    code, said = _said(capsys, argv[0], "nothing", *argv[1:])
    assert code == 2
    assert "no logs found under nothing" in said or "no training logs in it" in said


def test_a_follower_says_it_waits_for_logs_and_read_none(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # following is waiting: exit 0, but never silent about having nothing
    (tmp_path / "nothing").mkdir()
    code, said = _said(capsys, "tail", "nothing", "--poll", "0.05", "--max-polls", "2")
    assert code == 0
    assert "no logs under nothing yet; looking again every 0.05 s" in said
    assert "read no metric values from nothing" in said
    folder = _header_only(tmp_path)
    code, said = _said(capsys, "tail", str(folder), "--poll", "0.05", "--max-polls", "2")
    assert code == 0
    assert "1 log file(s) hold no step with a value" in said
