"""rlvitals exporter: log RL training metrics by step into a durable outbox and on to InfluxDB.

    run = exporter.init("ppo-cartpole-1", project="cartpole", config={"clip_range": 0.2})
    run.log(step, {"train/approx_kl": 0.01, "train/entropy_loss": -0.6})
    run.event(step, "checkpoint", "saved ckpt-1000")
    run.finish()

The folders are the stages a sample travels through (docs/architecture.md draws them):

- ways in: `run` (`init`, `Run`: the Python API and its worker thread), `integrations` (SB3, HF /
  TRL callbacks, the `SummaryWriter` drop-in, the GPU sampler), `sources` (TensorBoard, JSONL,
  CSV, trainer_state and text logs read as Records) and `ingest` (those logs fed into runs:
  `rlvitals import` / `tail`);
- `translate`: names through the registry to canonical ids, transforms, limits, derived metrics;
- `store`: the durable sqlite outbox, its running statistics and rollups, and each run's
  recorded life (its end, arrivals, writer lease);
- ways out: `influx` (line protocol, writers, the forwarder, InfluxDB rollups, the direct import)
  and `prometheus` (the `/metrics` endpoint and live alert states);
- shared by all: `config` (settings), `errors`, `counts` (what a run has counted), `schema`
  (the stored schema: measurement, tag and field names, rollup levels, row shapes),
  `lifecycle` (the one definition of a run's status), `lease` (who writes a run), `job` (which
  job and rank a process is, from `rank=` or the launcher's environment: the ranks of one job
  are one run) and `processes` (this host's process table: a process running, a zombie's exit
  status, the writer of a file).

Imports go one way (tests/exporter/test_layout.py checks it): the shared modules import no other
part of the exporter; `sources`, `translate` and `store` import only them (and `translate` the
block type of `sources`); `influx` and `prometheus` also the store (`influx` also translation and
that block type, for the direct import); `run`, `integrations` and `ingest`, which drive the
stages, any of them.
Nothing here imports `grafana` or the apps in `rlvitals` (the demo, the diagnosis replay).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names below are; imported when first used (see `__getattr__`)
    from .config import POLICIES, ExporterSettings, Policy
    from .counts import LiveState, RunStats
    from .errors import ConfigError, ExporterError, InvalidSample, OutboxError, WriteError
    from .influx.forwarder import Forwarder, render_lines
    from .influx.lineprotocol import format_line
    from .influx.writers import InfluxV1Writer, InfluxV2Writer, Writer, make_writer
    from .lifecycle import Lifecycle, RunStatus
    from .prometheus.metrics_endpoint import LiveSource, MetricsEndpoint, RuleState, RuleStates
    from .run import Run, init
    from .store.outbox import EventRecord, Outbox, RunRecord

# Where each name lives. Imported on first use, not here: the forwarder's child process
# (`python -m exporter.influx.forward_child`) imports this package first, and importing every
# stage up front (the run, the sources, the registry) was most of its 0.4 s start.
_HOMES = {
    ".config": ("POLICIES", "ExporterSettings", "Policy"),
    ".counts": ("LiveState", "RunStats"),
    ".errors": ("ConfigError", "ExporterError", "InvalidSample", "OutboxError", "WriteError"),
    ".influx.forwarder": ("Forwarder", "render_lines"),
    ".influx.lineprotocol": ("format_line",),
    ".influx.writers": ("InfluxV1Writer", "InfluxV2Writer", "Writer", "make_writer"),
    ".lifecycle": ("Lifecycle", "RunStatus"),
    ".prometheus.metrics_endpoint": ("LiveSource", "MetricsEndpoint", "RuleState", "RuleStates"),
    ".run": ("Run", "init"),
    ".store.outbox": ("EventRecord", "Outbox", "RunRecord"),
}
_HOME_OF = {name: home for home, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of `__all__` from its module, or a submodule (`exporter.counts`), on first use."""
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
    "POLICIES",
    "ConfigError",
    "EventRecord",
    "ExporterError",
    "ExporterSettings",
    "Forwarder",
    "InfluxV1Writer",
    "InfluxV2Writer",
    "InvalidSample",
    "Lifecycle",
    "LiveSource",
    "LiveState",
    "MetricsEndpoint",
    "Outbox",
    "OutboxError",
    "Policy",
    "RuleState",
    "RuleStates",
    "Run",
    "RunRecord",
    "RunStats",
    "RunStatus",
    "WriteError",
    "Writer",
    "format_line",
    "init",
    "make_writer",
    "render_lines",
]
