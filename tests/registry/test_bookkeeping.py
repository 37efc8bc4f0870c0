"""Each framework's bookkeeping keys are known to the registry as such (docs/registry.md):
kept as logged without a warning, never in place of a metric, each framework naming the source
it was read from; a user file may declare its own."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import registry
from exporter.counts import RunCounters
from exporter.schema import UNREGISTERED
from exporter.translate.steps import Translator

MINI = Path(__file__).parents[1] / "fixtures" / "mini_registry"

# The keys docs/registry.md names, per framework.
SB3 = ("time/iterations", "time/time_elapsed", "time/episodes", "train/n_updates")
HF = ("epoch", "total_flos", "train_runtime")


def test_the_keys_the_readme_names_are_bookkeeping_of_their_framework(
    builtin: registry.Registry,
) -> None:
    for framework, keys in (("sb3", SB3), ("hf", HF)):
        for key in keys:
            found = builtin.bookkeeping_key(key, framework)
            assert found is not None and found.framework == framework, key
            assert found.source and found.meaning.en and found.meaning.zh
    assert builtin.bookkeeping_key("train/epoch", "trl") is not None  # HF's, under W&B's train/
    assert builtin.bookkeeping_key("time/iterations", "trl") is None  # SB3's only


def test_a_key_that_is_a_metric_stays_a_metric(builtin: registry.Registry) -> None:
    for key, framework in (("time/fps", "sb3"), ("train_samples_per_second", "trl")):
        assert builtin.bookkeeping_key(key, framework) is None
        assert builtin.resolve(key, framework).metric == "samples_per_second"


def test_a_key_declared_both_metric_and_bookkeeping_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "bookkeeping:\n  - framework: sb3\n    source: my_callback.py\n"
        "    keys: [{key: train/approx_kl, meaning: the approximate KL}]\n"
    )
    with pytest.raises(registry.RegistryInvalid, match="is a metric id or alias"):
        registry.load(MINI, extensions=[mine])


def test_a_user_files_bookkeeping_is_kept_quietly_and_an_unknown_name_still_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "bookkeeping:\n  - framework: sb3\n    source: my_callback.py (on_rollout_end)\n"
        "    keys: [{key: custom/rollouts, meaning: rollouts collected so far}]\n"
    )
    reg = registry.load(MINI, extensions=[mine])
    t = Translator(
        reg, RunCounters(), run="r", rank=None, policy="warn", framework=None, last_step=None
    )
    with caplog.at_level(logging.WARNING, logger="exporter"):
        rows, _ = t.log(1, {"custom/rollouts": 3.0, "custom/thing": 1.0}, 1.7e9, None)
    assert {(r[3], r[5]) for r in rows} == {
        (UNREGISTERED, "custom/rollouts"),
        (UNREGISTERED, "custom/thing"),
    }
    assert "custom/thing" in caplog.text and "custom/rollouts" not in caplog.text
