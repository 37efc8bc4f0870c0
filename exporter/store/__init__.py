"""The durable local store: where every accepted sample is kept before anything else happens to it.

- `outbox`: `Outbox`, one sqlite file (WAL) of samples, events and runs, keyed by step, with
  unsent rows numbered for the forwarder (and what it owes in InfluxDB rollups, and what it last
  said it was doing); it is also the embedded store `serve`, `report` and the datasource read
  when no InfluxDB is configured.
- `running_stats`: per-series running statistics and step rollups kept in the same transaction,
  so readers get whole-run means and long series from a bounded number of rows.
  It records each run's life: the recorded end, when rows last arrived, the writer's lease
  (read by `exporter.lifecycle`, the one definition of a run's status).
- `run_colors`: the colour a run gets when it is created (kept in its `runs` row), and the colours
  a page showing several runs together draws them in.
- `runs_list`: `rlvitals runs`. `run_admin`: a run deleted, renamed, given notes or tags, one
  transaction each (the command line is `rlvitals.runs_manage`).
- `repair`: `rlvitals doctor --repair`, a damaged file salvaged into a new one (tables read whole
  where sqlite can, else row by row from their surviving pages: `salvage`, sqlite's file format
  read directly), statistics recomputed, the damaged file kept beside it.

- `ranks`: the ranks of a run several ranks of one job log, each with its lease or its end.

May import: `exporter.config`, `.errors`, `.schema`, `.lifecycle`, `.lease`, `.job`. Never translation, InfluxDB or Prometheus:
the store holds rows, whoever made them.
"""

from ..lifecycle import Lifecycle, RunStatus
from ..schema import SourcePosition
from .outbox import EventRecord, Outbox, RunRecord

__all__ = ["EventRecord", "Lifecycle", "Outbox", "RunRecord", "RunStatus", "SourcePosition"]
