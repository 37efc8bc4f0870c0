"""The README is true line by line: every command in its `bash` blocks and every `python` block
is run by a test, and each test checks what the README says the command does.

`COVERED` maps each README command to the test that runs it; a command added to the README
without one, or an entry left behind by a removed command, fails
`test_every_readme_command_is_run_by_a_test`. Most are run here, in the order a new user runs
them, in a fresh working directory (the embedded store is `./rlvitals-data` there, as for a
user with no settings). The Docker Compose recipe is the one thing not run: there is no Docker
engine on these machines (the README says so; its files are checked by tests/grafana/).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)


def _blocks(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
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


def readme_commands() -> list[str]:
    commands: list[str] = []
    for block in _blocks("bash"):
        joined = re.sub(r"\s*\\\n\s*", " ", block)  # continuation lines are one command
        commands += [_command(line) for line in joined.splitlines() if _command(line)]
    return commands


# Where each README command is run. "here::NAME" is a test of this module; a path names a test
# elsewhere. Only the Docker Compose recipe is exempt (no Docker engine here).
HERE = "tests/test_readme_commands.py"
COVERED: dict[str, str] = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && rlvitals demo": ".ci/run",
    "python -m pytest -q": ".ci/run",
    "rlvitals demo": f"{HERE}::test_demo_logs_eight_runs_and_writes_a_report_each",
    "rlvitals demo --scenario kl_blowup --steps 3000 --seed 1": f"{HERE}::test_demo_again_adds_a_numbered_run",
    "rlvitals serve": f"{HERE}::test_serve_shows_the_run_list_at_the_address_it_names",
    "rlvitals serve runs/": f"{HERE}::test_serve_a_log_folder_lists_its_runs_beside_the_store",
    "rlvitals report --run demo-reward_hacking --out report.html": f"{HERE}::test_report_writes_one_self_contained_file_in_both_languages",
    "rlvitals report --run demo-reward_hacking --lang zh --png report.png": f"{HERE}::test_report_png_also_writes_the_html_it_names",
    "pip install -e '.[integrations]'": f"{HERE}::test_the_integrations_extra_installs_what_the_example_imports",
    "python examples/sb3_cartpole.py --steps 50000": f"{HERE}::test_the_sb3_example_trains_and_its_report_opens",
    "rlvitals report --run sb3-cartpole --out cartpole.html": f"{HERE}::test_the_sb3_example_trains_and_its_report_opens",
    "rlvitals validate my_metrics.yaml": "tests/registry/test_validate.py::test_the_readme_template_validates",
    "python calibration/corpus.py": f"{HERE}::test_corpus_script_retrains_a_run_into_the_folder_it_is_given",
    # the same command on two of the folder's runs; every run's verdict, as this command prints
    # it, is held by test_corpus_verdicts.py (the README table test below included)
    "rlvitals evaluate tests/fixtures/runs --expected tests/fixtures/runs/expected.yaml": "tests/rlvitals/evaluate/test_evaluate_cli.py::test_evaluate_prints_the_table_and_exits_0_when_every_run_is_as_expected",
    "rlvitals evaluate runs/own_tags": "tests/rlvitals/test_tag_map.py::test_the_readme_own_tag_names_commands_do_what_it_says",
    "rlvitals evaluate runs/own_tags --map perf/return_mean10=episodic_return --map optim/kl=policy_kl --map policy/entropy_mean=policy_entropy": "tests/rlvitals/test_tag_map.py::test_the_readme_own_tag_names_commands_do_what_it_says",
    "rlvitals import runs/own_tags --map perf/return_mean10=episodic_return --map optim/kl=policy_kl --map policy/entropy_mean=policy_entropy": "tests/rlvitals/test_tag_map.py::test_the_readme_own_tag_names_commands_do_what_it_says",
    "rlvitals evaluate runs/own_tags --registry my_tags.yaml": "tests/rlvitals/test_tag_map.py::test_the_readme_own_tag_names_commands_do_what_it_says",
    "python bench/corpus_vs_rlwatch.py": "tests/rlvitals/evaluate/test_corpus_verdicts.py::test_readme_table_is_what_the_corpus_gives",
    "rlvitals evaluate tests/fixtures/runs --expected tests/fixtures/runs/expected.yaml --leave-one-family-out": "tests/rlvitals/evaluate/test_corpus_verdicts.py::test_readme_leave_one_family_out_is_what_the_corpus_gives",
    "rlvitals runs tag cartpole-ppo baseline lr-3e-4": "tests/rlvitals/test_runs_manage_cli.py::test_the_readme_manage_runs_commands_do_what_it_says",
    'rlvitals runs note cartpole-ppo "lr too high after 40k"': "tests/rlvitals/test_runs_manage_cli.py::test_the_readme_manage_runs_commands_do_what_it_says",
    "rlvitals runs rename cartpole-ppo cartpole-ppo-lr3e-4": "tests/rlvitals/test_runs_manage_cli.py::test_the_readme_manage_runs_commands_do_what_it_says",
    "rlvitals runs delete cartpole-ppo-lr3e-4 --yes": "tests/rlvitals/test_runs_manage_cli.py::test_the_readme_manage_runs_commands_do_what_it_says",
}
COMPOSE = {
    "cp .env.example .env",
    "docker compose up -d",
    "xdg-open http://localhost:3000",
    "set -a; . ./.env; set +a",
    'export RLVITALS_INFLUX_URL=http://localhost:8086 RLVITALS_INFLUX_DATABASE="$INFLUXDB_DATABASE" RLVITALS_INFLUX_USERNAME="$INFLUXDB_EXPORTER_USER" RLVITALS_INFLUX_PASSWORD="$INFLUXDB_EXPORTER_PASSWORD" RLVITALS_PROMETHEUS_PORT=9465 RLVITALS_PROMETHEUS_HOST=172.17.0.1',
}


def test_every_readme_command_is_run_by_a_test() -> None:
    commands = readme_commands()
    missing = [c for c in commands if c not in COVERED and c not in COMPOSE]
    assert not missing, f"README commands no test runs (add them to COVERED): {missing}"
    stale = [c for c in (*COVERED, *COMPOSE) if c not in commands]
    assert not stale, f"COVERED names commands the README no longer has: {stale}"
    ci = (ROOT / ".ci/run").read_text()
    for command, where in COVERED.items():
        if where == ".ci/run":
            # .ci/run takes the README's first line itself and runs the test line verbatim
            assert command == commands[0] or f"\n{command}\n" in ci, command
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


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in for a fresh clone: the README's commands run at its root and name its
    folders by relative paths; everything they write lands here, not in the checkout."""
    folder = tmp_path_factory.mktemp("new-user")
    for name in ("examples", "calibration", "bench", "tests"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    return folder


@pytest.fixture(scope="module")
def demo(workdir: Path) -> subprocess.CompletedProcess[str]:
    return _run("rlvitals demo", workdir)


SCENARIOS = [
    "healthy",
    "entropy_collapse",
    "kl_blowup",
    "nan_loss",
    "reward_hacking",
    "length_hacking",
    "refusal_rise",
    "resume",
]


def _runs(workdir: Path) -> list[str]:
    from exporter.store.outbox import Outbox

    box = Outbox(workdir / "rlvitals-data" / "outbox.sqlite")
    try:
        return sorted(r.run for r in box.runs())
    finally:
        box.close()


def test_demo_logs_eight_runs_and_writes_a_report_each(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    # "simulates eight short PPO/GRPO-like training runs ... into the embedded store
    # (./rlvitals-data) ... writes an HTML report per run under rlvitals-data/reports/"
    names = [f"demo-{s}" for s in SCENARIOS]
    assert _runs(workdir) == sorted(names)
    reports = sorted(p.name for p in (workdir / "rlvitals-data" / "reports").glob("*.html"))
    assert reports == sorted(f"{n}.html" for n in names)
    out = demo.stdout
    # "prints each run's diagnosis on one screen and where to look next"; every scenario's
    # declared flag is met (the README's table)
    for name in names:
        assert re.search(rf"^{re.escape(name)}  \(2,000 steps", out, re.M), name
    assert out.count(" OK\n") == len(SCENARIOS) - 1  # the healthy run expects nothing
    assert "Where to look:" in out and "rlvitals serve" in out
    assert "http://127.0.0.1:8686/" in out


def test_demo_again_adds_a_numbered_run(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    done = _run("rlvitals demo --scenario kl_blowup --steps 3000 --seed 1", workdir)
    # "running the demo again into the same store adds -2"
    assert "demo-kl_blowup-2" in _runs(workdir)
    assert re.search(r"^demo-kl_blowup-2  \(3,000 steps", done.stdout, re.M)
    assert "kl_near_trust_region_edge: flagged at step" in done.stdout


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
    """`command` (an `rlvitals serve` line of the README) running in `workdir`; its base URL."""
    # the README's command binds the default port; a test must not take someone else's
    if not _port_free(8686):
        pytest.fail("port 8686 is in use: `rlvitals serve` as written needs it")
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


def test_serve_shows_the_run_list_at_the_address_it_names(serve: str) -> None:
    # "then http://127.0.0.1:8686/ (the run list; tick a run to open it)"
    page = _get(serve + "/")
    assert 'class="runs"' in page
    for name in ("demo-healthy", "demo-reward_hacking"):
        assert f'data-run="{name}"' in page
    # "(add ?lang=zh for Chinese)"
    assert 'lang="zh"' in _get(serve + "/?lang=zh")
    runs = json.loads(_get(serve + "/api/runs", "application/json"))
    assert "demo-healthy" in json.dumps(runs)
    # the run page of the demo's "where to look"
    assert "demo-healthy" in _get(serve + "/run?run=demo-healthy")


def test_serve_a_log_folder_lists_its_runs_beside_the_store(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    # "a folder of TensorBoard / SB3 / JSONL logs": a real SB3 run's event file, and a JSONL log
    runs = workdir / "runs"
    shutil.copytree(ROOT / "tests/fixtures/runs/sb3_ppo_cartpole_healthy", runs / "ppo-cartpole")
    (runs / "grpo-tiny").mkdir()
    (runs / "grpo-tiny" / "metrics.jsonl").write_text(
        "".join(f'{{"step": {i}, "kl": 0.01, "reward": {i / 10}}}\n' for i in range(20))
    )
    with _serving("rlvitals serve runs/", workdir) as base:
        deadline = time.monotonic() + 120
        while True:
            listed = {
                r["run"] for r in json.loads(_get(base + "/api/runs", "application/json"))["runs"]
            }
            if {"ppo-cartpole", "grpo-tiny"} <= listed:
                break
            assert time.monotonic() < deadline, f"after 120 s the run list has {sorted(listed)}"
            time.sleep(0.5)
        assert "demo-healthy" in listed  # the store the folder is imported into is ./rlvitals-data
        page = _get(base + "/")
        assert 'data-run="ppo-cartpole"' in page and "runs" in page
        assert str(workdir / "rlvitals-data") in page  # the page names the store it reads


def test_report_writes_one_self_contained_file_in_both_languages(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    _run("rlvitals report --run demo-reward_hacking --out report.html", workdir)
    html = (workdir / "report.html").read_text(encoding="utf-8")
    # "both languages, with a toggle"; "no request leaves it ... a Content-Security-Policy"
    assert 'lang="en"' in html and 'lang="zh"' in html
    assert "Content-Security-Policy" in html
    assert not re.search(r"""(src|href)=["']https?://""", html)
    import registry

    reg = registry.load()
    entropy = reg.metric("policy_entropy")
    assert entropy.title.en in html and entropy.title.zh in html


def test_report_png_also_writes_the_html_it_names(
    demo: subprocess.CompletedProcess[str], workdir: Path
) -> None:
    _run("rlvitals report --run demo-reward_hacking --lang zh --png report.png", workdir)
    assert (workdir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # "also rlvitals-report-demo-reward_hacking.html (no --out)"
    html = (workdir / "rlvitals-report-demo-reward_hacking.html").read_text(encoding="utf-8")
    assert 'lang="zh"' in html


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


def _scalars(folder: Path) -> dict[str, list[int]]:
    """Tag -> logged steps of the TensorBoard event files under `folder`, read by TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (path,) = folder.rglob("events.out.tfevents.*")
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_corpus_script_retrains_a_run_into_the_folder_it_is_given(tmp_path: Path) -> None:
    # The whole corpus is about 10 minutes of CPU; one of its shortest runs (7 s) is the same
    # script end to end, into a scratch folder instead of the committed one.
    name = "cleanrl_ppo_healthy"
    _run(f"python {ROOT}/calibration/corpus.py --only {name} --out {tmp_path}", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert list(manifest["runs"]) == [name]
    # the same trainer, seeds and length: the same tags at the same steps as the committed run
    assert _scalars(tmp_path / name) == _scalars(ROOT / "tests/fixtures/runs" / name)


# -- the README's Python blocks ----------------------------------------------------------------


def test_the_readme_python_blocks_run_as_written(tmp_path: Path, monkeypatch: Any) -> None:
    blocks = _blocks("python")
    assert len(blocks) == 3, "a Python block was added or removed: give it a check here"
    registry_block = next(b for b in blocks if "reg = registry.load()" in b)
    api_block = next(b for b in blocks if "with exporter.init(" in b)
    compose_block = next(b for b in blocks if 'exporter.init("ppo-cartpole-1"' in b)

    import registry

    # the registry block's claims are its comments: "-> policy_entropy, transform negate", ...
    scope: dict[str, Any] = {}
    last = registry_block.strip().splitlines()[-1]
    exec(compile("\n".join(registry_block.splitlines()[:-1]), "README", "exec"), scope)
    reg = scope["reg"]
    got = reg.resolve("train/entropy_loss", framework="sb3")
    assert got.metric == "policy_entropy" and "negate" in repr(got.transform).lower()
    assert reg.resolve("kl", framework="trl").metric == "ref_kl"
    assert reg.resolve("kl", framework="rllib").metric == "policy_kl"
    with pytest.raises(registry.AmbiguousName):
        exec(compile(last, "README", "exec"), scope)

    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RLVITALS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    steps = {"total_steps": 5, "kl": 0.01, "ent_loss": -0.6, "step": 4, "ent": -0.6}
    exec(compile(api_block.replace("...", "pass"), "README", "exec"), dict(steps))
    exec(compile(compose_block, "README", "exec"), dict(steps))
    assert {"ppo-run-7", "ppo-cartpole-1"} <= set(_runs_in(tmp_path / "store"))


def _runs_in(store: Path) -> list[str]:
    from exporter.store.outbox import Outbox

    box = Outbox(store / "outbox.sqlite")
    try:
        return [r.run for r in box.runs()]
    finally:
        box.close()
