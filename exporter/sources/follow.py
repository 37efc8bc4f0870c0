"""Read every log under a set of paths, now and as it grows.

`LogSet.poll()` searches the paths again each time, so files that appear later (SB3 starts a new
event file when a run is resumed; a job writes a new JSONL after a restart) are picked up. Each
file keeps its own reader, which follows rotation and truncation (see `tail`). Call `poll(final=True)`
once to import, or repeatedly to follow.

Given the positions an earlier reader saved (`positions`, keyed by absolute path), a file is read
from its saved position when it is still the same file, and from its start otherwise (truncated,
rotated, replaced). `position(log)` gives the position to save once a file's records are stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from ..schema import SourcePosition
from .discover import Format, LogFile, Sniffed, Source, discover, open_source
from .linefile import LineFileSource
from .record import Malformed, Record
from .run_end import EndMark
from .scalar_block import ScalarBlock, blocks_of
from .tensorboard import TensorBoardSource

__all__ = ["LogSet", "path_key"]


def path_key(path: Path) -> str:
    """The key a file's saved position is stored under: its absolute path."""
    return os.fsencode(os.path.abspath(path)).decode("utf-8", errors="backslashreplace")


class LogSet:
    """The logs under some paths, each read incrementally."""

    def __init__(
        self,
        paths: Sequence[Path],
        report: Callable[[Malformed], None],
        *,
        fmt: Format | Literal["auto"] = "auto",
        pattern: str | re.Pattern[str] | None = None,
        step_key: str | None = None,
        positions: Mapping[str, SourcePosition] | None = None,
        cadence: int | None = None,
        on_unreadable: Callable[[Path], None] | None = None,
    ) -> None:
        self._positions = dict(positions or {})
        self._on_unreadable = on_unreadable
        self._unreadable: set[Path] = set()
        self.resumed: list[LogFile] = []
        """Files read on from a saved position rather than from their start."""
        self._paths = tuple(paths)
        self._report = report
        self._fmt: Format | Literal["auto"] = fmt
        self._pattern = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        self._step_key = step_key
        self._cadence = cadence
        self._sources: dict[Path, tuple[LogFile, Source]] = {}
        self._sniffed: Sniffed = {}

    @property
    def files(self) -> list[LogFile]:
        return [log for log, _ in self._sources.values()]

    def refresh(self) -> list[LogFile]:
        """Search the paths again; open and return the log files not seen before."""
        new: list[LogFile] = []
        denied: set[Path] = set()
        found = discover(
            self._paths,
            self._fmt,
            pattern=self._pattern,
            sniffed=self._sniffed,
            unreadable=denied,
            step_key=self._step_key,
        )
        if self._on_unreadable is not None:
            # each said once while it stays unreadable (a follower searches every poll)
            for path in sorted(denied - self._unreadable):
                self._on_unreadable(path)
        self._unreadable = denied
        for log in found:
            if log.path not in self._sources:
                source = open_source(
                    log,
                    self._report,
                    pattern=self._pattern,
                    step_key=self._step_key,
                    cadence=self._cadence,
                )
                self._sources[log.path] = (log, source)
                saved = self._positions.pop(path_key(log.path), None)
                if saved is not None and source.resume(saved):
                    self.resumed.append(log)
                new.append(log)
        return new

    @property
    def passed_over(self) -> list[Path]:
        """Text files the searches looked into and did not take: their first megabyte held no
        metric line a known trainer prints (a trainer whose console logger is off, another
        tool's output)."""
        return sorted(p for p, (_, _, found) in self._sniffed.items() if not found)

    def position(self, log: LogFile) -> SourcePosition | None:
        """How far `log` has been read, keyed by its absolute path (None if nothing was read)."""
        entry = self._sources.get(log.path)
        if entry is None:
            return None
        position = entry[1].position()
        return None if position is None else replace(position, path=path_key(log.path))

    def facts(self, log: LogFile) -> dict[str, object]:
        """What reading `log` established about its run (`LineFileSource.facts`, a tracker
        run's `facts`: its config, how it ended)."""
        entry = self._sources.get(log.path)
        facts = None if entry is None else getattr(entry[1], "facts", None)
        return dict(facts()) if callable(facts) else {}

    def poll(self, *, final: bool = False) -> Iterator[tuple[LogFile, Iterable[Record]]]:
        """For each known file (after a refresh), the Records written since the last poll.

        Consume each file's records before moving to the next pair.
        """
        self.refresh()
        for log, source in list(self._sources.values()):
            yield log, source.poll(final=final)

    def poll_blocks(
        self, *, final: bool = False
    ) -> Iterator[tuple[LogFile, Iterable[Record | ScalarBlock | SourcePosition | EndMark]]]:
        """Like `poll`, with runs of steps as `ScalarBlock`s where a source reads them so (event
        files), and now and then the position a text log was read to (`SourcePosition`, with
        the `path_key` of its file) among its records."""
        self.refresh()
        for log, source in list(self._sources.values()):
            if isinstance(source, TensorBoardSource):
                yield log, source.poll_blocks(final=final)
            elif isinstance(source, LineFileSource) and log.format == "console":
                # a console line is one whole step: its steps go on as columns, as an event
                # file's do (a run takes a block in one piece: `Run.log_block`)
                marked = self._keyed(log, source.poll_marked(final=final))
                yield log, blocks_of(marked)  # type: ignore[misc]
            elif isinstance(source, LineFileSource):
                yield log, self._keyed(log, source.poll_marked(final=final))
            else:
                yield log, source.poll(final=final)

    @staticmethod
    def _keyed(
        log: LogFile, items: Iterable[Record | SourcePosition | EndMark]
    ) -> Iterator[Record | SourcePosition | EndMark]:
        key = path_key(log.path)
        for item in items:
            yield replace(item, path=key) if isinstance(item, SourcePosition) else item

    def close(self) -> None:
        for _, source in self._sources.values():
            source.close()
        self._sources.clear()
