"""A drop-in for TensorBoard's `SummaryWriter` that logs scalars to an rlvitals run.

CleanRL-style scripts change one import:

    from exporter.integrations.tensorboard import SummaryWriter
    writer = SummaryWriter(f"runs/{run_name}")            # run name = the folder's name
    writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)

Scalars of one step are gathered and logged together when the step changes, on `flush()` and on
`close()`. `add_text` becomes a `text` event; images, histograms, videos and graphs are accepted
and ignored, so scripts run unchanged. Pass `tee=` another writer (torch's) to keep event files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
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
        tee: Any = None,
        **kwargs: Any,
    ) -> None:
        self.log_dir = str(log_dir) if log_dir is not None else None
        self._framework = framework
        self._tee = tee
        self._owns_run = run is None
        if run is None:
            from .. import init

            name = Path(self.log_dir).name if self.log_dir else f"run{comment}"
            run = init(name or "run", project=project, framework=framework)
        self.run: Any = run
        self._step: int | None = None
        self._pending: dict[str, float] = {}
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
        self._pending.update(numeric_values(values))
        self._wall_time = walltime if walltime is not None else time.time()

    def _emit(self) -> None:
        if self._pending and self._step is not None:
            self.run.log(
                self._step, self._pending, wall_time=self._wall_time, framework=self._framework
            )
        self._pending = {}


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None
