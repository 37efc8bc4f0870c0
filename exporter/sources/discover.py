"""Find log files under the paths a user names and tell which format each one is.

A directory is searched recursively (hidden folders skipped). With `--format auto` the format
comes from the file name and, where the name is not enough, its first line:
`events.out.tfevents.*` is TensorBoard; `*.jsonl`, `*.ndjson` and RLlib's `result.json` are
JSON Lines (another `*.json` too when its first line is a JSON object); a `*.csv` whose header
has `time/total_timesteps` is SB3's progress.csv; `*.log`, `*.txt`, `*.out` are read with the
`--pattern` regex when one is given; a Hugging Face / TRL `trainer_state.json` is read by its
output folder (one run, however many checkpoint copies it holds). Rotated copies (`train.log.1`, `*.gz`) are never picked up,
so a follower does not read a log twice after rotation. A file's run is its folder's name.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ..schema import SourcePosition
from .errors import UnreadableLog
from .jsonl import JsonlParser
from .linefile import LineFileSource
from .lines import LineParser
from .record import Malformed, Record
from .regex_text import RegexParser
from .sb3_csv import SB3_STEP_KEY, Sb3CsvParser
from .tensorboard import TensorBoardSource, is_event_file
from .trainer_state import STATE_FILE, TrainerStateSource, run_folder

__all__ = ["FORMATS", "Format", "LogFile", "Source", "detect_format", "discover", "open_source"]

Format = Literal["tensorboard", "jsonl", "sb3-csv", "regex", "trainer-state"]
FORMATS: tuple[Format, ...] = ("tensorboard", "jsonl", "sb3-csv", "regex", "trainer-state")

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_TEXT_SUFFIXES = (".log", ".txt", ".out")
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

    @property
    def run(self) -> str:
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
            return fh.readline(1 << 16).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def _is_json_object(line: str) -> bool:
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def detect_format(path: Path, *, pattern: str | None = None) -> Format | None:
    """The format of one file by its name and first line, or None when it is not a known log."""
    name = path.name
    if is_event_file(path):
        return "tensorboard"
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
        return "sb3-csv" if SB3_STEP_KEY in _first_line(path).split(",") else None
    if pattern is not None and lower.endswith(_TEXT_SUFFIXES):
        return "regex"
    return None


def _matches(path: Path, fmt: Format, pattern: str | None) -> bool:
    """Whether a file found in a directory search belongs to an explicitly chosen format."""
    lower = path.name.lower()
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
    return lower.endswith(_TEXT_SUFFIXES)


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and _is_regular(Path(folder) / name):
                yield Path(folder) / name


def _is_regular(path: Path) -> bool:
    """A regular file (or a link to one): a FIFO, socket or device in a log tree would block
    or never end when read, so it is never a log."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def discover(
    paths: Iterable[Path], fmt: Format | Literal["auto"] = "auto", *, pattern: str | None = None
) -> list[LogFile]:
    """Every log file under `paths`, in a stable order; raise UnreadableLog for a bad path.

    A file named directly is always taken (in the chosen format, or the detected one); files
    found in a directory search are taken only when they are logs of the format.
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
            chosen = fmt if fmt != "auto" else _detect_named(root, pattern)
            found.setdefault(root, LogFile(root, chosen))
            continue
        if not os.access(root, os.R_OK | os.X_OK):
            raise UnreadableLog(f"{root}: directory is not readable; check its permissions")
        for path in _walk(root):
            if fmt == "auto":
                kind = detect_format(path, pattern=pattern)
            else:
                kind = fmt if _matches(path, fmt, pattern) else None
            if kind == "trainer-state":  # the output folder, read as one log
                path = run_folder(path)
            if kind is not None:
                found.setdefault(path, LogFile(path, kind))
    return list(found.values())


def _detect_named(path: Path, pattern: str | None) -> Format:
    detected = detect_format(path, pattern=pattern)
    if detected is not None:
        return detected
    if pattern is not None:
        return "regex"
    first = _first_line(path)
    if _is_json_object(first):
        return "jsonl"
    if SB3_STEP_KEY in first.split(","):
        return "sb3-csv"
    raise UnreadableLog(
        f"{path}: cannot tell its log format from the name or first line; "
        "pass --format (tensorboard, jsonl, sb3-csv, or regex with --pattern)"
    )


def open_source(
    log: LogFile,
    report: Callable[[Malformed], None],
    *,
    pattern: str | None = None,
    step_key: str | None = None,
) -> Source:
    """A reader for one log file; raises BadPattern for a regex log without a usable pattern."""
    if log.format == "tensorboard":
        return TensorBoardSource(log.path, report)
    if log.format == "trainer-state":
        return TrainerStateSource(log.path, report)
    parser: LineParser
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
