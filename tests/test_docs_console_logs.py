"""docs/console-logs.md is true command by command: every line of its `bash` blocks is run, in the
page's order, in a fresh folder (its example writes the console logs the rest reads), and each is
checked against what the page says it does."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from test_readme_commands import _command, _get, _run, _serving

from exporter.store.outbox import Outbox

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "console-logs.md"
_FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)

EXAMPLE = "python examples/console_logs.py logs/"
IMPORT = "rlvitals import logs/"
RUNS = "rlvitals runs"
EVALUATE = "rlvitals evaluate logs/"
TAIL = "rlvitals tail logs/ --no-follow"
SERVE = "rlvitals serve logs/"
CADENCE = (
    "rlvitals import logs/trl-grpo-stdout/stdout.txt --run trl-grpo-cadence --set logging_steps=10"
)
RUN_NAMES = {"verl-grpo", "trl-grpo", "trl-grpo-stdout"}


def page_commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        _command(line)
        for block in _FENCE.findall(text)
        for line in block.splitlines()
        if _command(line)
    ]


def test_the_page_shows_these_commands_in_this_order() -> None:
    # a command added to the page without a check here fails this
    assert page_commands() == [EXAMPLE, IMPORT, RUNS, EVALUATE, TAIL, SERVE, CADENCE]


def _store(workdir: Path) -> Outbox:
    return Outbox(workdir / "rlvitals-data" / "outbox.sqlite")


def test_the_page_commands_do_what_it_says(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    _run(EXAMPLE, tmp_path)

    imported = _run(IMPORT, tmp_path)
    # "verl's printed config (GRPO, groups of 8, clip 0.2, KL coefficient 0.001, max length
    # 1024, 60 planned steps)"
    said = next(x for x in imported.stderr.splitlines() if "run 'verl-grpo'" in x)
    for part in (
        "algorithm=GRPO",
        "group_size=8",
        "clip_epsilon=0.2",
        "kl_coef=0.001",
        "max_length=1024",
        "planned_steps=60",
    ):
        assert part in said, (part, said)

    # "lists verl-grpo, trl-grpo and trl-grpo-stdout, each finished"
    listed = _run(RUNS, tmp_path).stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in listed[1:]}
    assert set(rows) == RUN_NAMES
    assert all(row[3] == "finished" for row in rows.values()), listed
    with _store(tmp_path) as box:
        steps, _ = box.series("trl-grpo", "raw_reward")
        assert steps.tolist() == list(range(10, 130, 10))  # placed by the bar: every 10 steps
        steps, _ = box.series("verl-grpo", "policy_entropy")
        assert steps.tolist() == list(range(1, 61))

    # "verl-grpo is warned at step 41, naming the reward's collapse; the healthy TRL run stays
    # quiet"
    evaluated = _run(EVALUATE, tmp_path).stdout
    table = {
        row.split(" | ")[0].strip("| "): [c.strip() for c in row.split(" | ")]
        for row in evaluated.splitlines()
        if row.startswith("| ") and not row.startswith(("| run ", "| ---"))
    }
    assert set(table) == RUN_NAMES
    assert table["verl-grpo"][4] == "41" and "reward_collapse" in table["verl-grpo"][8]
    assert table["trl-grpo"][4] == "–" and table["trl-grpo"][5] == "–"

    tailed = _run(TAIL, tmp_path)
    assert set(re.findall(r"run '([\w-]+)'", tailed.stdout)) == RUN_NAMES
    # the same runs again, no copies
    assert {x.split()[0] for x in _run(RUNS, tmp_path).stdout.splitlines()[1:]} == RUN_NAMES

    # "A log of the dicts alone (stdout without the bar) needs its cadence"
    cadence = _run(CADENCE, tmp_path)
    assert "logging_steps=10" in cadence.stderr
    with _store(tmp_path) as box:
        steps, _ = box.series("trl-grpo-cadence", "raw_reward")
        assert steps.tolist() == list(range(10, 130, 10))
        record = box.run("trl-grpo-cadence")
        assert record is not None and record.config["step_source"] == "logging order"


def test_serve_follows_the_console_logs(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    _run(EXAMPLE, tmp_path)
    with _serving(SERVE, tmp_path) as base:
        deadline = time.monotonic() + 120
        while True:
            runs = json.loads(_get(base + "/api/runs", "application/json"))["runs"]
            listed = {r["run"] for r in runs}
            if listed >= RUN_NAMES:
                break
            assert time.monotonic() < deadline, f"after 120 s the run list has {sorted(listed)}"
            time.sleep(0.5)
