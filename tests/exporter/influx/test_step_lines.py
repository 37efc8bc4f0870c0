"""The import's batch renderer writes the same points as the general LineRenderer, for any names
and numbers, and the numbers it writes read back exactly from a real InfluxDB."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.influx.forwarder import LineRenderer
from exporter.influx.step_lines import StepRenderer
from exporter.influx.writers import make_writer
from exporter.schema import SampleRow

_Point = dict[tuple[str, str], dict[str, bytes]]


def _split(text: str, sep: str) -> list[str]:
    """Split on `sep` where it is not escaped by a backslash (escapes are kept)."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _points(body: str) -> _Point:
    """Line protocol (numeric fields only) as {(series, timestamp): {field: value bits}}; a later
    line for the same series and time overwrites the fields it names, as InfluxDB does."""
    points: _Point = {}
    for line in body.split("\n"):
        if not line:
            continue
        series, fields, timestamp = _split(line, " ")
        point = points.setdefault((series, timestamp), {})
        for item in _split(fields, ","):
            key, value = _split(item, "=")
            number = int(value[:-1]) if value.endswith("i") else float(value)
            point[key] = (
                struct.pack("<q", number) if isinstance(number, int) else struct.pack("<d", number)
            )
    return points


_names = st.sampled_from(
    [
        "policy_kl",
        "value_loss",
        "step",
        "wall_time",
        "a b",
        "x,y",
        "k=v",
        "%s",
        "{0}",
        "é中",
        'q"',
        "b\\",
    ]
)
_measurements = st.sampled_from(["policy", "value", "unregistered", "a b", "m%d", "{x}"])
_finite = st.floats(allow_nan=False, allow_infinity=False)
_call = st.tuples(
    st.lists(
        st.tuples(_measurements, st.sampled_from(["", "0", "1"]), _names, _finite),
        min_size=1,
        max_size=8,
    ),
    _finite,
)


@settings(max_examples=300, deadline=None)
@given(
    run=st.text(min_size=1, max_size=12),
    project=st.one_of(st.none(), st.text(max_size=8)),
    rank=st.sampled_from([-1, 0, 3]),
    calls=st.lists(_call, min_size=1, max_size=6),
    first_step=st.integers(0, 2**62),
)
def test_batch_lines_are_the_points_line_renderer_writes(
    run: str, project: str | None, rank: int, calls: list[Any], first_step: int
) -> None:
    renderer = StepRenderer(LineRenderer(), project)
    everything: list[SampleRow] = []
    for i, (rows, wall_time) in enumerate(calls):
        step = first_step + i  # one call per step, as an import makes them
        call: list[SampleRow] = [
            (run, rank, step, m, gpu, field, value, wall_time) for m, gpu, field, value in rows
        ]
        renderer.add(call)
        everything += call
    body = renderer.take()
    assert body is not None
    expected = "\n".join(LineRenderer().render(everything, (), {run: project}))
    assert _points(body) == _points(expected)


def test_a_shape_seen_again_reuses_its_plan_and_still_renders_its_own_values() -> None:
    renderer = StepRenderer(LineRenderer(), None)
    for step, value in ((1, 0.25), (2, 1e-7), (3, -0.0)):
        renderer.add([("r", -1, step, "policy", "", "policy_kl", value, 1.7e9 + step)])
    body = renderer.take()
    assert body == (
        "policy,run=r policy_kl=0.25,step=1i,wall_time=1700000001.0 1\n"
        "policy,run=r policy_kl=1e-7,step=2i,wall_time=1700000002.0 2\n"
        "policy,run=r policy_kl=-0.0,step=3i,wall_time=1700000003.0 3"
    )
    assert renderer.take() == ""  # taking empties it


def test_a_number_it_cannot_write_hands_the_batch_back() -> None:
    renderer = StepRenderer(LineRenderer(), None)
    renderer.add([("r", -1, 1, "policy", "", "policy_kl", math.nan, 1.0)])
    assert renderer.take() is None
    renderer.add([("r", -1, 2**70, "policy", "", "policy_kl", 0.5, 1.0)])
    assert renderer.take() is None


def test_extreme_numbers_read_back_exactly_from_influxdb(influx: Any, tmp_path: Path) -> None:
    numbers = [
        0.0,
        -0.0,
        1e-7,
        1e16,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        -123456789.125,
        0.1,
        float(struct.unpack("<f", struct.pack("<f", 0.1))[0]),
    ]
    renderer = StepRenderer(LineRenderer(), "proj")
    for step, value in enumerate(numbers):
        renderer.add([("odd run", -1, step, "unregistered", "", "x", value, 1.7e9 + step)])
    body = renderer.take()
    assert body is not None
    writer = make_writer(influx.settings(tmp_path))
    assert writer is not None
    writer.write(body.encode())
    writer.close()
    rows = influx.query('SELECT "x", "step" FROM "unregistered" WHERE "run" = \'odd run\'')
    assert [r["x"] for r in rows] == numbers
    assert [r["step"] for r in rows] == list(range(len(numbers)))
