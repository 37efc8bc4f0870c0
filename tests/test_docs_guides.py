"""The docs guides are true command by command: each page's `bash` lines are run in the page's
order, in a fresh folder that starts as a fresh clone holds it (`fresh_clone`: nothing made
beforehand), and each is checked against what the page says it does. A page that asks the reader
to save a YAML block before a command (`my_metrics.yaml`, `my_tags.yaml`) is followed the same
way: the block is saved, then the command runs. Each test first asserts the page's commands are
exactly these, in this order, so a command added to a page without a check here fails it
(tests/test_docs_commands.py maps every docs command to its test)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from test_readme_commands import (
    CORPUS_RUNS,
    DEMO_RUNS,
    ROOT,
    _blocks,
    _get,
    _run,
    _runs,
    _serving,
    fresh_clone,
    readme_commands,
)

import registry
from exporter.store.outbox import Outbox

DOCS = ROOT / "docs"


def _store(workdir: Path) -> Outbox:
    return Outbox(workdir / "rlvitals-data" / "outbox.sqlite")


def _listed(base: str) -> set[str]:
    return {r["run"] for r in json.loads(_get(base + "/api/runs", "application/json"))["runs"]}


def _until_listed(base: str, names: set[str]) -> set[str]:
    deadline = time.monotonic() + 120
    while not names <= (listed := _listed(base)):
        assert time.monotonic() < deadline, f"after 120 s the run list has {sorted(listed)}"
        time.sleep(0.5)
    return listed


# -- docs/demo.md ------------------------------------------------------------------------------

DEMO = [
    "rlvitals demo",
    "rlvitals demo --scenario kl_blowup --steps 3000 --seed 1",
    "rlvitals serve",
    "rlvitals report --run demo-reward_hacking --out report.html",
    "rlvitals report --run demo-reward_hacking --lang zh --png report.png",
]


def test_the_demo_page_in_order(tmp_path: Path) -> None:
    assert readme_commands(DOCS / "demo.md") == DEMO
    workdir = fresh_clone(tmp_path)
    done = _run(DEMO[0], workdir)
    # "simulates eight short PPO/GRPO-like training runs ... into the embedded store
    # (./rlvitals-data) ... writes an HTML report per run under rlvitals-data/reports/"
    assert _runs(workdir) == sorted(DEMO_RUNS)
    reports = sorted(p.name for p in (workdir / "rlvitals-data" / "reports").glob("*.html"))
    assert reports == sorted(f"{n}.html" for n in DEMO_RUNS)
    for name in DEMO_RUNS:
        assert re.search(rf"^{re.escape(name)}  \(2,000 steps", done.stdout, re.M), name
    # every scenario's declared flag is met (the page's table); the healthy run expects nothing
    assert done.stdout.count(" OK\n") == len(DEMO_RUNS) - 1
    assert "Where to look:" in done.stdout and "http://127.0.0.1:8686/" in done.stdout

    # "running the demo again into the same store adds -2"
    again = _run(DEMO[1], workdir)
    assert "demo-kl_blowup-2" in _runs(workdir)
    assert re.search(r"^demo-kl_blowup-2  \(3,000 steps", again.stdout, re.M)
    assert "kl_near_trust_region_edge: flagged at step" in again.stdout

    with _serving(DEMO[2], workdir) as base:
        # "the run list; tick a run to open it" (and ?lang=zh for Chinese)
        page = _get(base + "/")
        assert 'class="runs"' in page
        for name in ("demo-healthy", "demo-reward_hacking", "demo-kl_blowup-2"):
            assert f'data-run="{name}"' in page
        assert 'lang="zh"' in _get(base + "/?lang=zh")
        assert "demo-healthy" in _get(base + "/run?run=demo-healthy")

    _run(DEMO[3], workdir)
    html = (workdir / "report.html").read_text(encoding="utf-8")
    # "both languages, with a toggle"; "no request leaves it ... a Content-Security-Policy"
    assert 'lang="en"' in html and 'lang="zh"' in html
    assert "Content-Security-Policy" in html
    assert not re.search(r"""(src|href)=["']https?://""", html)
    entropy = registry.load().metric("policy_entropy")
    assert entropy.title.en in html and entropy.title.zh in html

    _run(DEMO[4], workdir)
    assert (workdir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # "also rlvitals-report-demo-reward_hacking.html (no --out)"
    zh = (workdir / "rlvitals-report-demo-reward_hacking.html").read_text(encoding="utf-8")
    assert 'lang="zh"' in zh


# -- docs/runs.md ------------------------------------------------------------------------------

RUNS = [
    "rlvitals demo --scenario healthy --steps 500",
    "rlvitals runs",
    "rlvitals runs tag demo-healthy baseline lr-3e-4",
    'rlvitals runs note demo-healthy "lr too high after 40k"',
    "rlvitals runs rename demo-healthy demo-healthy-lr3e-4",
    "rlvitals runs --json",
    "rlvitals runs delete demo-healthy-lr3e-4 --yes",
]


def test_the_runs_page_in_order(tmp_path: Path) -> None:
    assert readme_commands(DOCS / "runs.md") == RUNS
    workdir = fresh_clone(tmp_path)
    _run(RUNS[0], workdir)
    assert _runs(workdir) == ["demo-healthy"]
    listed = _run(RUNS[1], workdir).stdout.splitlines()
    assert listed[0].split()[:4] == ["RUN", "PROJECT", "FRAMEWORK", "STATUS"]
    assert listed[1].split()[0] == "demo-healthy"
    for command in RUNS[2:5]:
        _run(command, workdir)
    assert _runs(workdir) == ["demo-healthy-lr3e-4"]
    # "each run's tags and notes too"
    (row,) = json.loads(_run(RUNS[5], workdir).stdout)
    assert row["name"] == "demo-healthy-lr3e-4"
    assert row["tags"] == ["baseline", "lr-3e-4"] and row["notes"] == "lr too high after 40k"
    _run(RUNS[6], workdir)
    assert _runs(workdir) == []


# -- docs/serve.md -----------------------------------------------------------------------------

SERVE = [
    f"cp -r {CORPUS_RUNS} runs/",
    "rlvitals serve --logdir runs/",
    "rlvitals serve",
]


def test_the_serve_page_in_order(tmp_path: Path) -> None:
    assert readme_commands(DOCS / "serve.md") == SERVE
    workdir = fresh_clone(tmp_path)
    _run(SERVE[0], workdir)
    names = {"sb3_ppo_cartpole_healthy", "sb3_ppo_cartpole_lr_high"}
    with _serving(SERVE[1], workdir) as base:
        _until_listed(base, names)
        # "The terminal and the run list name the store (absolute) and the folders"
        page = _get(base + "/")
        assert str(workdir / "rlvitals-data") in page and "runs/" in page
    # "the store alone": what the folder's import stored is served without it
    with _serving(SERVE[2], workdir) as base:
        assert names <= _listed(base)
        assert "sb3_ppo_cartpole_lr_high" in _get(base + "/run?run=sb3_ppo_cartpole_lr_high")


# -- docs/logs.md ------------------------------------------------------------------------------

LOGS = [
    "rlvitals import tests/fixtures/logs/hf_trainer/tiny-gpt2 tests/fixtures/logs/sb3_ppo_json",
    "rlvitals runs",
]


def test_the_logs_page_in_order(tmp_path: Path) -> None:
    assert readme_commands(DOCS / "logs.md") == LOGS
    workdir = fresh_clone(tmp_path)
    imported = _run(LOGS[0], workdir)
    # "prints, per run, the framework it detected from the keys"
    assert "run 'tiny-gpt2'" in imported.stdout and "framework trl" in imported.stdout
    assert "run 'PPO_1'" in imported.stdout and "framework sb3" in imported.stdout
    # "tiny-gpt2 (trl, finished) and PPO_1 (sb3, ended)"
    rows = {r.split()[0]: r.split() for r in _run(LOGS[1], workdir).stdout.splitlines()[1:]}
    assert rows["tiny-gpt2"][2:4] == ["trl", "finished"]
    assert rows["PPO_1"][2:4] == ["sb3", "ended"]


# -- docs/registry.md --------------------------------------------------------------------------

OWN = "runs/own_tags"
MAPS = (
    "--map perf/return_mean10=episodic_return --map policy/entropy=policy_entropy "
    "--map optim/grad_norm=grad_norm"
)
REGISTRY = [
    "rlvitals validate my_metrics.yaml",
    f"cp -r tests/fixtures/runs/custom_ac_cartpole_lr_high {OWN}",
    f"rlvitals evaluate {OWN}",
    f"rlvitals evaluate {OWN} {MAPS}",
    f"rlvitals import {OWN} {MAPS}",
    f"rlvitals evaluate {OWN} --registry my_tags.yaml",
]


def _row(out: str, run: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"| {run} |"))


