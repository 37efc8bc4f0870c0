"""Every command of every docs page is run by a named test, or said here not to be runnable on
these machines, with the reason (the README's are mapped by tests/test_readme_commands.py).

A page's commands are the lines of its `bash` blocks (continuation lines joined, trailing comments
cut off). Each page with commands names the test that runs them in the page's order, in a fresh
folder; that test's module spells every command it runs (and asserts the page's list, so a
command added to a page fails there). A few commands are run by a test of their own elsewhere
(`ELSEWHERE`): the calibration corpus's commands, whose full runs take tens of minutes. A
command added to a page without a test fails `test_every_docs_command_is_run_by_a_test`, and
an entry left behind by a removed command fails it too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_readme_commands import readme_commands

ROOT = Path(__file__).resolve().parents[1]
HOSTS = (
    "RLVITALS_INFLUX_URL=$INFLUX torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d "
    "--rdzv-endpoint $HEAD:29400 --rdzv-id $JOB examples/ranks_train.py"
)
DOCS = ROOT / "docs"
GUIDES = "tests/test_docs_guides.py"

# page -> the test that runs its commands in order, in a fresh folder
PAGES: dict[str, str] = {
    "demo.md": f"{GUIDES}::test_the_demo_page_in_order",
    "runs.md": f"{GUIDES}::test_the_runs_page_in_order",
    "serve.md": f"{GUIDES}::test_the_serve_page_in_order",
    "logs.md": f"{GUIDES}::test_the_logs_page_in_order",
    "registry.md": f"{GUIDES}::test_the_registry_page_in_order",
    "console-logs.md": "tests/test_docs_console_logs.py::test_the_page_commands_do_what_it_says",
    "trackers.md": "tests/test_docs_trackers.py::test_the_page_commands_do_what_it_says",
    "ranks.md": (
        "tests/test_docs_ranks.py::"
        "test_a_torchrun_job_on_one_host_is_one_run_finished_by_all_its_ranks"
    ),
}
# (page, command) -> the test that runs it instead
ELSEWHERE: dict[tuple[str, str], str] = {
    # as written it retrains the 47 committed runs in place (about 41 minutes): the test runs the
    # same script on one run into a scratch folder and compares it with the committed one
    ("evaluate.md", "python calibration/corpus.py"): (
        f"{GUIDES}::test_corpus_script_retrains_a_run_into_the_folder_it_is_given"
    ),
    (
        "evaluate.md",
        "rlvitals evaluate tests/fixtures/runs --expected tests/fixtures/runs/expected.yaml",
    ): "tests/rlvitals/evaluate/test_evaluate_cli.py::test_evaluate_prints_the_table_and_exits_0_when_every_run_is_as_expected",
    (
        "evaluate.md",
        "rlvitals evaluate tests/fixtures/runs --expected tests/fixtures/runs/expected.yaml "
        "--leave-one-family-out",
    ): "tests/rlvitals/evaluate/test_corpus_verdicts.py::test_the_docs_leave_one_family_out_is_what_the_corpus_gives",
    # two hosts: the same test starts the page's line twice against one real InfluxDB
    ("ranks.md", HOSTS): (
        "tests/test_docs_ranks.py::"
        "test_the_multi_host_command_on_two_hosts_is_one_run_of_eight_ranks_in_influxdb"
    ),
    (
        "evaluate.md",
        "rlvitals evaluate tests/fixtures/heldout --expected tests/fixtures/heldout/expected.yaml",
    ): (
        "tests/rlvitals/evaluate/test_heldout_families.py::"
        "test_the_docs_command_prints_the_figure_the_page_reports"
    ),
    ("evaluate.md", "python bench/corpus_vs_rlwatch.py"): (
        "tests/rlvitals/evaluate/test_corpus_verdicts.py::test_the_docs_table_is_what_the_corpus_gives"
    ),
}
NO_DOCKER = "no Docker engine on these machines (docs/compose.md says what is checked instead)"
# (page, command) -> why it is not run here
NOT_RUN: dict[tuple[str, str], str] = {
    ("compose.md", "cp .env.example .env"): NO_DOCKER + ": the .env it starts is compose's",
    ("compose.md", "docker compose up -d"): NO_DOCKER,
    ("compose.md", "xdg-open http://localhost:3000"): NO_DOCKER + ": no Grafana to open",
    ("compose.md", "set -a; . ./.env; set +a"): NO_DOCKER + ": no stack to point a job at",
    (
        "compose.md",
        'export RLVITALS_INFLUX_URL=http://localhost:8086 RLVITALS_INFLUX_DATABASE="$INFLUXDB_DATABASE" '
        'RLVITALS_INFLUX_USERNAME="$INFLUXDB_EXPORTER_USER" '
        'RLVITALS_INFLUX_PASSWORD="$INFLUXDB_EXPORTER_PASSWORD" RLVITALS_PROMETHEUS_PORT=9465 '
        "RLVITALS_PROMETHEUS_HOST=172.17.0.1",
    ): NO_DOCKER + ": no stack to point a job at",
}


def _pages() -> dict[str, list[str]]:
    return {p.name: readme_commands(p) for p in sorted(DOCS.glob("*.md"))}


def _strings(module: Path) -> set[str]:
    """The string constants a test module spells (an f-string's parts are not whole commands:
    the guides build theirs from named constants, so both are collected)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found


def _test_exists(where: str) -> Path:
    path, name = where.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{where} does not exist"
    return ROOT / path


def test_every_docs_command_is_run_by_a_test() -> None:
    pages = _pages()
    unmapped = []
    for page, commands in pages.items():
        for command in commands:
            if (page, command) in NOT_RUN:
                continue
            if (page, command) in ELSEWHERE:
                _test_exists(ELSEWHERE[(page, command)])
                continue
            if page not in PAGES:
                unmapped.append((page, command))
                continue
            _test_exists(PAGES[page])
    assert not unmapped, f"docs commands no test runs (add them to PAGES or ELSEWHERE): {unmapped}"
    stale = [k for k in (*NOT_RUN, *ELSEWHERE) if k[1] not in pages.get(k[0], [])]
    stale += [p for p in PAGES if not pages.get(p)]
    assert not stale, f"entries for commands or pages the docs no longer have: {stale}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_page_test_runs_each_of_the_page_commands(page: str) -> None:
    """The in-order test's module holds each command the page shows (it asserts the page's
    list itself); the guides' commands that embed a shared constant are rebuilt from them."""
    module = _test_exists(PAGES[page])
    spelled = _strings(module)
    source = module.read_text(encoding="utf-8")
    for command in readme_commands(DOCS / page):
        if (page, command) in NOT_RUN or (page, command) in ELSEWHERE:
            continue
        assert command in spelled or _built_from(command, source), (page, command)


def _built_from(command: str, source: str) -> bool:
    """`command` is an f-string of the guides' module made of its constants (`OWN`, `MAPS`,
    `CORPUS_RUNS`): each constant's text is in the command and the rest is spelled."""
    from test_docs_guides import MAPS, OWN
    from test_readme_commands import CORPUS_RUNS

    rest = command
    for name, value in (("MAPS", MAPS), ("OWN", OWN), ("CORPUS_RUNS", CORPUS_RUNS)):
        if value in rest and f"{{{name}}}" in source:
            rest = rest.replace(value, f"{{{name}}}")
    return rest != command and f'f"{rest}"' in source
