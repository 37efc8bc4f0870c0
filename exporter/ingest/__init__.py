"""The way in without code: logs a job already writes, read into runs (`rlvitals import` / `tail`).

- `feed`: `Ingest`, the Records of `exporter.sources` fed into runs (one per log folder, or one
  named run), the framework detected from the keys, the queue never overrun; with InfluxDB
  configured an import writes through `exporter.influx.direct`.
- `sketch`: a long event file's or console log's whole-run sketch (a sample of its steps,
  translated), drawn while the import stores every value (`store.preview`).
- `log_context`: what a run's logs say about its setting (action space, clip range, ...), the
  run context the diagnosis reads.
- `commands`: the `import` and `tail` subcommands (argparse, progress, exit codes).
- `arguments`: the flags every command that reads logs shares (`--logdir`, `--format`,
  `--step-key`, `--config`, `--set`, ...), declared once.
- `background`: `Follower`, `tail --follow` in a thread of another process (`rlvitals serve
  LOGDIR`), restarted when it fails, its state (`FollowState`) readable at any time.

May import: everything below it in `exporter` (`run`, `sources`, `translate`, `store`, `influx`,
`prometheus`, the shared modules), and `registry`.
"""

from .feed import Ingest, RunSummary
from .log_context import context_from_logs

__all__ = ["Ingest", "RunSummary", "context_from_logs"]
