"""CleanRL's console lines: the episodic return of each episode that ended, at its global step.

CleanRL's single-file scripts print one line per finished episode beside the TensorBoard scalar
they write for it (vwxyzjn/cleanrl at fe8d8a03: `ppo.py`, `dqn.py`, `sac_continuous_action.py`,
...): `print(f"global_step={global_step}, episodic_return={info['episode']['r']}")`. The value is
a float, or, from gymnasium's `RecordEpisodeStatistics` in the versions CleanRL pins, a one-element
array printed as `[22.]`; a few scripts print `avg_episodic_return=`. Several envs can finish at
one step: each prints its line, and the step holds all of their returns, in order, as the
TensorBoard file does (`Record.values` holds a list). Many scripts and forks print more pairs on
the line (`episodic_length=`, read too; an episode count or an exploration rate, not read). A
value is read under the name the script
writes it to TensorBoard with right after printing it, `charts/episodic_return` (or
`charts/avg_episodic_return`, `charts/episodic_length`), so the run is known as CleanRL's and its names are its event
file's. The losses, the KL and the `SPS:` lines'
throughput are in the TensorBoard file only (an `SPS:` line prints no step).
"""

from __future__ import annotations

import re

from .console_text import number
from .lines import BadLine

__all__ = ["parse_cleanrl"]

_LINE = re.compile(
    r"(?<![\w/])global_step=(?P<step>[^,\s]*),\s*"
    r"(?P<rest>(?:.*?,\s*)?(?:avg_)?episodic_return=.*?)\s*$"
)
# `, name=` ends a value: a printed list's own commas are followed by a number, not a name
_PAIRS = re.compile(r",\s*(?=[A-Za-z_]\w*=)")
_READ = ("episodic_return", "avg_episodic_return", "episodic_length")
"""What is read of a line: the returns and lengths CleanRL also writes to TensorBoard (other
pairs some scripts print, an episode count, an exploration rate, are not metrics of the run)."""


def parse_cleanrl(segment: str) -> tuple[int, list[tuple[str, list[float]]]] | None:
    """(step, [(name, values), ...]) of a CleanRL episode line; None when the segment is none
    (raises BadLine for one whose step or a value read is not a number)."""
    if "global_step=" not in segment:
        return None
    match = _LINE.search(segment)
    if match is None:
        return None
    step = match.group("step")
    if not step.isdigit() or not step.isascii():
        raise BadLine(
            f"a CleanRL episode line whose global_step is {step!r}, not a step (a non-negative "
            "integer)"
        )
    read: list[tuple[str, list[float]]] = []
    for pair in _PAIRS.split(match.group("rest")):
        name, _, text = pair.partition("=")
        if name not in _READ:
            continue
        text = text.strip()
        inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        values = [number(p) for p in inner.replace(",", " ").split()] if inner.strip() else []
        if not values or any(v is None for v in values):
            raise BadLine(f"a CleanRL episode line whose {name} is not a number: {text!r}")
        # under the name the script writes the same value to TensorBoard with (`charts/...`)
        read.append((f"charts/{name}", [v for v in values if v is not None]))
    return int(step), read
