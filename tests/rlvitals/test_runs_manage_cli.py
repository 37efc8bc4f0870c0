"""`rlvitals runs delete | rename | note | tag` on a real store: what each changes, its exit code
and one-line refusals (unknown run with close names, a run a live process writes, a taken name,
delete without --yes off a terminal), the list still working, a renamed run that `tail` goes on
appending to (docs/runs.md's commands are run in order by
tests/test_docs_guides.py). Where another process matters (a live writer's lease,
a terminal to confirm on) the command runs as a subprocess; elsewhere `main()` in this process
(the CLI's start-up costs seconds on a loaded machine)."""

from __future__ import annotations

import io
import json
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import exporter
import registry
from exporter.store.outbox import Outbox
from rlvitals.cli import main

ROOT = Path(__file__).resolve().parents[2]
MINI = str(ROOT / "tests" / "fixtures" / "mini_registry")


def _spawn(*args: str, store: Path, stdin: int | None = subprocess.DEVNULL) -> tuple[int, str]:
    """The command as a user runs it: (exit code, stderr)."""
    env = {**os.environ, "RLVITALS_STORE": str(store)}
    env.pop("RLVITALS_INFLUX_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "rlvitals.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`main()` here, stdin no terminal: (exit code, stdout, stderr)."""
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    def run(*args: str, store: Path) -> tuple[int, str, str]:
        monkeypatch.setenv("RLVITALS_STORE", str(store))
        code = main(list(args))
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    return run


def _runs(store: Path) -> dict[str, dict[str, object]]:
    """What `rlvitals runs --json` lists, by name."""
    from exporter.store.runs_list import list_runs

    path = store / "outbox.sqlite"
    if not path.exists():
        return {}
    with Outbox(path) as box:
        return {
            r.name: {"last_step": r.last_step, "tags": list(r.tags), "notes": r.notes}
            for r in list_runs(box)
        }


def _store(tmp_path: Path, reg: registry.Registry, *names: str) -> Path:
    store = tmp_path / "store"
    settings = exporter.ExporterSettings(store=store, policy="warn")
    for name in names:
        with exporter.init(name, registry=reg, settings=settings) as run:
            for step in range(50):
                run.log(step, {"policy_kl": 0.01})
    return store


def test_tag_note_rename_delete_change_the_run_and_the_list_shows_it(
    tmp_path: Path, reg: registry.Registry, cli: Any
) -> None:
    store = _store(tmp_path, reg, "alpha", "beta")
    assert cli("runs", "tag", "alpha", "ppo", "baseline", store=store)[:2] == (0, "baseline ppo\n")
    assert cli("runs", "tag", "alpha", "baseline", "--remove", store=store)[1] == "ppo\n"
    assert cli("runs", "note", "alpha", "lr too high", store=store)[0] == 0
    assert cli("runs", "note", "alpha", store=store)[1] == "lr too high\n"
    code, out, _ = cli("runs", "--json", store=store)
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["alpha"]["tags"] == ["ppo"] and rows["alpha"]["notes"] == "lr too high"
    assert rows["beta"]["tags"] == [] and rows["beta"]["notes"] == ""
    code, table, _ = cli("runs", store=store)
    head, alpha, _beta = table.splitlines()
    assert "TAGS" in head.split() and "ppo" in alpha.split() and alpha.split()[0] == "alpha"
    assert cli("runs", "rename", "alpha", "gamma", store=store)[:2] == (
        0,
        "renamed run 'alpha' to 'gamma'\n",
    )
    rows = _runs(store)
    assert set(rows) == {"gamma", "beta"} and rows["gamma"]["last_step"] == 49
    assert rows["gamma"]["tags"] == ["ppo"]
    code, out, _ = cli("runs", "delete", "gamma", "--yes", store=store)
    assert code == 0 and out.startswith("deleted run 'gamma': ")
    assert set(_runs(store)) == {"beta"}
    assert cli("runs", "note", "beta", "--clear", store=store)[0] == 0


def test_refusals_exit_2_with_one_line_saying_why(
    tmp_path: Path, reg: registry.Registry, cli: Any
) -> None:
    store = _store(tmp_path, reg, "alpha", "beta")
    cases = [
        (("runs", "rename", "alpah", "x"), "no run named 'alpah' in the store; did you mean 'alpha'?"),
        (("runs", "delete", "bta", "--yes"), "did you mean 'beta'?"),
        (("runs", "rename", "alpha", "beta"), "a run named 'beta' is already in the store"),
        (("runs", "rename", "alpha", "bad\\"), "ends in a backslash"),
        (("runs", "tag", "alpha", "two words"), "a tag is one word"),
        (("runs", "note", "alpha", "x", "--clear"), "give TEXT or --clear, not both"),
        (("runs", "delete", "alpha"), "stdin is not a terminal to ask on; pass --yes"),
        (("runs", "delete", "alpha", "--store", str(tmp_path / "none")), "no store at"),
    ]  # fmt: skip
    for args, says in cases:
        code, _out, err = cli(*args, store=store)
        assert code == 2, (args, err)
        assert says in err and len(err.strip().splitlines()) == 1, (args, err)
    assert set(_runs(store)) == {"alpha", "beta"}  # nothing changed
    # the same refusal from a real process: one line, exit 2, no traceback
    code, err = _spawn("runs", "delete", "alpha", store=store)
    assert code == 2 and err.strip().endswith("pass --yes") and len(err.strip().splitlines()) == 1


def test_a_run_a_live_process_writes_is_refused_naming_its_pid_and_host(
    tmp_path: Path, reg: registry.Registry
) -> None:
    store = tmp_path / "store"
    live = exporter.init(
        "busy", registry=reg, settings=exporter.ExporterSettings(store=store, policy="warn")
    )
    live.log(1, {"policy_kl": 0.1})
    assert live.flush()
    try:
        holder = f"pid {os.getpid()} on {socket.gethostname()}"
        for args in (("delete", "busy", "--yes"), ("rename", "busy", "other")):
            code, err = _spawn("runs", *args, store=store)
            assert code == 2 and holder in err and "Stop that process first" in err, err
        assert set(_runs(store)) == {"busy"}
    finally:
        live.finish()
    assert _spawn("runs", "rename", "busy", "other", store=store)[0] == 0  # free once it ended
    assert set(_runs(store)) == {"other"}


def test_delete_on_a_terminal_asks_and_deletes_only_on_yes(
    tmp_path: Path, reg: registry.Registry
) -> None:
    store = _store(tmp_path, reg, "alpha")
    for answer, code, left in ((b"n\n", 1, {"alpha"}), (b"y\n", 0, set())):
        main_fd, child = pty.openpty()
        try:
            os.write(main_fd, answer)
            assert _spawn("runs", "delete", "alpha", store=store, stdin=child)[0] == code
        finally:
            os.close(main_fd)
            os.close(child)
        assert set(_runs(store)) == left


def _write_steps(log: Path, steps: range) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        for s in steps:
            f.write(json.dumps({"step": s, "policy_kl": s / 1000}) + "\n")


def test_tail_goes_on_appending_to_a_renamed_run_not_the_old_name(tmp_path: Path, cli: Any) -> None:
    store, logs = tmp_path / "store", tmp_path / "logs"
    _write_steps(logs / "exp1" / "metrics.jsonl", range(100))
    tail = ("tail", str(logs), "--no-follow", "--registry", MINI)
    assert cli(*tail, store=store)[0] == 0
    assert set(_runs(store)) == {"exp1"}
    assert cli("runs", "rename", "exp1", "exp1-lr3e-4", store=store)[0] == 0
    # the same logs again: nothing new is read, and no run of the old name appears
    assert cli(*tail, store=store)[0] == 0
    rows = _runs(store)
    assert set(rows) == {"exp1-lr3e-4"} and rows["exp1-lr3e-4"]["last_step"] == 99
    # the logs grow: the new steps go to the renamed run
    _write_steps(logs / "exp1" / "metrics.jsonl", range(100, 150))
    assert cli(*tail, store=store)[0] == 0
    rows = _runs(store)
    assert set(rows) == {"exp1-lr3e-4"} and rows["exp1-lr3e-4"]["last_step"] == 149
    with Outbox(store / "outbox.sqlite") as box:
        assert box.series("exp1-lr3e-4", "policy_kl")[0].size == 150


@pytest.mark.parametrize("flags", [["--json"], []])
def test_the_list_is_unchanged_for_a_store_without_tags(
    tmp_path: Path, reg: registry.Registry, cli: Any, flags: list[str]
) -> None:
    store = _store(tmp_path, reg, "alpha")
    code, out, _ = cli("runs", "--store", str(store), *flags, store=tmp_path / "elsewhere")
    assert code == 0
    if flags:
        assert [r["name"] for r in json.loads(out)] == ["alpha"]
    else:
        assert out.splitlines()[0].split() == [
            "RUN", "PROJECT", "FRAMEWORK", "STATUS", "LAST", "STEP", "STARTED", "(UTC)", "WHY"
        ]  # fmt: skip
