"""One run of MLflow's file store (`mlruns/<experiment_id>/<run_id>/`), read as one log.

The layout, as `mlflow.store.tracking.file_store.FileStore` writes it (read in the
mlflow-skinny 3.18.0 wheel, `mlflow/store/tracking/file_store.py`):

- `meta.yaml`: the run's info, `run_name`, `start_time` (ms) and `status` as an integer
  (3 = FINISHED, `mlflow/protos/service_pb2.py` RunStatus);
- `metrics/<key>`: one line per logged point, `f"{timestamp} {value} {step}\\n"` (ms since the
  epoch, `str(float)` so `nan`/`inf` appear as such, an integer step), appended; a fourth and
  fifth field name a dataset; a key with `/` is a sub-folder (`metrics/train/reward`);
- `params/<key>`: the value as text; `tags/mlflow.runName`: the run's name.

A run folder is a folder with `meta.yaml` and `metrics/` inside an experiment folder (which has
its own `meta.yaml`): logged models (`<experiment>/models/<id>/metrics/`) are not runs. Only the
file store is read: runs kept in a SQL database (`sqlite:///mlflow.db`, MLflow's default since
3.7) or on a tracking server are not.

MLflow only appends to a metric file, so each file is read on from where the last poll stopped,
whole lines only; the points of one poll are grouped by step into Records, in step order. A key
logged twice at one step (a resumed run logging the step again) keeps the value written last,
the one MLflow's own "latest" takes (largest timestamp). A new process reads the run from its
start again: its steps are stored again at the same steps, as a console log's are.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..schema import SourcePosition
from .record import Malformed, Record

__all__ = ["MlflowRunSource", "RunIdentity", "is_mlflow_run", "mlflow_identity"]

_META = "meta.yaml"
_FINISHED = 3  # RunStatus.FINISHED


@dataclass(frozen=True)
class RunIdentity:
    """Who a tracker run is: the name its tracker gave it (None: none given), its id, and
    an order key (its start) that tells which of two runs of one name came first."""

    name: str | None
    run_id: str
    started: str


def is_mlflow_run(folder: Path) -> bool:
    """Whether `folder` is a run folder of an MLflow file store."""
    return (
        (folder / _META).is_file()
        and (folder / "metrics").is_dir()
        and (folder.parent / _META).is_file()
    )


def _meta(folder: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load((folder / _META).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def mlflow_identity(folder: Path) -> RunIdentity:
    """The run's name (`mlflow.runName`, else `run_name` of its meta.yaml), id and start."""
    meta = _meta(folder)
    name = _read_text(folder / "tags" / "mlflow.runName")
    if not name:
        name = meta.get("run_name") if isinstance(meta.get("run_name"), str) else None
    run_id = meta.get("run_id") if isinstance(meta.get("run_id"), str) else folder.name
    started = meta.get("start_time")
    return RunIdentity(name or None, run_id or folder.name, f"{started or 0:>20}")


def _flat_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(key, file) of every file under `root`, the key rebuilt from the sub-folders."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            yield path.relative_to(root).as_posix(), path


class MlflowRunSource:
    """Reads one MLflow run folder's metric files incrementally."""

    def __init__(self, path: Path, report: Callable[[Malformed], None]) -> None:
        self.path = path
        self._report = report
        # per metric file: (device, inode) it was read from, bytes and lines read
        self._read: dict[str, tuple[tuple[int, int], int, int]] = {}
        self._points = 0

    def close(self) -> None:
        """Nothing is held open: each poll opens the files that grew."""

    def position(self) -> SourcePosition | None:
        if not self._read:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        done = sum(offset for _, offset, _ in self._read.values())
        return SourcePosition(str(self.path), st.st_dev, st.st_ino, done, self._points, b"", b"")

    def resume(self, position: SourcePosition) -> bool:
        """Always read from the start (see the module docstring)."""
        return False

    def facts(self) -> dict[str, object]:
        """The run's params (for its run context), where its steps come from, and whether
        MLflow recorded it FINISHED."""
        params = {
            key: value
            for key, file in _flat_files(self.path / "params")
            if (value := _read_text(file)) is not None
        }
        out: dict[str, object] = {"tracker_config": params, "step_source": "MLflow step"}
        if _meta(self.path).get("status") == _FINISHED:
            out["closed"] = "MLflow recorded the run FINISHED"
        return out

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """The points logged since the last poll, one Record per step, in step order."""
        values: dict[int, dict[str, float]] = {}
        times: dict[int, float] = {}
        for key, file in _flat_files(self.path / "metrics"):
            for step, value, at in self._new_points(key, file, final):
                values.setdefault(step, {})[key] = value
                times[step] = max(times.get(step, at), at)
        for step in sorted(values):
            yield Record(step=step, values=values[step], wall_time=times[step])

    def _new_points(self, key: str, file: Path, final: bool) -> list[tuple[int, float, float]]:
        try:
            with open(file, "rb") as fh:
                st = os.fstat(fh.fileno())
                ident = (st.st_dev, st.st_ino)
                seen, offset, lines = self._read.get(key, (ident, 0, 0))
                if seen != ident or st.st_size < offset:
                    offset, lines = 0, 0  # replaced or cut: read again from its start
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        raws = complete.split(b"\n")[:-1]
        tail = data[len(complete) :]
        if final and tail:  # a last line without its newline: the writer was cut off
            raws.append(tail)
        offset += len(complete) + (len(tail) if final else 0)
        points = []
        for raw in raws:
            lines += 1
            point = self._point(raw, file, lines)
            if point is not None:
                points.append(point)
        self._read[key] = (ident, offset, lines)
        self._points += len(points)
        return points

    def _point(self, raw: bytes, file: Path, number: int) -> tuple[int, float, float] | None:
        fields = raw.decode("utf-8", errors="replace").split()
        if not fields:
            return None
        try:
            at = float(int(fields[0])) / 1000.0
            value = float(fields[1])
            # MLflow 1.x wrote `timestamp value` (no step): its reader takes step 0
            step = int(fields[2]) if len(fields) >= 3 else 0
        except (ValueError, IndexError):
            self._report(
                Malformed(str(file), number, "not an MLflow metric line `timestamp value step`")
            )
            return None
        if step < 0:
            self._report(Malformed(str(file), number, f"negative step {step}"))
            return None
        return step, value, at
