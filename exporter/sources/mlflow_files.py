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

What cannot be read is said, naming the file (and line): a metric line whose timestamp, value or
step is not what MLflow writes (each field named), a step beyond the largest storable one, a
`meta.yaml` that is not YAML, and a FIFO, socket or device where MLflow keeps a file (never
opened for reading: that would wait for a writer forever); the run's other files are read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..schema import MAX_STEP, SourcePosition
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


class _NotRegular(OSError):
    """A FIFO, socket or device where MLflow keeps a regular file."""


_NOT_REGULAR = (
    "not a regular file (a FIFO, socket or device), so it is not read: reading it would wait "
    "for a writer forever; replace it with the file MLflow wrote"
)


def _open_regular(path: Path) -> int:
    """A descriptor of `path` open for reading; _NotRegular when it is not a regular file.
    O_NONBLOCK: a plain open() of a FIFO waits for a writer (for ever, and unkillable by
    SIGTERM); with it the open returns at once and fstat tells what was opened. A regular file
    reads the same either way."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotRegular(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_text(path: Path) -> tuple[str | None, str | None]:
    """(the file's text, None), or (None, why it could not be read); (None, None) when there
    is no such file (an optional file of MLflow's, or one removed while it was read)."""
    try:
        with os.fdopen(_open_regular(path), "rb") as fh:
            return fh.read().decode("utf-8"), None
    except _NotRegular:
        return None, _NOT_REGULAR
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror}); check its permissions"
    except UnicodeDecodeError as exc:
        return None, f"is not UTF-8 text (byte {exc.start}); MLflow writes UTF-8"


def _meta(folder: Path) -> tuple[dict[str, Any], str | None]:
    """The run's `meta.yaml` as a mapping, and why it could not be read (None: it was)."""
    text, problem = _read_text(folder / _META)
    if text is None:
        return {}, problem
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return {}, f"is not valid YAML{where}"
    if not isinstance(doc, dict):
        return {}, "does not hold a YAML mapping of the run's info"
    return doc, None


def mlflow_identity(folder: Path) -> RunIdentity:
    """The run's name (`mlflow.runName`, else `run_name` of its meta.yaml), id and start."""
    meta, _ = _meta(folder)  # its problems are said by the run's source (`facts`)
    name, _ = _read_text(folder / "tags" / "mlflow.runName")
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
        self._said: set[tuple[str, str]] = set()  # (file, problem) said already: once each

    def _say_once(self, path: Path, reason: str) -> None:
        """Report a problem of a whole file once: `facts()` is asked, and each file looked
        at, on every poll."""
        if (str(path), reason) not in self._said:
            self._said.add((str(path), reason))
            self._report(Malformed(str(path), 0, reason))

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
        params = {}
        for key, file in _flat_files(self.path / "params"):
            value, problem = _read_text(file)
            if value is not None:
                params[key] = value
            elif problem is not None:
                self._say_once(file, f"{problem}; param {key!r} is not in the run's context")
        tag = self.path / "tags" / "mlflow.runName"
        if (problem := _read_text(tag)[1]) is not None:
            self._say_once(tag, f"{problem}; the run is named by meta.yaml or its id instead")
        meta, problem = _meta(self.path)
        if problem is not None:
            self._say_once(
                self.path / _META,
                f"{problem}, so its run_name, run_id, start_time and status are not used (the "
                "run is not seen FINISHED); fix or restore the file",
            )
        out: dict[str, object] = {"tracker_config": params, "step_source": "MLflow step"}
        if meta.get("status") == _FINISHED:
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
            with os.fdopen(_open_regular(file), "rb") as fh:
                st = os.fstat(fh.fileno())
                ident = (st.st_dev, st.st_ino)
                seen, offset, lines = self._read.get(key, (ident, 0, 0))
                if seen != ident or st.st_size < offset:
                    offset, lines = 0, 0  # replaced or cut: read again from its start
                fh.seek(offset)
                data = fh.read()
        except _NotRegular:
            self._say_once(file, f"{_NOT_REGULAR}; metric {key!r} is not imported")
            return []
        except FileNotFoundError:
            return []  # removed since the folder was listed
        except OSError as exc:
            self._say_once(file, f"cannot be read ({exc.strerror}); check its permissions")
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
        problem = None  # why it is not an MLflow metric line
        at = value = 0.0
        if len(fields) < 2:
            problem = "holds only one field"
        elif not _is_int(fields[0]):
            problem = f"timestamp {fields[0][:40]!r} is not a whole number of milliseconds"
        else:
            try:
                at = int(fields[0]) / 1000.0
            except OverflowError:  # beyond a float: no time a clock gives
                problem = f"timestamp {fields[0][:40]} is too large for a time"
            try:
                value = float(fields[1])
            except ValueError:
                problem = problem or f"value {fields[1][:40]!r} is not a number"
        if problem is None and len(fields) >= 3:
            if not _is_int(fields[2]) or int(fields[2]) < 0:
                problem = f"step {fields[2][:40]!r} is not a whole number >= 0"
            elif int(fields[2]) > MAX_STEP:
                self._report(
                    Malformed(
                        str(file),
                        number,
                        f"step {fields[2][:40]} is beyond the largest storable step {MAX_STEP} "
                        "(2**63 - 1); line skipped",
                    )
                )
                return None
        if problem is not None:
            self._report(
                Malformed(
                    str(file),
                    number,
                    "not an MLflow metric line `timestamp value step` (ms since the epoch, a "
                    f"number, a whole step >= 0): {problem}; line skipped, fix or delete it",
                )
            )
            return None
        # Two fields (`timestamp value`, MLflow 1.x) are step 0: MLflow's own reader takes
        # them so (mlflow-skinny 3.18.0, mlflow/store/tracking/file_store.py,
        # FileStore._get_metric_from_line: 2, 3 or 5 fields, `step = int(parts[2]) if
        # len(parts) == 3 else 0`). Its 5-field lines (`_log_run_metric`: `timestamp value
        # step dataset digest`) carry the step third too, which is read here, not taken as 0.
        step = int(fields[2]) if len(fields) >= 3 else 0
        return step, value, at


def _is_int(text: str) -> bool:
    """Whether `text` is an integer as MLflow writes one (`int()` of it works)."""
    try:
        int(text)
    except ValueError:
        return False
    return True
