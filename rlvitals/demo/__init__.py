"""`rlvitals demo`: simulated PPO/GRPO-like training with injected failures, logged through the
real exporter, and the diagnosis each run ends with.

`simulate` draws healthy trajectories (pure numpy) whose levels come from the registry's bands;
`scenarios` injects one failure each and declares which rule, alert or event must flag it and
within how many steps; `run_demo` logs them with `exporter.init`; `verdict` finds when the
expected flag was first raised; `summary` prints the one-screen diagnosis.
"""

from .run_demo import DemoOptions, DemoResult, run_demo, run_scenario
from .scenarios import SCENARIOS, Expectation, Scenario, build, scenario_named
from .simulate import SimConfig, SimEvent, Trajectory, simulate
from .verdict import Detection, detect

__all__ = [
    "SCENARIOS",
    "DemoOptions",
    "DemoResult",
    "Detection",
    "Expectation",
    "Scenario",
    "SimConfig",
    "SimEvent",
    "Trajectory",
    "build",
    "detect",
    "run_demo",
    "run_scenario",
    "scenario_named",
    "simulate",
]
