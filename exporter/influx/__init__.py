"""InfluxDB: the stored rows as line protocol, sent in batches, with step rollups beside them.

- `lineprotocol`: escaping and one point per line. `step_lines` (a batch of translated calls) and
  `block_lines` (columnar steps) render the same points faster for the direct import, and
  `point_lines` (unsent points read by their numbers) for the forwarder.
- `writers`: the same bytes to 1.x `/write` or 2.x/3.x `/api/v2/write`.
- `forwarder`: `Forwarder`, the thread that sends unsent outbox rows and marks them sent (with
  backoff through outages, a warning repeated while they last), records in the outbox the
  rollups it owes until they are written and what it is doing (for `rlvitals runs`, the run
  page), and drains what is left after the training exits; `forward_process` runs it in a child
  process (`forward_child` is the child's entry point) so sending never competes with training
  for the GIL.
- `rollups`: the 64- and 4096-step rollups kept in InfluxDB as the outbox keeps them in sqlite
  (recomputed from the raw points where owed, checked against them for `rlvitals doctor`);
  `rollup_worker` keeps them on a thread of their own (the forwarder's, an import's).
- `direct`: `DirectRun`, `rlvitals import` straight to InfluxDB (the log file is the durable copy).
- `drop_run`: a run's points deleted from every measurement (`rlvitals runs delete`).

Names of measurements, tags, fields and rollup levels come from `exporter.schema`, which the
datasource's InfluxQL readers (`grafana.datasource.history`) read too.

May import: `exporter.config`, `.counts`, `.errors`, `.schema`, `exporter.store` (the rows it
sends), `exporter.translate` and `exporter.sources`' `ScalarBlock` (the direct import translates
a log's blocks on the reader's thread).
"""

from .forwarder import Forwarder, render_lines
from .lineprotocol import format_line
from .writers import InfluxV1Writer, InfluxV2Writer, Writer, make_writer

__all__ = [
    "Forwarder",
    "InfluxV1Writer",
    "InfluxV2Writer",
    "Writer",
    "format_line",
    "make_writer",
    "render_lines",
]
