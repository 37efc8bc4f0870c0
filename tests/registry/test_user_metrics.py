"""A user metric needs only id, title, unit and aliases (docs/registry.md "Extending it"): the rest gets
the defaults docs/registry.md states, English alone stands for Chinese, and the shipped registry's
metrics still declare every field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import registry

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_registry"

MINIMAL = """\
metrics:
  - id: goal_distance
    title: Distance to goal
    unit: none
    aliases: {sb3: custom/goal_distance, cleanrl: [charts/goal_distance]}
"""


def test_a_metric_with_id_title_unit_and_aliases_loads_with_the_stated_defaults(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "my_metrics.yaml"
    mine.write_text(MINIMAL)
    reg = registry.load(MINI, extensions=[mine])
    m = reg.metric("goal_distance")
    assert m.title == registry.Text("Distance to goal", "Distance to goal")
    assert m.definition == m.title and m.unit == "none"
    assert (m.group, m.direction, m.applies_to) == ("user", "band", ("all",))
    assert m.bands is None and m.alerts == () and not m.core
    assert (m.limits.min, m.limits.max) == (None, None)
    assert reg.resolve("custom/goal_distance", "sb3").metric == "goal_distance"
    assert reg.resolve("charts/goal_distance").metric == "goal_distance"
    with pytest.raises(registry.UnknownName):
        reg.resolve("custom/goal_distance", "cleanrl")  # declared for sb3 only


def test_a_plain_list_of_aliases_answers_under_every_framework(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "metrics:\n  - {id: my_gap, title: {en: Gap}, unit: ratio, aliases: [my/gap]}\n"
    )
    reg = registry.load(MINI, extensions=[mine])
    for framework in (None, "sb3", "trl"):
        assert reg.resolve("my/gap", framework).metric == "my_gap"


def test_a_user_metric_still_needs_a_unit_and_a_known_one(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "metrics:\n  - {id: a_metric, title: A}\n  - {id: b_metric, title: B, unit: furlongs}\n"
    )
    with pytest.raises(registry.RegistryInvalid) as info:
        registry.load(MINI, extensions=[mine])
    text = "\n".join(str(p) for p in info.value.problems)
    assert "'a_metric'" in text and "'unit' is a required property" in text
    assert "'b_metric'" in text and "'furlongs' is not one of" in text


def test_a_zh_text_given_without_chinese_is_still_refused_in_a_user_file(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "metrics:\n  - {id: a_metric, title: {en: A metric, zh: A metric}, unit: none}\n"
    )
    with pytest.raises(registry.RegistryInvalid, match=r"title\.zh.*Chinese text is missing"):
        registry.load(MINI, extensions=[mine])


def test_the_registry_folder_itself_stays_strict(tmp_path: Path) -> None:
    folder = tmp_path / "reg"
    folder.mkdir()
    for name in ("terms.yaml", "rules.yaml"):
        (folder / name).write_text((MINI / name).read_text())
    shipped = yaml.safe_load((MINI / "metrics.yaml").read_text())
    shipped["metrics"].append(yaml.safe_load(MINIMAL)["metrics"][0])
    (folder / "metrics.yaml").write_text(yaml.safe_dump(shipped, allow_unicode=True))
    with pytest.raises(registry.RegistryInvalid) as info:
        registry.load(folder)
    text = "\n".join(str(p) for p in info.value.problems)
    assert "'goal_distance'" in text and "'definition' is a required property" in text
