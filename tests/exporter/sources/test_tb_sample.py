"""A sample of a long event file's steps (`exporter.sources.tb_sample`), read without reading the
whole file: steps spread over all of it (none of its stretches left out, its last step included),
each a whole step with every tag it logged and the values as written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from logmakers import write_event_file

from exporter.sources.tb_sample import sample_steps

STEPS = 20_000
TAGS = ("rollout/ep_rew_mean", "train/approx_kl", "train/value_loss")


def _value(step: int, k: int) -> float:
    return float(np.float32(step / 1000 + k))  # what a float32 simple_value keeps


def test_a_sample_covers_the_whole_file_with_whole_steps(tmp_path: Path) -> None:
    path = write_event_file(
        tmp_path, ((s, {t: _value(s, k) for k, t in enumerate(TAGS)}) for s in range(STEPS))
    )
    got = sample_steps(path, samples=200)
    steps = [r.step for r in got]
    assert steps == sorted(set(steps))
    assert len(steps) >= 180
    assert steps[-1] == STEPS - 1  # as far as the file goes
    # spread over the whole file: no gap much wider than a two-hundredth of it
    gaps = np.diff([0, *steps])
    assert gaps.max() <= 3 * STEPS / 200, gaps.max()
    for record in got:
        assert set(record.values) == set(TAGS), record
        for k, tag in enumerate(TAGS):
            assert record.values[tag] == _value(record.step, k)


def test_a_sample_from_an_offset_holds_only_what_follows_it(tmp_path: Path) -> None:
    path = write_event_file(tmp_path, ((s, {TAGS[0]: float(s)}) for s in range(STEPS)))
    half = path.stat().st_size // 2
    got = sample_steps(path, half, samples=100)
    assert got and all(r.step > STEPS * 0.45 for r in got) and got[-1].step == STEPS - 1
    assert sample_steps(path, path.stat().st_size) == []
