"""The shapes of published LLM-RL runs (calibration/llm_corpus/expected.yaml, whose logs are not
in this repository), regenerated as TRL prints them and put to `rlvitals evaluate`.

Each console log is written by transformers' own ProgressCallback (tests/exporter/sources/
consolemakers.py), with the values that made the published run what it is; the other values are
steady. What is expected of each comes from the registry's promises, not from the engine's output:

- a healthy run whose pre-clip gradient norm spikes once to 400 times its level (round 4's
  recall-env L2, round 3's hotpotqa v1): `grad_norm`'s critical alert needs two points in a row
  (the norm is cut to the clip before the update), so the run is never warned;
- the same spike held for two points is the alert;
- a run broken from its first point, then reward 0 with every group alike (round 4's
  website-sanitizer): nine in ten answers cut with nine in ten groups alike
  (`answers_cut_and_groups_alike`) warns at its third point, and
  `reward_gone_groups_without_variance` (window 5, held 2) makes it critical at the sixth;
- a run whose every group ties at a reward of 0 from the start (round 4's recall-env L3): nothing
  in its values tells it from a solved run, so it is not warned, and its reward card says it has
  learned nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlvitals.cli import main
from tests.exporter.sources.consolemakers import hf_console

Logs = list[tuple[int, dict[str, float]]]


def _grpo(n: int, every: int, rng: np.random.Generator) -> Logs:
    """A TRL GRPO run that learns: reward -0.3 -> 1.9 with a batch's scatter, the rest steady."""
    out = []
    for k in range(1, n + 1):
        step = k * every
        progress = min(1.0, k / (0.4 * n))
        out.append(
            (
                step,
                {
                    "loss": float(rng.normal(0.0, 0.002)),
                    "grad_norm": float(abs(rng.normal(0.22, 0.04))),
                    "learning_rate": 5e-6 * (1 - k / n),
                    "num_tokens": 4000.0 * step,
                    "completions/mean_length": float(430 - 130 * progress + rng.normal(0, 10)),
                    "completions/clipped_ratio": float(max(0.0, 0.375 * (1 - 2 * progress))),
                    "reward": float(-0.3 + 2.2 * progress + rng.normal(0, 0.12)),
                    "reward_std": float(abs(rng.normal(0.6, 0.05))),
                    "frac_reward_zero_std": 0.0,
                    "kl": float(0.002 + 0.07 * progress),
                    "epoch": step / (n * every),
                },
            )
        )
    return out


def _broken_from_the_start(rng: np.random.Generator) -> Logs:
    """Website-sanitizer's shape: logged every 10 steps; at 10 the KL to the reference is in the
    thousands and most answers run to the limit; from 20 the reward is 0, every group alike,
    every answer cut at the limit, while the KL falls back."""
    out = []
    kl = [10833.0, 1678.0, 906.0, 1291.0, 65.0, 14.0, 5.1, 2.5, 1.1, 0.46]
    for k in range(1, 41):
        first = k == 1
        out.append(
            (
                10 * k,
                {
                    "loss": 1083.0 if first else 0.004,
                    "grad_norm": 421404.0 if first else float(abs(rng.normal(0.3, 0.1))),
                    "learning_rate": 5e-6,
                    "num_tokens": 40000.0 * k,
                    "completions/mean_length": 124.95 if first else 128.0,
                    "completions/clipped_ratio": 0.975 if first else 1.0,
                    "reward": 0.0242 if first else 0.0,
                    "reward_std": 0.0015 if first else 0.0,
                    "frac_reward_zero_std": 0.975 if first else 1.0,
                    "kl": kl[k - 1] if k <= len(kl) else float(abs(rng.normal(0.05, 0.02))),
                    "epoch": k / 40,
                },
            )
        )
    return out


def _ties_from_the_start(rng: np.random.Generator) -> Logs:
    """Recall-env L3's shape: every step, one group of 8; it ties at 0 at most steps, one
    answer scores -1 at the others (reward -0.125, the group's std 0.35)."""
    out = []
    for k in range(1, 73):
        tie = rng.random() < 0.86
        out.append(
            (
                k,
                {
                    "loss": 0.0 if tie else 0.0002,
                    "grad_norm": float(abs(rng.normal(0.0005, 0.0005))) if tie else 0.15,
                    "learning_rate": 5e-6 * (1 - k / 200),
                    "num_tokens": 6000.0 * k,
                    "completions/mean_length": float(505 + rng.normal(0, 6)),
                    "completions/clipped_ratio": 0.0,
                    "reward": 0.0 if tie else -0.125,
                    "reward_std": 0.0 if tie else 0.3536,
                    "frac_reward_zero_std": 1.0 if tie else 0.0,
                    "kl": float(abs(rng.normal(0.025, 0.01))),
                    "epoch": k / 200,
                },
            )
        )
    return out


def _write(root: Path, name: str, logs: Logs, max_steps: int) -> None:
    """A run's folder (a folder of logs is one run, named after it) with its console log."""
    (root / name).mkdir()
    text = hf_console(logs, max_steps=max_steps)
    (root / name / "train.log").write_text(text, encoding="utf-8")


def _evaluate(folder: Path, expected: dict[str, Any]) -> dict[str, dict[str, Any]]:
    path = folder.parent / "expected.yaml"
    path.write_text(yaml.safe_dump({"runs": expected}), encoding="utf-8")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["evaluate", str(folder), "--expected", str(path), "--json"])
    return {row["run"]: row for row in json.loads(buffer.getvalue())}


def test_published_llm_run_shapes_get_the_verdicts_the_registry_promises(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    logs = tmp_path / "logs"
    logs.mkdir()
    spiked = _grpo(200, 1, rng)
    spiked[78][1]["grad_norm"] = 85.9  # step 79 alone; the next point is back at its level
    _write(logs, "one-spike", spiked, 200)
    held = _grpo(200, 1, rng)
    held[78][1]["grad_norm"] = held[79][1]["grad_norm"] = 85.9
    _write(logs, "held-spike", held, 200)
    _write(logs, "broken-from-the-start", _broken_from_the_start(rng), 405)
    _write(logs, "ties-from-the-start", _ties_from_the_start(rng), 200)

    rows = _evaluate(
        logs,
        {
            "one-spike": {"verdict": "healthy"},
            "broken-from-the-start": {  # as its published run's verdict reads
                "verdict": "destabilised",
                "failure_step": 10,
                "failure": "trust_region",
                "also": ["length_limit@10", "dead_policy@20"],
                "dead_at_end": True,
            },
        },
    )

    assert rows["one-spike"]["as_expected"], rows["one-spike"]
    assert rows["one-spike"]["first"]["warning"] is None
    # two points in a row at 100 times the early level: the alert, named as the failure it is
    assert rows["held-spike"]["first"]["warning"] == 80, rows["held-spike"]
    assert "grad_explosion" in rows["held-spike"]["flag_names"]
    broken = rows["broken-from-the-start"]
    assert broken["as_expected"], broken
    # answers cut with groups alike: judged from the second point, held two, so the third;
    # critical when the reward has stayed under a tenth of its start for five points, held two
    assert broken["first"]["warning"] == 30 and "length_limit" in broken["flag_names"]
    assert broken["first"]["critical"] == 60 and broken["end"] == "critical"
    ties = rows["ties-from-the-start"]
    assert ties["first"]["warning"] is None and ties["end"] == "watch", ties
