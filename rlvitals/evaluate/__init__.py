"""`rlvitals evaluate`: replay real training runs through the diagnosis engine and compare its
verdicts with what is known of each run.

- `replay`: `load_run` (a run's event files read as `rlvitals import` reads them), `timeline`
  (every core metric's card at every logged step, as a dashboard refreshed then would show it),
  `verdict` (first watch / warning / critical step, the status at the end, and the evidence).
- `commands`: the `evaluate` subcommand.

An app of the engine (`registry.diagnosis`) and the log readers (`exporter.sources`,
`exporter.ingest.log_context`); nothing in `exporter` or `registry` imports it.
"""

from .replay import Expected, LoadedRun, RunVerdict, load_run, timeline, verdict

__all__ = ["Expected", "LoadedRun", "RunVerdict", "load_run", "timeline", "verdict"]
