"""Read every log under a set of paths, now and as it grows.

`LogSet.poll()` searches the paths again each time, so files that appear later (SB3 starts a new
event file when a run is resumed; a job writes a new JSONL after a restart) are picked up. Each
file keeps its own reader, which follows rotation and truncation (see `tail`). Call `poll(final=True)`
once to import, or repeatedly to follow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from .discover import Format, LogFile, Source, discover, open_source
from .record import Malformed, Record

__all__ = ["LogSet"]


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
    ) -> None:
        self._paths = tuple(paths)
        self._report = report
        self._fmt: Format | Literal["auto"] = fmt
        self._pattern = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        self._step_key = step_key
        self._sources: dict[Path, tuple[LogFile, Source]] = {}

    @property
    def files(self) -> list[LogFile]:
        return [log for log, _ in self._sources.values()]

    def refresh(self) -> list[LogFile]:
        """Search the paths again; open and return the log files not seen before."""
        new: list[LogFile] = []
        for log in discover(self._paths, self._fmt, pattern=self._pattern):
            if log.path not in self._sources:
                source = open_source(
                    log, self._report, pattern=self._pattern, step_key=self._step_key
                )
                self._sources[log.path] = (log, source)
                new.append(log)
        return new

    def poll(self, *, final: bool = False) -> Iterator[tuple[LogFile, Iterable[Record]]]:
        """For each known file (after a refresh), the Records written since the last poll.

        Consume each file's records before moving to the next pair.
        """
        self.refresh()
        for log, source in list(self._sources.values()):
            yield log, source.poll(final=final)

    def close(self) -> None:
        for _, source in self._sources.values():
            source.close()
        self._sources.clear()
