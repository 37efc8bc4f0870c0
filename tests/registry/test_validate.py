"""`rlvitals validate` and `registry.load()` on broken files: every problem named, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

import registry
from rlvitals.cli import main

BROKEN = sorted((Path(__file__).parent / "broken").glob("*.yaml"))
MINI = Path(__file__).parents[1] / "fixtures" / "mini_registry"


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
