"""The demo's summary never contradicts itself: under a scenario it says was flagged, the line
about the run's last step does not read as if nothing had been flagged; a rule that fired and had
cleared by the last step is named with the step it fired at."""

from __future__ import annotations

from rlvitals.demo import DemoResult
from rlvitals.demo.summary import format_result


def test_a_flagged_scenario_never_reads_firing_none(demo_results: dict[str, DemoResult]) -> None:
    for name, r in demo_results.items():
        text = "\n".join(format_result(r))
        flagged = r.detection is not None and r.detection.step is not None
        if flagged:
            assert "none" not in text.split("expected", 1)[1].lower(), (name, text)
        if r.detection is None or r.detection.expect.kind != "rule" or not flagged:
            continue
        # the expected rule is named on the rules line, firing or with the step it fired at
        rules = next(line for line in text.splitlines() if line.startswith("  rules"))
        assert r.detection.expect.id in rules, (name, rules)
        if all(x.rule.id != r.detection.expect.id for x in r.firing):
            assert f"fired at step {r.detection.step:,}" in rules, (name, rules)


def test_an_event_is_recorded_not_flagged(demo_results: dict[str, DemoResult]) -> None:
    events = [
        r for r in demo_results.values() if r.detection and r.detection.expect.kind == "event"
    ]
    assert events
    for r in events:
        assert ": recorded at step" in r.detection.describe()  # type: ignore[union-attr]
