"""Log sources: TensorBoard event files, JSON Lines, SB3 progress.csv / progress.json, HF
`trainer_state.json`, trainers' console logs, text logs read with a regex, and other trackers'
local runs (an MLflow file store's run folders, W&B run logs), found by searching directories and followed
as they grow (rotation, truncation, new event files), each yielding `Record`s (one step's values
under the log's own names) or, for TensorBoard, `ScalarBlock`s (steps as columns).

`discover` finds and identifies files, `follow` keeps a set of them open across passes, `tail`
reads text files line by line with their read positions; one module per format. `run_end` says
what a log's lines or records tell about how the run ended (a traceback, a trainer's closing
record), for any reader of console text. `tb_sample` and `console_sample` read a sample of a long
event file's or console log's steps spread over the whole file, without reading it all (an
import's whole-run sketch).

May import: `exporter.errors` and `exporter.schema` (the read positions the store keeps) only:
a source knows the file, not what the names mean (`translate`) or where rows go (`store`).
"""

from .discover import (
    FORMATS,
    TRACKER_FORMATS,
    Format,
    LogFile,
    Source,
    detect_format,
    discover,
    open_source,
)
from .errors import BadPattern, SourceError, UnreadableLog
from .follow import LogSet
from .jsonl import STEP_KEYS, JsonlParser
from .linefile import LineFileSource
from .lines import BadLine, LineParser
from .record import Malformed, Record
from .regex_text import RegexParser, compile_pattern
from .run_end import EndMark, EndScanner, closing_record
from .sb3_csv import SB3_STEP_KEY, Sb3CsvParser
from .scalar_block import ScalarBlock
from .tail import Line, TextTail
from .tensorboard import TensorBoardSource

__all__ = [
    "FORMATS",
    "SB3_STEP_KEY",
    "STEP_KEYS",
    "TRACKER_FORMATS",
    "BadLine",
    "BadPattern",
    "EndMark",
    "EndScanner",
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
    "closing_record",
    "compile_pattern",
    "detect_format",
    "discover",
    "open_source",
]
