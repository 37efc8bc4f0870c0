"""Find log files under the paths a user names and tell which format each one is.

A directory is searched recursively (hidden folders skipped). With `--format auto` the format
comes from the file name and, where the name is not enough, its first line:
`events.out.tfevents.*` is TensorBoard; `*.jsonl`, `*.ndjson` and RLlib's `result.json` are
JSON Lines (another `*.json` too when its first line is a JSON object); a `*.csv` whose header
has `time/total_timesteps` is SB3's progress.csv; `*.log`, `*.txt`, `*.out`, `*.err` are read with the
`--pattern` regex when one is given, else as a trainer's console log when their first megabyte
holds a metric line verl, the Hugging Face Trainer or OpenRLHF prints (`console.py`; the first
line is often a banner, so content decides, not the first line); a Hugging Face / TRL `trainer_state.json` is read by its
output folder (one run, however many checkpoint copies it holds). Rotated copies (`train.log.1`, `*.gz`) are never picked up,
so a follower does not read a log twice after rotation. A file's run is its folder's name.

Other trackers' runs are one log each, and nothing inside them is searched: an MLflow file
store's run folder (`mlruns/<experiment>/<run>/`, `mlflow_files.py`; an experiment folder is
searched only for its runs, not its models or traces) and a W&B run folder's `run-<id>.wandb`
(`wandb_offline.py`; its `files/output.log` is not read as a console log as well). Their run is
the name the tracker gave it (its id when it has none); of several runs given one name, the
first started keeps it and the others are told apart by their id's first 8 characters.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from ..schema import SourcePosition
from .console import CONSOLE_TRAINERS, SNIFF_BYTES, ConsoleParser, looks_like_console_log
from .errors import UnreadableLog
from .jsonl import JsonlParser
from .linefile import LineFileSource
from .lines import LineParser
from .mlflow_files import MlflowRunSource, RunIdentity, is_mlflow_run, mlflow_identity
from .record import Malformed, Record
from .regex_text import RegexParser
from .sb3_csv import SB3_STEP_KEY, Sb3CsvParser
from .tensorboard import TensorBoardSource, is_event_file
from .trainer_state import STATE_FILE, TrainerStateSource, run_folder
from .wandb_offline import WandbRunSource, is_wandb_log, wandb_identity

__all__ = [
    "FORMATS",
    "TRACKER_FORMATS",
    "Format",
    "LogFile",
    "Source",
    "detect_format",
    "discover",
    "last_modified",
    "open_source",
]

Format = Literal[
    "tensorboard", "jsonl", "sb3-csv", "regex", "trainer-state", "console", "mlflow", "wandb"
]
FORMATS: tuple[Format, ...] = (
    "tensorboard",
    "jsonl",
    "sb3-csv",
    "regex",
    "trainer-state",
    "console",
    "mlflow",
    "wandb",
)
TRACKER_FORMATS: tuple[Format, ...] = ("mlflow", "wandb")
"""Formats whose log is one run of another tracker, named as that tracker named it."""

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_TEXT_SUFFIXES = (".log", ".txt", ".out", ".err")

Sniffed = dict[Path, tuple[int, int, bool]]
"""Text files already looked at for console metric lines: path -> (size, mtime_ns, found).
A follower keeps one, so a text file without metrics is read again only once it has changed."""
_ROTATED = re.compile(r"\.(\d+|gz|bz2|xz|zst)$")


class Source(Protocol):
    """One log file read incrementally."""

    path: Path

    def poll(self, *, final: bool = False) -> Iterator[Record]: ...

    def position(self) -> SourcePosition | None:
        """How far the file has been read (None before anything was read)."""
        ...

    def resume(self, position: SourcePosition) -> bool:
        """Before the first poll: go on from `position` if it is still the same file."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LogFile:
    """A log file found under a user path, its format and the run it belongs to by default."""

    path: Path
    format: Format
    name: str | None = None
    """The run's name when the log itself gives it (a tracker's run), else None."""

    @property
    def run(self) -> str:
        if self.name is not None:
            return self.name
        # A folder name that is not UTF-8 arrives with lone surrogates, which no store can
        # hold: its bytes are written as \x.. escapes instead.
        if self.format == "trainer-state":  # an output folder, or a state file in it
            folder = self.path if self.path.is_dir() else run_folder(self.path.resolve())
            name = folder.resolve().name or "run"
        else:
            name = self.path.resolve().parent.name or "run"
        return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def _first_line(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            # a byte order mark (a file saved by an editor) is not part of the first line
            return fh.readline(1 << 16).decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    except OSError:
        return ""


def _is_json_object(line: str) -> bool:
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def detect_format(
    path: Path,
    *,
    pattern: str | None = None,
    sniffed: Sniffed | None = None,
    step_key: str | None = None,
) -> Format | None:
    """The format of one file by its name and first line (a text log by its content), or None
    when it is not a known log. `step_key`: the user's step column, which makes a CSV whose
    header has it a log as SB3's `time/total_timesteps` does."""
    name = path.name
    if is_event_file(path):
        return "tensorboard"
    if is_wandb_log(path):
        return "wandb"
    if path.is_dir():
        return "mlflow" if is_mlflow_run(path) else None
    if _ROTATED.search(name):
        return None
    lower = name.lower()
    if name == STATE_FILE:
        return "trainer-state"
    if lower.endswith(_JSONL_SUFFIXES) or lower == "result.json":
        return "jsonl"
    if lower.endswith(".json"):
        return "jsonl" if _is_json_object(_first_line(path)) else None
    if lower.endswith(".csv"):
        header = _first_line(path).split(",")
        return "sb3-csv" if SB3_STEP_KEY in header or (step_key and step_key in header) else None
    if lower.endswith(_TEXT_SUFFIXES):
        if pattern is not None:
            return "regex"
        return "console" if _is_console(path, sniffed) else None
    return None


def _is_console(path: Path, sniffed: Sniffed | None) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    seen = None if sniffed is None else sniffed.get(path)
    if seen is not None and seen[:2] == (st.st_size, st.st_mtime_ns):
        return seen[2]
    if seen is not None and seen[0] >= SNIFF_BYTES and st.st_size >= seen[0]:
        return seen[2]  # its first megabyte was looked at already and held no metric line
    found = looks_like_console_log(path)
    if sniffed is not None:
        sniffed[path] = (st.st_size, st.st_mtime_ns, found)
    return found


def _matches(path: Path, fmt: Format, pattern: str | None) -> bool:
    """Whether a file found in a directory search belongs to an explicitly chosen format."""
    lower = path.name.lower()
    if fmt == "mlflow" or path.is_dir():
        return fmt == "mlflow" and path.is_dir() and is_mlflow_run(path)
    if fmt == "wandb" or is_wandb_log(path):
        return fmt == "wandb" and is_wandb_log(path)
    if fmt == "tensorboard":
        return is_event_file(path)
    if _ROTATED.search(lower) or is_event_file(path):
        return False
    if fmt == "trainer-state":
        return path.name == STATE_FILE
    if fmt == "jsonl":
        return lower.endswith((*_JSONL_SUFFIXES, ".json")) and path.name != STATE_FILE
    if fmt == "sb3-csv":
        return lower.endswith(".csv")
    return lower.endswith(_TEXT_SUFFIXES)  # regex and console


def _walk(root: Path, unreadable: set[Path] | None = None) -> Iterator[Path]:
    """Files under `root`, and the run folders of an MLflow store (nothing inside them); the
    folders and files this process may not read go to `unreadable` instead (a log written with
    a private umask, read by a sidecar under another uid: say so rather than skip it unsaid)."""

    def denied(exc: OSError) -> None:
        if unreadable is not None and isinstance(exc, PermissionError) and exc.filename:
            unreadable.add(Path(exc.filename))

    for folder, dirs, files in os.walk(root, onerror=denied):
        here = Path(folder)
        if is_mlflow_run(here):
            dirs[:] = []
            yield here
            continue
        runs = [name for name in sorted(files) if is_wandb_log(Path(name))]
        if runs:  # a W&B run folder: its log, not its console copy or debug logs
            # Taken even when not a regular file (unlike the files below, skipped unsaid): the
            # folder is a run's, so its reader (`leveldb_log.py`) refuses a FIFO, socket or
            # device with a message naming it, without opening it for a read that would block.
            dirs[:] = []
            yield from (here / name for name in runs)
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if (here / "meta.yaml").is_file():
            # an MLflow experiment: its runs, not its logged models' or traces' files
            experiment = [d for d in dirs if is_mlflow_run(here / d)]
            if experiment:
                dirs[:] = experiment
                continue
        for name in sorted(files):
            path = Path(folder) / name
            if name.startswith(".") or not _is_regular(path):
                continue
            if unreadable is not None and not os.access(path, os.R_OK):
                unreadable.add(path)
                continue
            yield path


def _is_regular(path: Path) -> bool:
    """A regular file (or a link to one): a FIFO, socket or device in a log tree would block
    or never end when read, so it is never a log."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def discover(
    paths: Iterable[Path],
    fmt: Format | Literal["auto"] = "auto",
    *,
    pattern: str | None = None,
    sniffed: Sniffed | None = None,
    unreadable: set[Path] | None = None,
    step_key: str | None = None,
) -> list[LogFile]:
    """Every log file under `paths`, in a stable order; raise UnreadableLog for a bad path.

    A file named directly is always taken (in the chosen format, or the detected one); files
    found in a directory search are taken only when they are logs of the format. With
    `unreadable`, the folders and files of the search this process may not read are added to it
    (whatever their names: what cannot be read cannot be told apart from a log).
    """
    found: dict[Path, LogFile] = {}
    for root in paths:
        if not root.exists():
            raise UnreadableLog(f"{root}: no such file or directory; check the path")
        if not root.is_dir() and not _is_regular(root):
            raise UnreadableLog(
                f"{root}: not a regular file (a FIFO, socket or device); name a log file or a "
                "folder of logs"
            )
        if root.is_file():
            chosen = fmt if fmt != "auto" else _detect_named(root, pattern, step_key)
            found.setdefault(root, LogFile(root, chosen))
            continue
        if not os.access(root, os.R_OK | os.X_OK):
            raise UnreadableLog(f"{root}: directory is not readable; check its permissions")
        for path in _walk(root, unreadable):
            if fmt == "auto":
                kind = detect_format(path, pattern=pattern, sniffed=sniffed, step_key=step_key)
            else:
                kind = fmt if _matches(path, fmt, pattern) else None
            if kind == "trainer-state":  # the output folder, read as one log
                path = run_folder(path)
            if kind is not None:
                found.setdefault(path, LogFile(path, kind))
    return _name_tracker_runs(list(found.values()))


def _identity(log: LogFile) -> RunIdentity:
    return mlflow_identity(log.path) if log.format == "mlflow" else wandb_identity(log.path)


def _name_tracker_runs(logs: list[LogFile]) -> list[LogFile]:
    """Give each tracker run its tracker's name: of runs of one name (distinct ids), the
    first started keeps it and the others get `-<id[:8]>`; a run without a name is its id.
    Logs of one id (a W&B run resumed in a second folder) are one run."""
    idents = {log.path: _identity(log) for log in logs if log.format in TRACKER_FORMATS}
    first: dict[str, RunIdentity] = {}
    for ident in sorted(idents.values(), key=lambda i: (i.started, i.run_id)):
        if ident.name is not None:
            first.setdefault(ident.name, ident)
    out = []
    for log in logs:
        found = idents.get(log.path)
        if found is None:
            out.append(log)
            continue
        ident = found
        if ident.name is None:
            name = ident.run_id
        elif first[ident.name].run_id == ident.run_id:
            name = ident.name
        else:
            name = f"{ident.name}-{ident.run_id[:8]}"
        out.append(replace(log, name=os.fsencode(name).decode("utf-8", "backslashreplace")))
    return out


def last_modified(log: LogFile) -> float:
    """When the log last changed: an MLflow run folder's newest metric file (appending to a
    file leaves its folder's time alone), else the file's (folder's) own time."""
    paths = [log.path]
    if log.format == "mlflow":
        paths += [Path(f, n) for f, _, names in os.walk(log.path / "metrics") for n in names]
    newest = 0.0
    for path in paths:
        with suppress(OSError):
            newest = max(newest, path.stat().st_mtime)
    return newest


def _detect_named(path: Path, pattern: str | None, step_key: str | None = None) -> Format:
    detected = detect_format(path, pattern=pattern, step_key=step_key)
    if detected is not None:
        return detected
    if pattern is not None:
        return "regex"
    first = _first_line(path)
    if _is_json_object(first):
        return "jsonl"
    if SB3_STEP_KEY in first.split(","):
        return "sb3-csv"
    if looks_like_console_log(path):
        return "console"
    raise UnreadableLog(
        f"{path}: cannot tell its log format: its name is not a known log's, and its first "
        f"{SNIFF_BYTES >> 20} MB hold no metric line {CONSOLE_TRAINERS} prints; pass --format "
        "(tensorboard, jsonl, sb3-csv, console, or regex with --pattern)"
    )


def open_source(
    log: LogFile,
    report: Callable[[Malformed], None],
    *,
    pattern: str | None = None,
    step_key: str | None = None,
    cadence: int | None = None,
) -> Source:
    """A reader for one log file; raises BadPattern for a regex log without a usable pattern.
    `cadence`: a console log's logging steps, when its user gives them."""
    if log.format == "tensorboard":
        return TensorBoardSource(log.path, report)
    if log.format == "trainer-state":
        return TrainerStateSource(log.path, report)
    if log.format == "mlflow":
        return MlflowRunSource(log.path, report)
    if log.format == "wandb":
        return WandbRunSource(log.path, report)
    parser: LineParser
    if log.format == "console":
        # a trainer's printed output: its tracebacks and closing lines count (run_end.py)
        return LineFileSource(log.path, ConsoleParser(cadence=cadence), report, console=True)
    if log.format == "jsonl":
        parser = JsonlParser(step_key)
    elif log.format == "sb3-csv":
        parser = Sb3CsvParser(step_key)
    else:
        if pattern is None:
            raise UnreadableLog(f"{log.path}: a text log needs --pattern REGEX to be read")
        parser = RegexParser(pattern)
        # a text log is a trainer's printed output: its tracebacks and closing lines count
        return LineFileSource(log.path, parser, report, console=True)
    return LineFileSource(log.path, parser, report)
