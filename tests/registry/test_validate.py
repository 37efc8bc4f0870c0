"""`rlvitals validate` and `registry.load()` on broken files: every problem named, all at once;
docs/registry.md's `my_metrics.yaml` (minimal and fuller) passes its `rlvitals validate` line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import registry
from rlvitals.cli import main

BROKEN = sorted((Path(__file__).parent / "broken").glob("*.yaml"))
MINI = Path(__file__).parents[1] / "fixtures" / "mini_registry"
ROOT = Path(__file__).resolve().parents[2]


def _expectations(path: Path) -> list[str]:
    return [
        line.split("# expect:", 1)[1].strip()
        for line in path.read_text().splitlines()
        if "# expect:" in line
    ]


def test_every_broken_fixture_declares_what_it_expects() -> None:
    assert len(BROKEN) >= 12
    for path in BROKEN:
        assert _expectations(path), f"{path.name} has no '# expect:' line"


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_extension_is_rejected_naming_file_entry_and_field(path: Path) -> None:
    with pytest.raises(registry.RegistryInvalid) as info:
        registry.load(MINI, extensions=[path])
    text = "\n".join(str(p) for p in info.value.problems)
    for expected in _expectations(path):
        assert expected in text, f"{path.name}: expected {expected!r} in:\n{text}"
    assert all(str(path) in str(p) for p in info.value.problems)


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_validate_command_exits_1_listing_each_problem_on_its_own_line(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "--registry-dir", str(MINI), str(path)])
    out = capsys.readouterr()
    assert code == 1
    lines = out.out.strip().splitlines()
    assert lines and all(line.startswith(str(path)) for line in lines)
    assert "Traceback" not in out.out + out.err
    assert "problem(s) found" in out.err


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    combined = tmp_path / "many.yaml"
    metrics = [
        p
        for p in BROKEN
        if p.stem in ("unknown_related", "warning_beyond_critical", "band_outside_limits")
    ]
    combined.write_text(
        "metrics:\n" + "".join(p.read_text().split("metrics:\n", 1)[1] for p in metrics),
        encoding="utf-8",
    )
    with pytest.raises(registry.RegistryInvalid) as info:
        registry.load(MINI, extensions=[combined])
    assert len(info.value.problems) >= 3


def test_missing_registry_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "metrics.yaml").write_text((MINI / "metrics.yaml").read_text(), encoding="utf-8")
    with pytest.raises(registry.RegistryInvalid) as info:
        registry.load(tmp_path)
    assert any("terms.yaml" in str(p) and "file not found" in str(p) for p in info.value.problems)


def test_valid_user_extension_adds_a_metric_and_its_alias(tmp_path: Path) -> None:
    ext = tmp_path / "mine.yaml"
    body = (Path(__file__).parent / "broken" / "unknown_related.yaml").read_text()
    ext.write_text(
        body.replace("[no_such_metric]", "[policy_entropy]").replace(
            "user_unknown_related", "my_metric"
        )
        + "    aliases: [{key: custom/my_metric, framework: cleanrl}]\n",
        encoding="utf-8",
    )
    reg = registry.load(MINI, extensions=[ext])
    assert reg.resolve("custom/my_metric", "cleanrl").metric == "my_metric"
    assert main(["validate", "--registry-dir", str(MINI), str(ext)]) == 0


def _extending_it() -> str:
    page = (ROOT / "docs" / "registry.md").read_text(encoding="utf-8")
    start = page.index("## Extending it")
    return page[start : page.index("\n## ", start + 1)]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


@pytest.mark.parametrize("which", [0, 1], ids=["minimal", "fuller"])
def test_the_docs_template_validates(
    tmp_path: Path, which: int, builtin: registry.Registry
) -> None:
    section = _extending_it()
    block = _blocks(section, "yaml")[which]
    (tmp_path / "my_metrics.yaml").write_text(block)
    command = next(
        line.split("#")[0].strip()
        for b in _blocks(section, "bash")
        for line in b.splitlines()
        if line.startswith("rlvitals validate")
    )
    assert command == "rlvitals validate my_metrics.yaml"
    argv = shlex.split(command)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "rlvitals", *argv[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"registry OK: {len(builtin.metrics) + 1} metrics" in done.stdout
    reg = registry.load(MINI, extensions=[tmp_path / "my_metrics.yaml"])
    assert reg.resolve("custom/goal_distance", "sb3").metric == "goal_distance"
