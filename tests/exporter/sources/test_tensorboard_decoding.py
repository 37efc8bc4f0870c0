"""Event files decoded in batches (numpy framing, checksums and one-scalar decoding) give exactly
what protobuf decoding of every record gives, and damage is found where it is."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logmakers import write_event_file
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.util import tensor_util

from exporter.sources import Malformed, Record, ScalarBlock, TensorBoardSource
from exporter.sources.scalar_events import decode_scalar_events
from exporter.sources.tfrecord import RecordReader, masked_crc32c, masked_crc32c_rows

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def _frame(payload: bytes) -> bytes:
    length = _U64.pack(len(payload))
    return length + _U32.pack(masked_crc32c(length)) + payload + _U32.pack(masked_crc32c(payload))


# One event as the test writes it: (kind, tag, step, wall_time, value)
_kinds = st.sampled_from(["simple", "simple", "simple", "tensor", "two", "metadata", "other"])
_tags = st.one_of(
    st.sampled_from(["losses/approx_kl", "charts/SPS", "a", "", "rollout/ep_rew_mean"]),
    st.text(min_size=0, max_size=140),
)
_steps = st.one_of(
    st.integers(0, 300), st.integers(0, 2**62), st.integers(-(2**40), -1), st.just(0)
)
_walls = st.one_of(st.just(0.0), st.floats(1e9, 2e9), st.floats(allow_nan=False))
_values = st.floats(width=32)
_events = st.lists(st.tuples(_kinds, _tags, _steps, _walls, _values), max_size=60)


def _payload(kind: str, tag: str, step: int, wall: float, value: float) -> bytes:
    if kind == "other":
        return Event(wall_time=wall, step=step, file_version="brain.Event:2").SerializeToString()
    if kind == "tensor":
        summary = scalar_pb(tag, value)
    elif kind == "two":
        summary = Summary(
            value=[
                Summary.Value(tag=tag, simple_value=value),
                Summary.Value(tag=tag + "/b", simple_value=value),
            ]
        )
    else:
        entry = Summary.Value(tag=tag, simple_value=value)
        if kind == "metadata":
            entry.metadata.display_name = "shown"
        summary = Summary(value=[entry])
    return Event(wall_time=wall, step=step, summary=summary).SerializeToString()


def _reference(payloads: list[bytes]) -> tuple[list[Record], int, int]:
    """Every record through protobuf, consecutive events of one step merged; how many events
    had a negative step; and how many kept ones had a wall time that is not finite (read as
    none)."""
    records: list[Record] = []
    negative = unclocked = 0
    step: int | None = None
    values: dict[str, float | list[float]] = {}
    wall: float | None = None
    for raw in payloads:
        event = Event.FromString(raw)
        if event.WhichOneof("what") != "summary":
            continue
        scalars: dict[str, float] = {}
        for v in event.summary.value:
            if v.WhichOneof("value") == "simple_value":
                scalars[v.tag] = float(v.simple_value)
            elif v.metadata.plugin_data.plugin_name == "scalars":
                scalars[v.tag] = float(tensor_util.make_ndarray(v.tensor))
        if not scalars:
            continue
        if event.step < 0:
            negative += 1
            continue
        if step is not None and event.step != step:
            records.append(Record(step, values, wall))
            values = {}
        step = event.step
        for tag, value in scalars.items():  # a tag again at one step: one more value of it
            seen = values.get(tag)
            values[tag] = (
                value if seen is None else [*(seen if isinstance(seen, list) else [seen]), value]
            )
        finite = math.isfinite(event.wall_time)
        unclocked += not finite
        wall = (event.wall_time if finite else 0.0) or None
    if step is not None:
        records.append(Record(step, values, wall))
    return records, negative, unclocked


def _bits(value: float | list[float]) -> bytes:
    members = value if isinstance(value, list) else [value]
    return b"|".join(struct.pack("<f", v) for v in members) + (
        b"L" if isinstance(value, list) else b""
    )


def _comparable(records: list[Record]) -> list[tuple[int, dict[str, bytes], float | None]]:
    # NaN != NaN: compare the float32 bits of each value instead
    return [(r.step, {k: _bits(v) for k, v in r.values.items()}, r.wall_time) for r in records]


@settings(max_examples=150, deadline=None)
@given(events=_events, chunk=st.sampled_from([7, 64, 1 << 20]))
def test_batch_decoding_matches_protobuf_for_any_mix_of_events(
    tmp_path_factory: pytest.TempPathFactory,
    events: list[tuple[str, str, int, float, float]],
    chunk: int,
) -> None:
    payloads = [_payload(*e) for e in events]
    path = tmp_path_factory.mktemp("tb") / "events.out.tfevents.1.host"
    path.write_bytes(b"".join(_frame(p) for p in payloads))
    problems: list[Malformed] = []
    got = list(TensorBoardSource(path, problems.append, chunk_size=chunk).poll(final=True))
    expected, negative, unclocked = _reference(payloads)
    assert _comparable(got) == _comparable(expected)
    said = [p for p in problems if "wall time" in p.reason]
    assert len(said) == (1 if unclocked else 0)
    assert all(f"of {unclocked} event(s)" in p.reason for p in said)
    assert len(problems) - len(said) == negative
    assert all("negative step" in p.reason for p in problems if p not in said)


@settings(max_examples=100, deadline=None)
@given(
    events=_events,
    chunk=st.sampled_from([7, 64, 1 << 20]),
    regular=st.integers(0, 150),
    first=st.sampled_from([0, 100, 16_300]),
    cut=st.integers(0, 1000),
)
def test_blocks_hold_exactly_the_records_of_the_steps_they_cover(
    tmp_path_factory: pytest.TempPathFactory,
    events: list[tuple[str, str, int, float, float]],
    chunk: int,
    regular: int,
    first: int,
    cut: int,
) -> None:
    # runs of plain steps (what blocks are made of, and records whose lengths repeat: what
    # the framing skips through) around whatever else an event file holds, their steps
    # crossing a varint length or not, the file read in two polls cut anywhere
    plain = [("simple", f"t{i % 3}", first + i // 3, 1.7e9 + i, i / 8) for i in range(3 * regular)]
    payloads = [_payload(*e) for e in [*plain, *events, *plain]]
    path = tmp_path_factory.mktemp("tb") / "events.out.tfevents.1.host"
    frames = [_frame(p) for p in payloads]
    first = b"".join(frames[: cut % (len(frames) + 1)])
    path.write_bytes(first)
    problems: list[Malformed] = []
    source = TensorBoardSource(path, problems.append, chunk_size=chunk)
    got = list(source.poll_blocks())
    path.write_bytes(b"".join(frames))
    got += source.poll_blocks(final=True)
    records = [
        r for item in got for r in (item.records() if isinstance(item, ScalarBlock) else [item])
    ]
    # what `poll` gives reading the same two states of the file
    path.write_bytes(first)
    again = TensorBoardSource(path, [].append, chunk_size=chunk)
    want = list(again.poll())
    path.write_bytes(b"".join(frames))
    want += again.poll(final=True)
    assert _comparable(records) == _comparable(want)
    assert source.position() == again.position()


@pytest.mark.parametrize("chunk", [1500, 4000, 1 << 20])
def test_a_step_split_by_another_event_or_a_read_is_one_record_in_blocks(
    tmp_path: Path, chunk: int
) -> None:
    events = [("simple", f"t{i % 4}", 1000 + i // 4, 1.7e9 + i, i / 8) for i in range(400)]
    for at in (398, 201, 103, 50, 6):  # a tensor scalar amid each of these steps' events
        events.insert(at, ("tensor", "x", events[at][2], 1.7e9, 0.5))
    payloads = [_payload(*e) for e in events]
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"".join(_frame(p) for p in payloads))
    got = list(TensorBoardSource(path, [].append, chunk_size=chunk).poll_blocks(final=True))
    assert any(isinstance(item, ScalarBlock) for item in got)
    records = [
        r for item in got for r in (item.records() if isinstance(item, ScalarBlock) else [item])
    ]
    expected, _, _ = _reference(payloads)
    assert _comparable(records) == _comparable(expected)
    assert len(records) == 100


def test_records_cut_at_any_byte_are_read_whole_when_the_rest_arrives(tmp_path: Path) -> None:
    payloads = [_payload("simple", f"tag{i % 3}", i // 3, 1.7e9 + i, i / 7) for i in range(40)]
    data = b"".join(_frame(p) for p in payloads)
    path = tmp_path / "events.out.tfevents.1.host"
    with open(path, "wb") as out, open(path, "rb") as handle:
        reader = RecordReader(handle, chunk_size=5)
        seen: list[bytes] = []
        for cut in range(0, len(data), 37):
            out.write(data[cut : cut + 37])
            out.flush()
            for batch in reader.batches():
                seen += [batch.payload(i) for i in range(len(batch))]
    assert seen == payloads
    assert reader.consumed == len(data)


def test_a_damaged_payload_skips_only_that_record(tmp_path: Path) -> None:
    frames = [_frame(_payload("simple", "loss", s, 1.7e9, 0.5)) for s in range(5)]
    data = bytearray(b"".join(frames))
    damaged_at = len(frames[0]) + len(frames[1])
    data[damaged_at + 12 + 3] ^= 0x40  # a byte inside the third record's payload
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(bytes(data))
    problems: list[Malformed] = []
    records = list(TensorBoardSource(path, problems.append).poll(final=True))
    assert [r.step for r in records] == [0, 1, 3, 4]  # the framing is intact: read on
    assert len(problems) == 1
    assert f"byte {damaged_at}" in problems[0].reason and "payload checksum" in problems[0].reason


def test_a_damaged_length_is_reported_instead_of_waited_for(tmp_path: Path) -> None:
    frames = [_frame(_payload("simple", "loss", s, 1.7e9, 0.5)) for s in range(3)]
    data = bytearray(b"".join(frames))
    last = len(frames[0]) + len(frames[1])
    data[last + 5] ^= 0x01  # the length now claims ~1 TB: it would never be complete
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(bytes(data))
    problems: list[Malformed] = []
    source = TensorBoardSource(path, problems.append)
    records = list(source.poll())
    assert [r.step for r in records] == [0, 1]
    assert len(problems) == 1 and "length checksum" in problems[0].reason


@settings(max_examples=100, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=4000),
    spans=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 700)), max_size=80),
    repeat=st.integers(1, 40),
)
def test_batch_checksums_equal_google_crc32c(
    data: bytes, spans: list[tuple[int, int]], repeat: int
) -> None:
    # Repeated spans make groups of equal length, which take the table path.
    pairs = [(a % len(data), n) for a, n in spans] * repeat
    starts = np.array([a for a, _ in pairs], dtype=np.int64)
    ends = np.array([min(len(data), a + n) for a, n in pairs], dtype=np.int64)
    got = masked_crc32c_rows(data, starts, ends)
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        crc = google_crc32c.value(data[a:b])
        masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
        assert int(got[i]) == masked, (a, b)


def test_summary_writer_events_are_decoded_as_arrays(tmp_path: Path) -> None:
    # The array path is what keeps imports fast; protobuf is only for the other layouts.
    path = write_event_file(
        tmp_path, [(s, {"losses/approx_kl": 0.5, "x" * 118: 1.0}) for s in range(300)]
    )
    with open(path, "rb") as handle:
        (batch,) = RecordReader(handle).batches()
    columns = decode_scalar_events(batch)
    assert not columns.ok[0]  # the file_version record
    assert columns.ok[1:].all()
    assert sorted(columns.tags) == ["losses/approx_kl", "x" * 118]
