"""The calibration corpus through `rlvitals evaluate` and through rlwatch 0.5.1, side by side.

    pip install -e '.[bench]'          # rlwatch==0.5.1
    python bench/corpus_vs_rlwatch.py  # prints docs/evaluate.md's Markdown table

Both read the same values: each run's event files imported as `rlvitals import` does (`load_run`),
with what the expected file says the run's user passes (`given:`: --map, --set).
rlwatch's `DetectorSuite` (its default `RLWatchConfig`) is fed, per logged step, entropy
(policy_entropy), KL (policy_kl, or TRL's ref_kl), reward mean and std (episodic_return or
raw_reward, reward_std), loss (total_loss, else policy_loss) and grad_norm, exactly as its
`log_step` would pass them; its first warning and first critical alert are reported with the
detector that raised them. rlvitals' columns are the `evaluate` verdicts.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import registry
from registry.diagnosis.stats import Series
from rlvitals.evaluate.expected import given, read_expected
from rlvitals.evaluate.replay import LoadedRun, load_run, verdict

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "fixtures" / "runs"


def _value(series: Mapping[str, Series], metric: str, step: int) -> float | None:
    s = series.get(metric)
    if s is None:
        return None
    i = int(s.steps.searchsorted(step))
    if i < len(s) and int(s.steps[i]) == step:
        return float(s.values[i])
    return None


def rlwatch_first(run: LoadedRun) -> dict[str, tuple[int, str] | None]:
    from rlwatch.config import RLWatchConfig
    from rlwatch.detectors import DetectorSuite

    suite = DetectorSuite(RLWatchConfig())
    series = run.series  # built from every stored field at each read: read once
    kl = "ref_kl" if "ref_kl" in series else "policy_kl"
    reward = "raw_reward" if "raw_reward" in series else "episodic_return"
    loss = "total_loss" if "total_loss" in series else "policy_loss"
    steps = sorted({int(x) for s in series.values() for x in s.steps})
    first: dict[str, tuple[int, str] | None] = {"warning": None, "critical": None}
    for step in steps:
        kwargs: dict[str, Any] = {
            "entropy": _value(series, "policy_entropy", step),
            "kl_divergence": _value(series, kl, step),
            "reward_mean": _value(series, reward, step),
            "reward_std": _value(series, "reward_std", step),
            "loss": _value(series, loss, step),
            "grad_norm": _value(series, "grad_norm", step),
        }
        for alert in suite.check_step(step, **kwargs):
            level = "critical" if alert.severity == "critical" else "warning"
            if first[level] is None:
                first[level] = (step, alert.detector)
            if level == "critical" and first["warning"] is None:
                first["warning"] = (step, alert.detector)
    return first


def _fmt(x: tuple[int, str] | None) -> str:
    return "–" if x is None else f"{x[0]:,} ({x[1]})"


def main() -> int:
    reg = registry.load()
    expected = read_expected(RUNS / "expected.yaml")
    rows = [
        "| run | expected | failure step | rlvitals first warning | rlvitals first critical | rlvitals end | rlvitals as expected | rlwatch first warning | rlwatch first critical |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rv_ok = rw_healthy_quiet = rw_bad_flagged = healthy = bad = 0
    for name, entry in expected.items():
        exp = entry.expected
        run_reg, config = given(reg, {}, entry)  # what the run's user passes (--map, --set)
        run = load_run(RUNS / name, run_reg, config=config)
        v = verdict(run_reg, run, exp)
        rw = rlwatch_first(run)
        rv_ok += v.passed
        if exp.verdict == "healthy":
            healthy += 1
            rw_healthy_quiet += rw["warning"] is None
        else:
            bad += 1
            rw_bad_flagged += rw["warning"] is not None
        exp_text = exp.verdict + (", dead at end" if exp.dead_at_end else "")
        fail = "–" if exp.failure_step is None else f"{exp.failure_step:,} {exp.failure}"
        w, c = v.first["warning"], v.first["critical"]
        rows.append(
            f"| {name} | {exp_text} | {fail} | {'–' if w is None else f'{w:,}'} | "
            f"{'–' if c is None else f'{c:,}'} | {v.end_status} | "
            f"{'yes' if v.passed else 'no: ' + '; '.join(v.problems)} | {_fmt(rw['warning'])} | {_fmt(rw['critical'])} |"
        )
        print(f"{name}: done", file=sys.stderr)
    rows.append("")
    rows.append(
        f"rlvitals: {rv_ok}/{len(expected)} runs as expected. rlwatch 0.5.1 (defaults): "
        f"{rw_healthy_quiet}/{healthy} healthy runs without a warning, "
        f"{rw_bad_flagged}/{bad} destabilised runs with one."
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
