"""The README is true line by line: every command in its `bash` blocks and every `python` block
(the docs pages' too) is run by a test, and each test checks what the README says it does.

`COVERED` maps each README command to the test that runs it; a command added to the README
without one, or an entry left behind by a removed command, fails
`test_every_readme_command_is_run_by_a_test`. The two set-up lines are run verbatim by `.ci/run`
(line 1 in a fresh copy of the tree with a fresh venv); the rest run here, in the order a new
user meets them, in one working directory that starts as a fresh clone holds it (`fresh_clone`:
nothing made beforehand, the embedded store `./rlvitals-data` as for a user with no settings).
The Docker Compose recipe is the one thing not run: there is no Docker engine on these machines
(the README says so; its files are checked by tests/grafana/). The docs pages' commands are
mapped the same way by tests/test_docs_commands.py, with the helpers of this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)


def _blocks(lang: str, doc: Path = README) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    text = re.sub(r"^## Changes\n.*?(?=^## )", "", text, flags=re.S | re.M)
    out = []
    for m in _FENCE.finditer(text):
        if m.group(2) == lang:
            indent = len(m.group(1))
            out.append("\n".join(line[indent:] for line in m.group(3).splitlines()))
    return out


def _command(line: str) -> str:
    """A README line without its trailing `# comment` (a `#` inside quotes is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()


def readme_commands(doc: Path = README) -> list[str]:
    """The commands of `doc`'s bash blocks in reading order (continuation lines joined, trailing
    comments cut off)."""
    commands: list[str] = []
    for block in _blocks("bash", doc):
        joined = re.sub(r"\s*\\\n\s*", " ", block)  # continuation lines are one command
        commands += [_command(line) for line in joined.splitlines() if _command(line)]
    return commands


# Where each README command is run. "here::NAME" is a test of this module; a path names a test
# elsewhere. Only the Docker Compose recipe is exempt (no Docker engine here).
HERE = "tests/test_readme_commands.py"
LINE_1 = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && rlvitals demo"
LINE_2 = (
    ".ci/test-packages && pip install -e '.[test]' && (cd tests/grafana/node && npm ci) "
    "&& python -m pytest -q -n 4"
)
CORPUS_RUNS = (
    "tests/fixtures/runs/sb3_ppo_cartpole_healthy tests/fixtures/runs/sb3_ppo_cartpole_lr_high"
)
COVERED: dict[str, str] = {
    LINE_1: ".ci/run",
    LINE_2: ".ci/run",
    "rlvitals serve": f"{HERE}::test_serve_shows_the_demo_runs_at_the_address_it_names",
    "pip install -e '.[integrations]'": f"{HERE}::test_the_integrations_extra_installs_what_the_example_imports",
    "python examples/sb3_cartpole.py --steps 50000": f"{HERE}::test_the_sb3_example_trains_and_its_report_opens",
    "rlvitals report --run sb3-cartpole --out cartpole.html": f"{HERE}::test_the_sb3_example_trains_and_its_report_opens",
    f"cp -r {CORPUS_RUNS} runs/": f"{HERE}::test_logs_put_under_runs_are_evaluated_and_served",
    "rlvitals evaluate runs/": f"{HERE}::test_logs_put_under_runs_are_evaluated_and_served",
    "rlvitals serve --logdir runs/": f"{HERE}::test_logs_put_under_runs_are_evaluated_and_served",
    "python examples/console_logs.py logs/": f"{HERE}::test_console_logs_are_read_and_evaluated",
    "rlvitals evaluate logs/": f"{HERE}::test_console_logs_are_read_and_evaluated",
    "pip install -e '.[trackers]'": (
        "tests/test_docs_trackers.py::"
        "test_the_trackers_extra_installs_what_the_readers_and_the_example_import"
    ),
    "python examples/tracker_runs.py": f"{HERE}::test_tracker_runs_are_evaluated_under_their_names",
    "rlvitals evaluate wandb/ mlruns/": f"{HERE}::test_tracker_runs_are_evaluated_under_their_names",
}
COMPOSE = {
    "cp .env.example .env",
    "docker compose up -d",
    "xdg-open http://localhost:3000",
}


def test_every_readme_command_is_run_by_a_test() -> None:
    commands = readme_commands()
    missing = [c for c in commands if c not in COVERED and c not in COMPOSE]
    assert not missing, f"README commands no test runs (add them to COVERED): {missing}"
    stale = [c for c in (*COVERED, *COMPOSE) if c not in commands]
    assert not stale, f"COVERED names commands the README no longer has: {stale}"
    # .ci/run takes the README's first two lines and runs them verbatim (see
    # test_ci_runs_the_two_set_up_lines_verbatim)
    assert commands[:2] == [LINE_1, LINE_2]
    for command, where in COVERED.items():
        if where == ".ci/run":
            continue
        path, name = where.split("::")
        source = (ROOT / path).read_text()
        assert f"def {name}(" in source, f"{where} (for {command!r}) does not exist"


# -- the first hour, in order, in one fresh working directory ------------------------------------


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    # the checkout's code, also when pytest runs from another copy of the tree than pip installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(command: str, workdir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`command` as a user types it, in `workdir`, with no RLVITALS_* setting."""
    argv = shlex.split(command)
    if argv[0] == "rlvitals":
        argv = [sys.executable, "-m", "rlvitals", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    done = subprocess.run(
        argv, cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    return done


def fresh_clone(folder: Path) -> Path:
    """`folder` as a fresh clone holds it, for commands run at its root: the repository's
    folders the docs name (read, never written: linked), and `runs/` holding only its README
    (a real folder: the docs put logs there). Nothing else is made beforehand."""
    for name in ("examples", "calibration", "bench", "tests"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    (folder / "runs").mkdir()
    shutil.copy(ROOT / "runs" / "README.md", folder / "runs" / "README.md")
    return folder


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in for a fresh clone: the README's commands run at its root, in order, and
    everything they write lands here, not in the checkout."""
    return fresh_clone(tmp_path_factory.mktemp("new-user"))


def _runs(workdir: Path) -> list[str]:
    from exporter.store.outbox import Outbox

    box = Outbox(workdir / "rlvitals-data" / "outbox.sqlite")
    try:
        return sorted(r.run for r in box.runs())
    finally:
        box.close()


DEMO_RUNS = [
    f"demo-{s}"
    for s in (
        "healthy",
        "entropy_collapse",
        "kl_blowup",
        "nan_loss",
        "reward_hacking",
        "length_hacking",
        "refusal_rise",
        "resume",
    )
]


@pytest.fixture(scope="module")
def demo(workdir: Path) -> subprocess.CompletedProcess[str]:
    """Set-up line 1's last command, as the README's first line leaves the folder (.ci/run runs
    the line itself, install included, in a fresh copy of the tree)."""
    assert LINE_1.endswith("&& rlvitals demo")
    return _run("rlvitals demo", workdir)


def test_the_demo_of_line_1_makes_the_runs_it_describes(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    # "eight simulated PPO/GRPO runs, seven with an injected failure, each diagnosed on one screen"
    assert _runs(workdir) == sorted(DEMO_RUNS)
    for name in DEMO_RUNS:
        assert re.search(rf"^{re.escape(name)}  \(2,000 steps", demo.stdout, re.M), name
    assert demo.stdout.count(" OK\n") == 7  # each injected failure flagged as declared


def test_ci_runs_the_two_set_up_lines_verbatim() -> None:
    """.ci/run takes line 1 and line 2 from the README's first bash block, as this module reads
    them, and runs them with `bash -c`: extracted here with its own awk/sed."""
    ci = (ROOT / ".ci/run").read_text()
    extract = ci.split('SETUP="$(', 1)[1].split(')"\n', 1)[0]
    done = subprocess.run(
        ["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.splitlines() == [LINE_1, LINE_2]
    assert 'bash -eo pipefail -c "$SECOND_LINE"' in ci
    assert 'bash -eo pipefail -c "$FIRST_LINE"' in ci
    # line 2 names the script that installs the Debian packages, and it exists and runs
    script = ROOT / ".ci" / "test-packages"
    assert script.exists() and os.access(script, os.X_OK)
    assert "apt-get install" in script.read_text()


def test_line_1_installs_no_extra() -> None:
    # "installs rlvitals with no extra (numpy, Flask, TensorBoard's reader; no torch)"
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "pip install -e . " in LINE_1
    names = {re.split(r"[=<>\[ ;]", r, maxsplit=1)[0] for r in project["dependencies"]}
    assert {"numpy", "flask", "tensorboard"} <= names
    assert not names & {"torch", "stable-baselines3", "transformers", "trl"}


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # as a server binds it: a port the previous server just closed (TIME_WAIT) is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def _serving(command: str, workdir: Path) -> Iterator[str]:
    """`command` (an `rlvitals serve` line of the README) running in `workdir`; its base URL.
    The commands as written all bind the default port, so the suite's workers (pytest-xdist)
    take turns at it through a lock file: two at once would answer each other's requests."""
    with open(Path(tempfile.gettempdir()) / "rlvitals-tests-port-8686.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with _serving_alone(command, workdir) as base:
                yield base
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _serving_alone(command: str, workdir: Path) -> Iterator[str]:
    # the README's command binds the default port; a test must not take someone else's
    deadline = time.monotonic() + 30  # the last holder's server may still be letting go
    while not _port_free(8686):
        if time.monotonic() > deadline:
            pytest.fail("port 8686 is in use: `rlvitals serve` as written needs it")
        time.sleep(0.2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", *shlex.split(command)[1:]],
        cwd=workdir,
        env=_env(workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = "http://127.0.0.1:8686"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/api/health", timeout=1)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "rlvitals serve did not answer in 60 s"
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def serve(demo: subprocess.CompletedProcess[str], workdir: Path) -> Iterator[str]:
    with _serving("rlvitals serve", workdir) as base:
        yield base


def _get(url: str, accept: str = "text/html") -> str:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept})) as r:
        return str(r.read().decode())


def test_serve_shows_the_demo_runs_at_the_address_it_names(serve: str) -> None:
    # "http://127.0.0.1:8686/: the run list; tick runs to open them"
    page = _get(serve + "/")
    assert 'class="runs"' in page
    for name in DEMO_RUNS:
        assert f'data-run="{name}"' in page
    runs = json.loads(_get(serve + "/api/runs", "application/json"))
    assert "demo-healthy" in json.dumps(runs)
    assert "demo-healthy" in _get(serve + "/run?run=demo-healthy")


def test_the_integrations_extra_installs_what_the_example_imports() -> None:
    # "stable-baselines3, gymnasium, torch (CPU)": the extra names them, and with them installed
    # pip has nothing left to fetch (a dry run, offline, resolving against what is installed)
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["integrations"]
    names = {re.split(r"[=<>\[ ]", r, maxsplit=1)[0] for r in extra}
    assert {"stable-baselines3", "gymnasium", "torch"} <= names
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps"]
        + [r.split(";")[0] for r in extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Would install" not in done.stdout, done.stdout


def test_the_sb3_example_trains_and_its_report_opens(workdir: Path) -> None:
    # The README's 50,000 steps take 2 min 13 s of CPU; 4,096 run the same code through
    # SB3's learn(), the callback and the store, with two logged updates to report.
    done = _run("python examples/sb3_cartpole.py --steps 4096", workdir)
    assert "now: rlvitals report --run sb3-cartpole" in done.stdout
    assert "sb3-cartpole" in _runs(workdir)
    _run("rlvitals report --run sb3-cartpole --out cartpole.html", workdir)
    html = (workdir / "cartpole.html").read_text(encoding="utf-8")
    import registry

    assert registry.load().metric("policy_kl").title.en in html


def test_logs_put_under_runs_are_evaluated_and_served(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    _run(f"cp -r {CORPUS_RUNS} runs/", workdir)
    assert sorted(p.name for p in (workdir / "runs").iterdir()) == [
        "README.md",
        "sb3_ppo_cartpole_healthy",
        "sb3_ppo_cartpole_lr_high",
    ]
    # "`evaluate` flags the second run at step 3,072 and names the failure (`trust_region`)"
    evaluated = _run("rlvitals evaluate runs/", workdir).stdout
    rows = {
        cells[0]: cells
        for line in evaluated.splitlines()
        if (cells := [c.strip() for c in line.strip().strip("|").split("|")])
        and cells[0].startswith("sb3_")
    }
    assert set(rows) == {"sb3_ppo_cartpole_healthy", "sb3_ppo_cartpole_lr_high"}
    header = [c.strip() for c in evaluated.splitlines()[0].strip().strip("|").split("|")]
    bad = dict(zip(header, rows["sb3_ppo_cartpole_lr_high"], strict=True))
    assert bad["first warning"] == "3,072" and bad["names"] == "trust_region"
    assert dict(zip(header, rows["sb3_ppo_cartpole_healthy"], strict=True))["first warning"] == "–"
    # "as tensorboard --logdir: imported, then followed as they grow"
    with _serving("rlvitals serve --logdir runs/", workdir) as base:
        deadline = time.monotonic() + 120
        while True:
            listed = {
                r["run"] for r in json.loads(_get(base + "/api/runs", "application/json"))["runs"]
            }
            if set(rows) <= listed:
                break
            assert time.monotonic() < deadline, f"after 120 s the run list has {sorted(listed)}"
            time.sleep(0.5)
        assert "demo-healthy" in listed  # the store the folder is imported into is ./rlvitals-data
        page = _get(base + "/")
        assert str(workdir / "rlvitals-data") in page  # the page names the store it reads


def _table(out: str) -> dict[str, dict[str, str]]:
    """`rlvitals evaluate`'s Markdown table: run -> column -> cell."""
    lines = [line for line in out.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def test_console_logs_are_read_and_evaluated(workdir: Path) -> None:
    # "verl's and the Trainer's console as they print them"
    _run("python examples/console_logs.py logs/", workdir)
    rows = _table(_run("rlvitals evaluate logs/", workdir).stdout)
    assert {"verl-grpo", "trl-grpo"} <= set(rows)
    # "verl-grpo warned at step 41: its reward collapsed with answers at the length limit"
    verl = rows["verl-grpo"]
    assert verl["first warning"] == "41"
    assert set(verl["names"].split(", ")) == {"reward_collapse", "length_limit"}
    # every name the consoles print is read, none left over as unknown
    for row in rows.values():
        done, total = re.match(r"(\d+) of (\d+) logged names recognised", row["tags"]).groups()
        assert done == total, row


def test_tracker_runs_are_evaluated_under_their_names(workdir: Path) -> None:
    # "one GRPO-shaped run into ./wandb/ and ./mlruns/"
    _run("python examples/tracker_runs.py", workdir)
    assert (workdir / "wandb").is_dir() and (workdir / "mlruns").is_dir()
    # "one row per tracker run, under its own name"
    rows = _table(_run("rlvitals evaluate wandb/ mlruns/", workdir).stdout)
    assert set(rows) == {"grpo-wandb", "grpo-mlflow"}


# -- the Python blocks of the README and the docs ----------------------------------------------

PYTHON_BLOCKS = {
    "README.md": 1,
    "docs/exporter.md": 1,
    "docs/registry.md": 1,
    "docs/compose.md": 1,
    "docs/ranks.md": 1,
}


def test_every_python_block_is_run_here() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    counts = {str(p.relative_to(ROOT)): len(_blocks("python", p)) for p in pages}
    assert {k: v for k, v in counts.items() if v} == PYTHON_BLOCKS, (
        "a Python block was added or removed: give it a check below"
    )


def test_the_python_blocks_run_as_written(tmp_path: Path, monkeypatch: Any) -> None:
    (readme_block,) = _blocks("python")
    (api_block,) = _blocks("python", ROOT / "docs" / "exporter.md")
    (registry_block,) = _blocks("python", ROOT / "docs" / "registry.md")
    (compose_block,) = _blocks("python", ROOT / "docs" / "compose.md")

    import registry

    # the registry block's claims are its comments: "-> policy_entropy, transform negate", ...
    scope: dict[str, Any] = {}
    last = registry_block.strip().splitlines()[-1]
    exec(compile("\n".join(registry_block.splitlines()[:-1]), "registry.md", "exec"), scope)
    reg = scope["reg"]
    got = reg.resolve("train/entropy_loss", framework="sb3")
    assert got.metric == "policy_entropy" and "negate" in repr(got.transform).lower()
    assert reg.resolve("kl", framework="trl").metric == "ref_kl"
    assert reg.resolve("kl", framework="rllib").metric == "policy_kl"
    with pytest.raises(registry.AmbiguousName):
        exec(compile(last, "registry.md", "exec"), scope)

    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RLVITALS_")]:
        monkeypatch.delenv(key)
    # the README's block as written: "stored under ./rlvitals-data"
    exec(compile(readme_block, "README", "exec"), {})
    assert _runs_in(tmp_path / "rlvitals-data") == ["ppo-cartpole-1"]
    from exporter.store.outbox import Outbox

    with Outbox(tmp_path / "rlvitals-data" / "outbox.sqlite") as box:
        steps, values = box.series("ppo-cartpole-1", "policy_entropy")
        # SB3's `train/entropy_loss` is the negated entropy: stored as the entropy
        assert steps.tolist() == list(range(100)) and set(values.tolist()) == {0.6}
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    steps = {"total_steps": 5, "kl": 0.01, "ent_loss": -0.6, "step": 4, "ent": -0.6}
    exec(compile(api_block.replace("...", "pass"), "exporter.md", "exec"), dict(steps))
    exec(compile(compose_block, "compose.md", "exec"), dict(steps))
    assert {"ppo-run-7", "ppo-cartpole-1"} <= set(_runs_in(tmp_path / "store"))
    # the ranks page's loop, its placeholders given values: a single process (no launcher) is
    # rank 0 of a world of one, and logs the training metrics as the comment says
    (ranks_block,) = _blocks("python", ROOT / "docs" / "ranks.md")
    exec(
        compile(ranks_block, "ranks.md", "exec"),
        {"steps": 3, "dt": 0.1, "norm": 1.0, "reward": 0.5},
    )
    assert "grpo-7b" in _runs_in(tmp_path / "store")
    with Outbox(tmp_path / "store" / "outbox.sqlite") as box:
        steps_, values = box.series("grpo-7b", registry.load().resolve("reward").metric)
        assert steps_.tolist() == [0, 1, 2] and set(values.tolist()) == {0.5}


def _runs_in(store: Path) -> list[str]:
    from exporter.store.outbox import Outbox

    box = Outbox(store / "outbox.sqlite")
    try:
        return [r.run for r in box.runs()]
    finally:
        box.close()
