"""Log sources for the sidecar: TensorBoard event files, JSON Lines, SB3 progress.csv and text
logs read with a regex, found by searching directories and followed as they grow."""

from .discover import FORMATS, Format, LogFile, Source, detect_format, discover, open_source
from .errors import BadPattern, SourceError, UnreadableLog
from .follow import LogSet
from .jsonl import STEP_KEYS, JsonlParser
from .linefile import LineFileSource
from .lines import BadLine, LineParser
from .record import Malformed, Record
from .regex_text import RegexParser, compile_pattern
from .sb3_csv import SB3_STEP_KEY, Sb3CsvParser
from .scalar_block import ScalarBlock
from .tail import Line, TextTail
from .tensorboard import TensorBoardSource

__all__ = [
    "FORMATS",
    "SB3_STEP_KEY",
    "STEP_KEYS",
    "BadLine",
    "BadPattern",
    "Format",
    "JsonlParser",
    "Line",
    "LineFileSource",
    "LineParser",
    "LogFile",
    "LogSet",
    "Malformed",
    "Record",
    "RegexParser",
    "Sb3CsvParser",
    "ScalarBlock",
    "Source",
    "SourceError",
    "TensorBoardSource",
    "TextTail",
    "UnreadableLog",
    "compile_pattern",
    "detect_format",
    "discover",
    "open_source",
]
