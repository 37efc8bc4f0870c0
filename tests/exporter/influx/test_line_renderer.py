"""The forwarder's batch renderer writes the points `format_line` writes, one per (measurement,
tags, step), whatever the values: its floats come from one `orjson` call per batch, so the text
may differ from `repr`'s ("1.0" for "1", "1e-7" for "1e-07"); InfluxDB reads the same number."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.influx.forwarder import LineRenderer
from exporter.influx.lineprotocol import format_line
from exporter.schema import NO_RANK, PROJECT_TAG, RANK_TAG, RUN_TAG


def _split(text: str, sep: str) -> list[str]:
    """`text` cut at each `sep` that is neither escaped nor inside a quoted string."""
    parts, current, quoted, i = [], [], False, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        if c == sep and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return parts


def _value(text: str) -> Any:
    if text.startswith('"'):
        return ("str", text)
    if text in ("true", "false"):
        return ("bool", text)
    if text.endswith("i"):
        return ("int", int(text[:-1]))
    return ("float", float(text))


def _point(line: str) -> tuple[str, dict[str, Any], str]:
    """(measurement and tags, fields as InfluxDB reads them, timestamp)."""
    head, fields, stamp = _split(line, " ")
    pairs = [_split(pair, "=") for pair in _split(fields, ",")]
    return head, {key: _value(value) for key, value in pairs}, stamp


_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e6, max_value=1e6).map(round).map(float),  # integral floats: "1.0"
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.text(alphabet='ab ,="\\x', max_size=6),
)
_rows = st.lists(
    st.tuples(
        st.sampled_from(["run", "run b"]),
        st.sampled_from([NO_RANK, 0, 3]),
        st.integers(min_value=0, max_value=4),
        st.sampled_from(["reward", "m,x"]),
        st.sampled_from(["", "0"]),
        st.sampled_from(["a", "b c", "k=v", "step", "wall_time"]),
        _values,
        st.floats(min_value=0, max_value=2e9),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(rows=_rows)
def test_a_batch_renders_the_points_format_line_writes_for_its_rows(rows: list[Any]) -> None:
    projects = {"run": "proj", "run b": None}
    expected: dict[tuple[Any, ...], list[Any]] = {}
    for run, rank, step, measurement, gpu, field, value, wall in rows:
        point = expected.setdefault((measurement, run, rank, gpu, step), [wall, {}])
        point[1][field] = value  # a field given twice in a point: the later one
        point[0] = max(point[0], wall)
    want = []
    for (measurement, run, rank, gpu, step), (wall, fields) in expected.items():
        tags = {RUN_TAG: run, PROJECT_TAG: projects[run], "gpu": gpu}
        if rank != NO_RANK:
            tags[RANK_TAG] = str(rank)
        line = format_line(measurement, tags, {**fields, "step": step, "wall_time": wall}, step)
        assert line is not None
        want.append(_point(line))
    got = [_point(line) for line in LineRenderer().render(rows, (), projects)]
    assert got == want