def test_the_registry_page_in_order(tmp_path: Path) -> None:
    page = DOCS / "registry.md"
    assert readme_commands(page) == REGISTRY
    workdir = fresh_clone(tmp_path)
    yamls = _blocks("yaml", page)
    # "Save this as my_metrics.yaml" (the first YAML block), then validate it
    (workdir / "my_metrics.yaml").write_text(yamls[0])
    done = _run(REGISTRY[0], workdir)
    assert "registry OK" in done.stdout + done.stderr

    _run(REGISTRY[1], workdir)
    # "row: 1 of 7 logged names recognised (policy/entropy as policy_entropy: read by name and
    # value ...); unrecognised: ... (suggestions: `optim/grad_norm` looks like grad_norm ...)"
    plain = _row(_run(REGISTRY[2], workdir).stdout, "own_tags")
    assert (
        "1 of 7 logged names recognised (policy/entropy as policy_entropy: read by name and value"
        in plain
    )
    assert "(suggestions: `optim/grad_norm` looks like grad_norm" in plain
    mapped = _row(_run(REGISTRY[3], workdir).stdout, "own_tags")
    assert "| 3 of 7 logged names recognised" in mapped
    # "`import` stores the values under the metric ids and records the mappings in the run's
    # config (`tag_map`) ... its summary line says "3 of 7 logged names recognised""
    imported = _run(REGISTRY[4], workdir).stdout
    assert "3 of 7 logged names recognised" in imported
    mapping = dict(m.split("=") for m in MAPS.replace("--map ", "").split())
    with _store(workdir) as box:
        steps, _ = box.series("own_tags", "episodic_return")
        assert len(steps) > 100
    from grafana.datasource import DatasourceConfig, create_app

    client = create_app(DatasourceConfig(store=workdir / "rlvitals-data"), registry.load())
    info = client.test_client().get("/api/run?run=own_tags").get_json()
    assert info["config"]["tag_map"] == mapping
    assert info["names"]["text"] == "3 of 7 logged names recognised"

    # "The same mappings in a user registry file ... save this as my_tags.yaml"
    (tags_yaml,) = [y for y in yamls if y.startswith("map:")]
    (workdir / "my_tags.yaml").write_text(tags_yaml)
    by_file = _row(_run(REGISTRY[5], workdir).stdout, "own_tags")
    assert by_file == mapped


# -- docs/evaluate.md: the corpus script (the rest are the corpus tests' commands) -------------


def _scalars(folder: Path) -> dict[str, list[int]]:
    """Tag -> logged steps of the TensorBoard event files under `folder`, read by TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (path,) = folder.rglob("events.out.tfevents.*")
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_corpus_script_retrains_a_run_into_the_folder_it_is_given(tmp_path: Path) -> None:
    # The whole corpus is about 41 minutes of CPU and, as written, retrains the committed runs
    # in place; one of its shortest runs (7 s) is the same script end to end, into a scratch
    # folder instead of the committed one.
    name = "cleanrl_ppo_healthy"
    _run(f"python {ROOT}/calibration/corpus.py --only {name} --out {tmp_path}", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert list(manifest["runs"]) == [name]
    # the same trainer, seeds and length: the same tags at the same steps as the committed run
    assert _scalars(tmp_path / name) == _scalars(ROOT / "tests/fixtures/runs" / name)
