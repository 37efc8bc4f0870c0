"""`rlvitals evaluate`: replay real training runs through the diagnosis engine and compare its
verdicts with what is known of each run.

- `replay`: `load_run` (a run's logs imported as `rlvitals import` imports them, into a store of
  its own, and read back as the datasource reads them), `timeline` (the cards `/api/cards`
  answers for the run cut at each logged step: replay and live are one engine), `verdict` (first
  watch / warning / critical step, the status at the end, and the evidence).
- `expected`: the expected verdicts file (verdict, family, what the run's user passes).
- `lofo`: `--leave-one-family-out`, the tunable levels chosen on the other families and the
  held-out one judged with them, from the replay's kept cards.
- `commands`: the `evaluate` subcommand.

An app of the engine (`registry.diagnosis`), the importer (`exporter.ingest`) and the
datasource's card reader (`grafana.datasource.cards`); nothing in `exporter`, `registry` or
`grafana` imports it.
"""

from .replay import Expected, LoadedRun, RunVerdict, load_run, timeline, verdict

__all__ = ["Expected", "LoadedRun", "RunVerdict", "load_run", "timeline", "verdict"]
