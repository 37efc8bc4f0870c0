"""A text log file read through a line parser: the Records of its new lines, problems reported."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

from ..schema import SourcePosition
from .lines import BadLine, LineParser, StreamParser
from .record import KeptNote, Malformed, Record
from .run_end import EndMark, EndScanner
from .tail import TextTail

__all__ = ["MARK_EVERY", "LineFileSource"]

MARK_EVERY = 10_000


class LineFileSource:
    """Incremental reader of one text log; malformed lines go to `report` with file:line."""

    def __init__(
        self,
        path: Path,
        parser: LineParser,
        report: Callable[[Malformed], None],
        *,
        console: bool = False,
    ) -> None:
        """`console`: the file is a trainer's printed output, whose other lines may say how the
        run ended (a traceback, a closing record: `EndMark`s among the records)."""
        self.path = path
        self._parser = parser
        self._report = report
        self._tail = TextTail(path)
        self._ends = EndScanner() if console else None

    def close(self) -> None:
        self._tail.close()

    def position(self) -> SourcePosition | None:
        return self._tail.position()

    def facts(self) -> dict[str, object]:
        """What the parser learned about the run from the file (a console log's step rule and
        closing summary), else nothing."""
        facts = getattr(self._parser, "facts", None)
        return dict(facts()) if callable(facts) else {}

    def resume(self, position: SourcePosition) -> bool:
        """Go on from a saved position (see `TextTail.resume`); the first line is given to the
        parser again, so a CSV knows its header. A console log is read from its start again:
        how its steps are placed depends on what came before (see `console.py`), and reading
        its steps again stores the same values at the same steps."""
        if isinstance(self._parser, StreamParser):
            return False
        if not self._tail.resume(position):
            return False
        self._parser.reset()
        head = position.head.rstrip(b"\n").decode("utf-8", errors="replace").rstrip("\r")
        with suppress(BadLine):
            self._parser.parse(head)
        self._parser.problems()  # said when that line was read first
        return True

    def poll(self, *, final: bool = False) -> Iterator[Record]:
        """Records of the lines written since the last poll; consume before polling again."""
        for item in self.poll_marked(final=final, every=0):
            if isinstance(item, Record):
                yield item

    def poll_marked(
        self, *, final: bool = False, every: int = MARK_EVERY
    ) -> Iterator[Record | SourcePosition | EndMark]:
        """Like `poll`, with the position reached after every `every` lines (0: never) among
        the records: saved with what was read before it, a reader killed during a long read
        goes on from there instead of from the start. A console log's lines that say how the
        run ended come as `EndMark`s."""
        parser = self._parser
        stream = parser if isinstance(parser, StreamParser) else None
        number = 0
        for count, line in enumerate(self._tail.poll(final=final), start=1):
            number = line.number
            if line.restart:
                parser.reset()
                if self._ends is not None:
                    self._ends.reset()
            if self._ends is not None:
                mark = self._ends.feed(line.text, line.number)
                if mark is not None:
                    yield mark
            try:
                if stream is not None:
                    yield from stream.feed(line.text, terminated=line.terminated)
                else:
                    record = parser.parse(line.text)
                    if record is not None:
                        yield record
            except BadLine as exc:
                self._report(Malformed(str(self.path), line.number, str(exc)))
            for problem in parser.problems():
                # (a line parser's problems are about values in a line it read: `LineProblems`)
                kept = isinstance(problem, KeptNote)
                self._report(
                    Malformed(str(self.path), line.number, problem, kept=kept, part=not kept)
                )
            if every and not count % every:
                if stream is not None:
                    yield from stream.flush()  # nothing held back behind a saved position
                position = self._tail.position()  # just past this line
                if position is not None:
                    yield position
        if stream is not None:
            # what a line held back is placed now: the read position saved after this poll
            # lies past its line (a console log is read again from its start, never from a
            # saved position: an SB3 table still open is held until its end, or the log's)
            yield from stream.flush(final=final)
            for problem in stream.problems():
                self._report(Malformed(str(self.path), number, problem))
