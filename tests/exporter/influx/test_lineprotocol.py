"""The line-protocol serializer agrees with influxdb-client's and survives a real InfluxDB."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from influxdb_client.client.write.point import Point
from influxdb_client.domain.write_precision import WritePrecision

import exporter
from exporter.influx.lineprotocol import format_line

# influxdb-client writes tabs and carriage returns in names as `\t` / `\r`, which InfluxDB
# stores as a backslash and a letter; the exporter writes them raw (stored exactly): see
# test_tabs_and_carriage_returns_in_names_are_stored_exactly
_names = st.text(min_size=1, max_size=20).filter(
    lambda s: not s.startswith("#") and "\t" not in s and "\r" not in s
)
_tag_values = st.text(min_size=0, max_size=20).filter(lambda s: "\t" not in s and "\r" not in s)
_field_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.text(max_size=30),
)


@settings(max_examples=400, deadline=None)
@given(
    measurement=_names,
    tags=st.dictionaries(_names, _tag_values, max_size=4),
    # influxdb-client writes a field key ending in a backslash unchanged, which InfluxDB refuses
    fields=st.dictionaries(
        _names.filter(lambda s: not s.endswith("\\")), _field_values, min_size=1, max_size=5
    ),
    timestamp=st.integers(min_value=0, max_value=2**40),
)
def test_serializer_matches_influxdb_client_for_random_points(
    measurement: str, tags: dict[str, str], fields: dict[str, object], timestamp: int
) -> None:
    point = Point(measurement).time(timestamp, WritePrecision.S)
    for key, value in tags.items():
        point.tag(key, value)
    for key, value in fields.items():
        point.field(key, value)
    expected = point.to_line_protocol() or None
    assert format_line(measurement, tags, fields, timestamp) == expected  # type: ignore[arg-type]


def test_line_never_spans_two_lines_and_nonfinite_values_are_left_out() -> None:
    line = format_line("m x", {"run": "a\nb,c=d e"}, {"f\n": 1.5, "g": float("nan")}, 3)
    assert line == "m\\ x,run=a\\nb\\,c\\=d\\ e f\\n=1.5 3"
    assert format_line("m", {}, {"x": float("inf")}, 1) is None


def test_odd_run_names_and_event_texts_round_trip_through_influxdb(
    tmp_path: Path, reg: object, influx: object
) -> None:
    names = ["run with spaces,commas=equals", "运行-δ-🚀", 'quote"back\\slash']
    text = 'saved "ckpt", at\\path = x'
    settings = influx.settings(tmp_path)  # type: ignore[attr-defined]
    for name in names:
        with exporter.init(name, project="p q", registry=reg, settings=settings) as run:  # type: ignore[arg-type]
            run.log(3, {"losses/clipfrac": 0.25})
            run.event(3, "checkpoint", text)
            assert run.flush()
    rows = influx.query('SELECT "clip_fraction", "step" FROM "policy" GROUP BY "run"')  # type: ignore[attr-defined]
    assert sorted(r["run"] for r in rows) == sorted(names)
    assert all(r["clip_fraction"] == 0.25 and r["step"] == 3 and r["time"] == 3 for r in rows)
    events = influx.query('SELECT "text" FROM "events" GROUP BY "run", "kind"')  # type: ignore[attr-defined]
    assert sorted(r["run"] for r in events) == sorted(names)
    assert {r["text"] for r in events} == {text}


def test_names_influxdb_cannot_store_exactly_are_refused_not_altered(
    tmp_path: Path, reg: object, influx: object
) -> None:
    settings = influx.settings(tmp_path, policy="warn")  # type: ignore[attr-defined]
    for bad in ("ends\\", "two\nlines"):
        with pytest.raises(exporter.ConfigError, match="InfluxDB cannot store"):
            exporter.init(bad, registry=reg, settings=settings)  # type: ignore[arg-type]
    with exporter.init("r", registry=reg, settings=settings) as run:  # type: ignore[arg-type]
        run.log(1, {"odd\\": 2.5, "two\nlines": 1.0, "losses/clipfrac": 0.25})
        run.event(1, "checkpoint", "saved", **{"path\\": "a", "ok": "b"})
        assert run.flush()
        stats = run.stats
    assert stats.rejected == 2
    assert influx.query('SELECT * FROM "unregistered"') == []  # type: ignore[attr-defined]
    (event,) = influx.query('SELECT * FROM "events"')  # type: ignore[attr-defined]
    assert event["ok"] == "b" and "path " not in event and "path\\" not in event


def test_tabs_and_carriage_returns_in_names_are_stored_exactly(
    tmp_path: Path, reg: object, influx: object
) -> None:
    settings = influx.settings(tmp_path, policy="warn")  # type: ignore[attr-defined]
    name, metric = "run\tone\r", "my\tmetric"
    with exporter.init(name, registry=reg, settings=settings) as run:  # type: ignore[arg-type]
        run.log(1, {metric: 2.5, "losses/clipfrac": 0.25})
        assert run.flush()
    (row,) = influx.query('SELECT * FROM "unregistered"')  # type: ignore[attr-defined]
    assert row[metric] == 2.5 and row["run"] == name
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        assert box.fields(name, measurement="unregistered") == [metric]
