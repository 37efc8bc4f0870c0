"""What a trainer's console output looks like around its metrics, and how its values are spelled.

A console log is what a job printed to a terminal, redirected to a file: colour codes (ANSI
escape sequences), progress bars redrawn in place with carriage returns (tqdm), a launcher's
prefix on every line (Ray's `(TaskRunner pid=123)`, torchrun's `[rank0]:` or `[default0]:`,
a logging timestamp). `strip_ansi` takes away the colour codes; split at its carriage returns,
what a terminal would show of a line is the last segment, the earlier ones overdrawn progress
bars, which `progress(segment)` reads (the Hugging Face Trainer's bar counts optimizer steps).

`number(text)` reads one printed value: a float or int as Python prints it (`0.5`, `1e-06`,
`nan`, `inf`), and the reprs numpy 2 and torch give a scalar (`np.float64(0.5)`,
`np.int64(3)`, `tensor(0.5)`, `tensor(0.5, device='cuda:0')`), which newer verl and TRL print.
"""

from __future__ import annotations

import re

__all__ = ["Progress", "number", "progress", "strip_ansi"]

# CSI sequences (colours, cursor moves) and the two-character escapes terminals also take.
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])")
# A tqdm bar: `  5%|▌         | 5/100 [00:10<03:10,  2.00s/it, pg=0.1]`. The description
# before the percentage (`Processed prompts:`) is kept: it tells bars apart.
_BAR = re.compile(
    r"(?P<desc>[^|\r]*?)\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<info>[^\]]*)\]?"
)
_POSTFIX = re.compile(r"(?<![\w/.])[A-Za-z_][\w/]*=")
_WRAPPED = re.compile(r"^(?:np\.|numpy\.)?\w*\(\s*([^,()]*?)\s*(?:,[^()]*)?\)$")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


class Progress:
    """One reading of a progress bar: `n` of `total`, its description, and what follows the
    timing inside its brackets (tqdm's postfix, `k=v` pairs)."""

    __slots__ = ("desc", "n", "postfix", "total")

    def __init__(self, desc: str, n: int, total: int, postfix: str) -> None:
        self.desc = desc
        self.n = n
        self.total = total
        self.postfix = postfix

    def __repr__(self) -> str:
        return f"Progress({self.desc!r}, {self.n}/{self.total}, {self.postfix!r})"


def progress(segment: str) -> Progress | None:
    """The progress bar a segment draws, or None when it draws none."""
    if "%|" not in segment:
        return None
    match = _BAR.search(segment)
    if match is None:
        return None
    info = match.group("info") or ""
    # `00:10<03:10,  2.00s/it, pg=0.1, rm=2`: the postfix follows the rate (its first `k=`;
    # quoted bars are often trimmed of the rate: `[00:02<?, pg=0.1]`)
    start = _POSTFIX.search(info)
    postfix = info[start.start() :].strip() if start is not None else ""
    desc = match.group("desc").strip().rstrip(":").strip()
    return Progress(desc, int(match.group("n")), int(match.group("total")), postfix)


def number(text: str) -> float | None:
    """A printed scalar as a float, or None when the text is not one number."""
    raw = text.strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    if raw.endswith(")"):
        match = _WRAPPED.match(raw)
        if match is not None:
            try:
                return float(match.group(1))
            except ValueError:
                return None
    if raw in ("True", "False"):
        return None  # a flag, not a metric
    return None
