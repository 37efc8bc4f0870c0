"""InfluxDB: the stored rows as line protocol, sent in batches, with step rollups beside them.

- `lineprotocol`: escaping and one point per line. `step_lines` (a batch of translated calls) and
  `block_lines` (columnar steps) render the same points faster for the direct import.
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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (see `__getattr__`)
    from .forwarder import Forwarder, render_lines
    from .lineprotocol import format_line
    from .writers import InfluxV1Writer, InfluxV2Writer, Writer, make_writer

# Imported on first use, as the exporter package does: the forwarder's child imports this
# package on its way to `forward_child` and needs only what that module imports.
_HOME_OF = {
    "Forwarder": ".forwarder",
    "render_lines": ".forwarder",
    "format_line": ".lineprotocol",
    "InfluxV1Writer": ".writers",
    "InfluxV2Writer": ".writers",
    "Writer": ".writers",
    "make_writer": ".writers",
}


def __getattr__(name: str) -> Any:
    """A name of `__all__` from its module, or a submodule, on first use."""
    home = _HOME_OF.get(name)
    if home is not None:
        value = getattr(import_module(home, __name__), name)
        globals()[name] = value
        return value
    try:
        return import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = [
    "Forwarder",
    "InfluxV1Writer",
    "InfluxV2Writer",
    "Writer",
    "format_line",
    "make_writer",
    "render_lines",
]
