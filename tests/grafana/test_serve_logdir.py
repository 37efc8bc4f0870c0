"""`rlvitals serve [LOGDIR...]` beyond the browser (docs/serve.md): the run list names
the absolute store it read, also without LOGDIR and when that store is empty; the log follower
never fails silently (its failure is said on stderr, in `/api/health` and on the page, and it
starts again, going on once the folder is back); a LOGDIR that does not exist is refused by
name (exit 2, no traceback); `--registry DIR` is the registry served. Real files, the real tail
loop, the real app."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from logdir_serve import ROLLOUT, Sb3Writer, Served

import registry
from exporter.ingest.background import Follower
from exporter.store import Outbox
from grafana.datasource import DatasourceConfig, create_app
from grafana.live import UI

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
HTML = {"Accept": "text/html"}


def _until(what: str, ok: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (ok() if callable(ok) else ok):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _last_step(store: Path, run: str) -> int | None:
    with Outbox(store / "outbox.sqlite") as box:
        return box.last_step(run)


def test_run_list_of_an_empty_store_names_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builtin: registry.Registry
) -> None:
    # serve's default store is relative to where it was started (./rlvitals-data)
    monkeypatch.chdir(tmp_path)
    app = create_app(DatasourceConfig(store=Path("rlvitals-data")), builtin)
    page = app.test_client().get("/", headers=HTML).get_data(as_text=True)
    where = str(tmp_path / "rlvitals-data")
    assert UI["en"]["no_runs_in"].format(store=where) in page
    assert f"store: <code>{where}</code>" in page
    assert "following" not in page.split('id="reading"')[1].split("</p>")[0]


def test_a_failed_log_follower_is_shown_and_restarted_until_its_folder_is_back(
    tmp_path: Path, builtin: registry.Registry
) -> None:
    logs, store = tmp_path / "runs", tmp_path / "store"
    writer = Sb3Writer(logs / "PPO_1")
    writer.write(3)
    said = io.StringIO()
    follower = Follower(
        [str(logs), "--store", str(store), "--poll", "0.1"], out=said, first_pause=0.1
    )
    config = DatasourceConfig(store=store, following=(str(logs),))
    client = create_app(config, builtin, follow_state=follower.state).test_client()
    follower.start()
    try:
        _until("the follower reads the run", lambda: follower.state().folders[0].logs == 1)
        assert client.get("/api/health").status_code == 200
        # the folder goes away (renamed, an unmounted disk): the tail loop fails
        logs.rename(tmp_path / "away")
        _until("the failure is seen", lambda: follower.state().state == "restarting")
        state = follower.state()
        assert state.error is not None and "no such file or directory" in state.error
        assert f"{logs}: no such file or directory" in said.getvalue()
        assert "following the logs failed" in said.getvalue()
        health = client.get("/api/health")
        body = health.get_json()
        assert health.status_code == 503 and body["status"] == "degraded"
        assert "no such file or directory" in body["reading"]["follower"]["error"]
        page = client.get("/", headers=HTML).get_data(as_text=True)
        banner = page.split('id="follow-error"')[1].split("</span>")[0]
        assert " hidden" not in banner.split(">")[0] and "no such file or directory" in banner
        # back again, grown meanwhile: followed again from where it stopped
        (tmp_path / "away").rename(logs)
        writer.write(2)
        _until("it follows again", lambda: follower.state().state == "following")
        assert follower.state().restarts >= 1
        _until("the new steps are stored", lambda: _last_step(store, "PPO_1") == 5 * ROLLOUT)
        assert client.get("/api/health").status_code == 200
    finally:
        assert follower.stop(WAIT_S)
        writer.close()
    with Outbox(store / "outbox.sqlite") as box:
        assert [r.run for r in box.runs()] == ["PPO_1"]  # never PPO_1-2


def test_serve_refuses_a_logdir_that_does_not_exist(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLVITALS_")}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "rlvitals", "serve", "runs/", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "LOGDIR runs/: no such folder or file" in r.stderr and "Traceback" not in r.stderr


def test_serve_answers_from_the_registry_given_with_registry(tmp_path: Path) -> None:
    """`--registry DIR` (the issue: `serve` took none): the datasource reads that registry."""
    mine = tmp_path / "my-registry"
    mine.mkdir()
    for name in ("metrics.yaml", "terms.yaml", "rules.yaml"):
        text = (ROOT / "registry" / name).read_text(encoding="utf-8")
        if name == "metrics.yaml":
            text = text.replace('title: {en: "Raw reward"', 'title: {en: "Reward as logged"', 1)
        (mine / name).write_text(text, encoding="utf-8")
    served = Served(tmp_path, "--registry", str(mine), "--store", "store")
    try:
        with urllib.request.urlopen(served.url + "/api/terms/raw_reward?lang=en") as r:
            assert "Reward as logged" in r.read().decode()
    finally:
        served.stop()
