"""A drop-in for TensorBoard's `SummaryWriter` that logs scalars to an rlvitals run.

CleanRL-style scripts change one import:

    from exporter.integrations.tensorboard import SummaryWriter
    writer = SummaryWriter(f"runs/{run_name}")            # run name = the folder's name
    writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)

Scalars of one step are gathered and logged together when the step changes, on `flush()` and on
`close()`. A tag written several times at one step (CleanRL writes one `charts/episodic_return`
per env that finished) is logged as the list of its values: the run keeps their mean, count, min
and max. `add_text` becomes a `text` event.

TensorBoard keeps working: by default every call is also passed to a real TensorBoard writer on
the same `log_dir` (torch's `SummaryWriter` when torch is installed, so images, histograms and
graphs are kept too; otherwise a scalar-and-text writer on TensorBoard's own `EventFileWriter`).
`tee=False` turns that off; `tee=<writer>` passes the calls to a writer of your own. The run is
named after `log_dir` (`name-2` when the store has that name already, unless `resume=True`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .target import StepLogger, numeric_values

__all__ = ["SummaryWriter"]


class SummaryWriter:
    """Scalar-only SummaryWriter whose points go to an rlvitals run."""

    def __init__(
        self,
        log_dir: str | Path | None = None,
        comment: str = "",
        *args: Any,
        run: StepLogger | None = None,
        project: str | None = None,
        framework: str = "cleanrl",
        tee: Any = True,
        resume: bool = False,
        **kwargs: Any,
    ) -> None:
        self._framework = framework
        if tee is True:
            tee = _tensorboard_writer(log_dir, comment, *args, **kwargs)
            log_dir = tee.log_dir  # where it chose to write when none was given
        self._tee = tee if tee is not False else None
        self.log_dir = str(log_dir) if log_dir is not None else None
        self._owns_run = run is None
        if run is None:
            from .. import init

            name = Path(self.log_dir).name if self.log_dir else f"run{comment}"
            run = init(name or "run", project=project, framework=framework, resume=resume)
        self.run: Any = run
        self._step: int | None = None
        self._pending: dict[str, float | list[float]] = {}
        self._wall_time: float | None = None
        self._closed = False

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self._add({tag: scalar_value}, global_step, walltime)
        if self._tee is not None:
            self._tee.add_scalar(tag, scalar_value, global_step, walltime, *args, **kwargs)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        self._add({f"{main_tag}/{k}": v for k, v in tag_scalar_dict.items()}, global_step, walltime)
        if self._tee is not None:
            self._tee.add_scalars(main_tag, tag_scalar_dict, global_step, walltime)

    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, *args: Any, **kwargs: Any
    ) -> None:
        step = global_step if global_step is not None else (self._step or 0)
        self.run.event(int(step), "text", text=str(text_string), tag=tag)
        if self._tee is not None:
            self._tee.add_text(tag, text_string, global_step, *args, **kwargs)

    def flush(self) -> None:
        self._emit()
        if self._tee is not None:
            self._tee.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._emit()
        if self._tee is not None:
            self._tee.close()
        if self._owns_run:
            self.run.finish()
        else:
            self.run.flush()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("add_"):  # images, histograms, graphs, ...: not scalars, ignored
            tee = self.__dict__.get("_tee")
            return getattr(tee, name) if tee is not None else _ignore
        raise AttributeError(name)

    def _add(self, values: Mapping[str, Any], step: int | None, walltime: float | None) -> None:
        if step is None:
            step = self._step if self._step is not None else 0
        step = int(step)
        if self._step is not None and step != self._step:
            self._emit()
        self._step = step
        pending = self._pending
        for tag, value in numeric_values(values).items():
            seen = pending.get(tag)
            if seen is None:
                pending[tag] = value
            elif isinstance(seen, list):
                seen.append(value)
            else:  # the tag again at this step: another value of the step, not a correction
                pending[tag] = [seen, value]
        self._wall_time = walltime if walltime is not None else time.time()

    def _emit(self) -> None:
        if self._pending and self._step is not None:
            self.run.log(
                self._step, self._pending, wall_time=self._wall_time, framework=self._framework
            )
        self._pending = {}


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _tensorboard_writer(log_dir: str | Path | None, comment: str, *args: Any, **kwargs: Any) -> Any:
    """The writer that keeps TensorBoard's event files: torch's when torch is installed (it
    writes everything a script adds), else `_EventWriter`."""
    try:
        from torch.utils.tensorboard import SummaryWriter as TorchWriter
    except ImportError:
        return _EventWriter(log_dir, comment)
    return TorchWriter(log_dir, comment, *args, **kwargs)


class _EventWriter:
    """Scalars and text to a TensorBoard event file with TensorBoard's own writer, for when torch
    is not installed. Other `add_*` calls are ignored."""

    def __init__(self, log_dir: str | Path | None, comment: str = "") -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        if log_dir is None:  # the folder torch's SummaryWriter would choose
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = Path("runs") / f"{stamp}_{socket.gethostname()}{comment}"
        self.log_dir = str(log_dir)
        self._writer = EventFileWriter(self.log_dir)

    def _summary(self, step: int | None, walltime: float | None, value: Any) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        event = event_pb2.Event(
            wall_time=walltime if walltime is not None else time.time(),
            step=int(step or 0),
            summary=summary_pb2.Summary(value=[value]),
        )
        self._writer.add_event(event)

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        from tensorboard.compat.proto import summary_pb2

        values = numeric_values({tag: scalar_value})
        if tag in values:
            value = summary_pb2.Summary.Value(tag=tag, simple_value=values[tag])
            self._summary(global_step, walltime, value)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        for key, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{key}", value, global_step, walltime)

    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, *args: Any, **kwargs: Any
    ) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._summary(global_step, None, text_pb(tag, str(text_string)).value[0])

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("add_"):
            return _ignore
        raise AttributeError(name)
