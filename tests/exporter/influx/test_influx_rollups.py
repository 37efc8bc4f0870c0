"""The step rollups the exporter keeps in InfluxDB equal sums over the raw points InfluxDB holds,
whichever writer wrote them (the outbox's forwarder, `rlvitals import`), after a resume re-logs
steps in the middle of a block, and for a run written before rollups existed; every block of every
path also holds its mean (`mean:<field>` = sum / count), and a run rolled up before block means
existed (marker version 1) is rolled up again whole."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from influx_server import InfluxDatabase

import exporter
import registry
from exporter.influx import rollups as influx_rollups
from exporter.influx.direct import DirectRun
from exporter.influx.forwarder import LineRenderer
from exporter.influx.lineprotocol import join_lines
from exporter.influx.rollups import ROLLUP_VERSION, InfluxRollups, make_rollups
from exporter.influx.writers import Writer, make_writer
from exporter.schema import (
    MARKER_VERSION_FIELD,
    NO_RANK,
    ROLLUP_LEVELS,
    ROLLUP_MARKER,
    SampleRow,
    rollup_measurement,
    unkept_key,
)
from rlvitals.cli import main

MINI = str(Path(__file__).parents[2] / "fixtures" / "mini_registry")
Blocks = dict[int, tuple[int, float, float, float, int]]


def _kept(influx: Any, run: str, field: str, level: int) -> Blocks:
    """The rollup blocks of a field, summed over the run's series (ranks, GPUs)."""
    rows = influx.query(
        f'SELECT "n:{field}", "sum:{field}", "min:{field}", "max:{field}", "last:{field}" '
        f'FROM "{rollup_measurement(level)}" WHERE "run" = \'{run}\' GROUP BY *'
    )
    out: dict[int, list[float]] = {}
    for r in rows:
        if r[f"n:{field}"] is None:
            continue
        cell = out.setdefault(int(r["time"]), [0, 0.0, math.inf, -math.inf, -1])
        cell[0] += r[f"n:{field}"]
        cell[1] += r[f"sum:{field}"]
        cell[2] = min(cell[2], r[f"min:{field}"])
        cell[3] = max(cell[3], r[f"max:{field}"])
        cell[4] = max(cell[4], r[f"last:{field}"])
    return {k: (int(c[0]), c[1], c[2], c[3], int(c[4])) for k, c in sorted(out.items())}


def _raw(influx: Any, run: str, measurement: str, field: str, level: int) -> Blocks:
    """The same blocks summed here from every raw point InfluxDB holds."""
    rows = influx.query(f'SELECT "{field}" FROM "{measurement}" WHERE "run" = \'{run}\'')
    out: dict[int, list[float]] = {}
    for r in rows:
        v = r[field]
        if v is None:
            continue
        cell = out.setdefault(r["time"] // level * level, [0, 0.0, math.inf, -math.inf, -1])
        cell[0] += 1
        cell[1] += v
        cell[2] = min(cell[2], v)
        cell[3] = max(cell[3], v)
        cell[4] = max(cell[4], r["time"])
    return {k: (int(c[0]), c[1], c[2], c[3], int(c[4])) for k, c in sorted(out.items())}


def _unkept(influx: Any, run: str) -> dict[str, int]:
    """The marker's fields saying which levels of which fields are not kept."""
    rows = influx.query(f'SELECT * FROM "{ROLLUP_MARKER}" WHERE "run" = \'{run}\'')
    return {k: v for r in rows for k, v in r.items() if k.startswith("unkept") and v is not None}


def _assert_exact(influx: Any, run: str, measurement: str, field: str) -> None:
    """Every level kept for the field equals the raw points; a level not kept is one the field
    is too sparse for (fewer than 8 values per block on average, by the readers' rule)."""
    unkept = _unkept(influx, run)
    rows = influx.query(f'SELECT "{field}" FROM "{measurement}" WHERE "run" = \'{run}\'')
    steps = [r["time"] for r in rows if r[field] is not None]
    for level in ROLLUP_LEVELS:
        if unkept_key(level, field) in unkept:
            assert len(steps) * level < 8 * (max(steps) - min(steps) + 1), (field, level)
            continue
        kept, raw = _kept(influx, run, field, level), _raw(influx, run, measurement, field, level)
        assert kept.keys() == raw.keys(), f"level {level}"
        for block, want in raw.items():
            got = kept[block]
            assert got[0] == want[0] and got[4] == want[4], (level, block, got, want)
            assert got[1:4] == pytest.approx(want[1:4], rel=1e-9, abs=1e-9), (level, block)
        _assert_means(influx, run, field, level)


def _assert_means(influx: Any, run: str, field: str, level: int) -> None:
    """Every block of every series of the run holds its mean: its sum over its count."""
    rows = influx.query(
        f'SELECT "n:{field}", "sum:{field}", "mean:{field}" FROM "{rollup_measurement(level)}" '
        f"WHERE \"run\" = '{run}' GROUP BY *"
    )
    blocks = [r for r in rows if r[f"n:{field}"] is not None]
    for r in blocks:
        want = r[f"sum:{field}"] / r[f"n:{field}"]
        assert r[f"mean:{field}"] == pytest.approx(want, rel=1e-12, abs=1e-12), (level, r)


def _writer_and_rollups(settings: exporter.ExporterSettings) -> tuple[Writer, InfluxRollups]:
    """A writer for the raw points and the rollups kept beside them, as the forwarder has."""
    writer = make_writer(settings)
    assert writer is not None
    rollups = make_rollups(settings, writer)
    assert rollups is not None
    return writer, rollups


def _marked(influx: Any, run: str) -> bool:
    return bool(influx.query(f'SELECT * FROM "{ROLLUP_MARKER}" WHERE "run" = \'{run}\''))


def test_rollups_equal_the_raw_points_after_a_resume_relogs_steps_mid_block(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path, batch_size=700)
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(5000):
            run.log(step, {"policy_kl": 0.01 * (step % 97), "clip_fraction": step / 5000})
    with exporter.init("r", registry=reg, settings=settings, resume=True) as run:
        # steps 4100.. again, from inside a 64-step block and a 4096-step one, new values;
        # clip_fraction now only every 3rd step
        for step in range(4100, 9000):
            values = {"policy_kl": -1.0 - step % 5}
            if step % 3 == 0:
                values["clip_fraction"] = 0.75
            run.log(step, values)
    assert _marked(influx, "r")
    _assert_exact(influx, "r", "policy", "policy_kl")
    _assert_exact(influx, "r", "policy", "clip_fraction")
    # the re-logged block holds the new values, counted once
    assert _kept(influx, "r", "policy_kl", 64)[4096][0] == 64


def test_relogging_inside_one_process_is_recomputed_too(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path, batch_size=300)
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(3000):
            run.log(step, {"policy_kl": float(step)})
        run.flush()
        for step in range(1000, 1500):
            run.log(step, {"policy_kl": 0.5})
        for step in range(3000, 3100):
            run.log(step, {"policy_kl": 1.5})
    _assert_exact(influx, "r", "policy", "policy_kl")


def test_ranks_of_one_run_sum_into_its_blocks(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    # two trainer processes, each with its own outbox and forwarder, writing one run
    first = exporter.init("r", registry=reg, settings=influx.settings(tmp_path / "0"), rank=0)
    second = exporter.init(
        "r", registry=reg, settings=influx.settings(tmp_path / "1"), rank=1, resume=True
    )
    for step in range(2000):
        first.log(step, {"value_loss": 1.0})
        if step % 2 == 0:
            second.log(step, {"value_loss": 3.0})
    first.finish()
    second.finish()
    _assert_exact(influx, "r", "value", "value_loss")
    assert _kept(influx, "r", "value_loss", 64)[0][:2] == (96, 64 * 1.0 + 32 * 3.0)


def test_import_writes_rollups_equal_to_the_raw_points(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path)
    run = DirectRun("imp", project="p", registry=reg, settings=settings, framework=None)
    for step in range(0, 30_000, 2):
        run.log(step, {"policy_kl": math.sin(step / 300), "grad_norm": step % 11})
    assert run.flush(60)
    run.finish(60)
    assert _marked(influx, "imp")
    _assert_exact(influx, "imp", "policy", "policy_kl")
    _assert_exact(influx, "imp", "optimization", "grad_norm")


def test_a_run_written_before_rollups_is_rolled_up_whole_at_its_next_write(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    # points as an older exporter wrote them: no rollups, no marker
    influx.write(
        "\n".join(
            f"policy,run=old policy_kl={step / 7},step={step}i,wall_time={step}.0 {step}"
            for step in range(10_000)
        ),
    )
    assert not _marked(influx, "old")
    settings = influx.settings(tmp_path)
    with exporter.init("old", registry=reg, settings=settings, resume=True) as run:
        for step in range(10_000, 10_200):
            run.log(step, {"policy_kl": 1.0})
    assert _marked(influx, "old")
    _assert_exact(influx, "old", "policy", "policy_kl")
    assert sum(b[0] for b in _kept(influx, "old", "policy_kl", 4096).values()) == 10_200


def _version(influx: Any, run: str) -> object:
    rows = influx.query(f'SELECT * FROM "{ROLLUP_MARKER}" WHERE "run" = \'{run}\'')
    return rows[0][MARKER_VERSION_FIELD] if rows else None


def _version_1_run(influx: Any, run: str, steps: int) -> None:
    """Points and complete rollups as the exporter wrote them before block means: every block's
    count, sum, extremes and last step, no `mean:<field>`, marker version 1."""
    influx.write(
        "\n".join(
            f"policy,run={run} policy_kl={step / 7},step={step}i,wall_time={step}.0 {step}"
            for step in range(steps)
        )
    )
    lines = []
    for level in ROLLUP_LEVELS:
        for lo in range(0, steps, level):
            values = [s / 7 for s in range(lo, min(lo + level, steps))]
            lines.append(
                f"{rollup_measurement(level)},run={run} n:policy_kl={len(values)}i,"
                f"sum:policy_kl={sum(values)!r},min:policy_kl={min(values)!r},"
                f"max:policy_kl={max(values)!r},last:policy_kl={lo + len(values) - 1}i {lo}"
            )
    lines.append(f"{ROLLUP_MARKER},run={run} {MARKER_VERSION_FIELD}=1i 0")
    influx.write("\n".join(lines))


def test_a_run_rolled_up_before_block_means_is_rolled_up_again_whole_at_its_next_write(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    _version_1_run(influx, "v1", 9000)
    assert ROLLUP_VERSION > 1
    settings = influx.settings(tmp_path)
    with exporter.init("v1", registry=reg, settings=settings, resume=True) as run:
        for step in range(9000, 9100):
            run.log(step, {"policy_kl": 2.0})
    assert _version(influx, "v1") == ROLLUP_VERSION
    # every block holds its mean, the old ones (steps 0..8999) too
    _assert_exact(influx, "v1", "policy", "policy_kl")
    means = influx.query(f'SELECT count("mean:policy_kl") FROM "{rollup_measurement(64)}"')
    assert means[0]["count"] == -(-9100 // 64)


def test_doctor_finds_a_run_rolled_up_before_block_means_and_repair_rolls_it_up_again(
    tmp_path: Path, influx: Any
) -> None:
    _version_1_run(influx, "v1", 5000)
    settings = influx.settings(tmp_path)
    writer, rollups = _writer_and_rollups(settings)
    problems = rollups.check("v1")
    assert len(problems) == 1 and "version 1" in problems[0], problems
    rollups.repair("v1")
    writer.close()
    assert rollups.check("v1") == []
    assert _version(influx, "v1") == ROLLUP_VERSION
    _assert_exact(influx, "v1", "policy", "policy_kl")


def test_refused_lines_are_left_out_of_the_rollups(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    # an earlier run wrote `policy_kl` as text: this run's policy points are refused (HTTP 400)
    influx.write('policy,run=earlier policy_kl="text",step=1i 1')
    settings = influx.settings(tmp_path, batch_size=200)
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(1000):
            run.log(step, {"policy_kl": 0.5, "value_loss": float(step % 7)})
    assert not influx.query('SELECT * FROM "policy" WHERE "run" = \'r\'')
    assert _kept(influx, "r", "policy_kl", 64) == {}
    _assert_exact(influx, "r", "value", "value_loss")


def test_a_step_sent_twice_in_one_batch_counts_the_value_influxdb_kept(
    tmp_path: Path, influx: Any
) -> None:
    settings = influx.settings(tmp_path)
    writer, rollups = _writer_and_rollups(settings)
    for first in (0, 100):  # the second batch goes on in a block the first one opened
        rows: list[SampleRow] = []
        for step in range(first, first + 100):
            rows.append(("r", NO_RANK, step, "value", "", "value_loss", 1.0, 0.0))
            if step % 10 == 0:
                rows.append(("r", NO_RANK, step, "value", "", "value_loss", 5.0, 0.0))
        writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
        rollups.sent(rows, {"r": None})
    writer.close()
    _assert_exact(influx, "r", "value", "value_loss")
    assert _kept(influx, "r", "value_loss", 4096)[0][:2] == (200, 180 * 1.0 + 20 * 5.0)


def test_a_field_that_trails_the_others_is_summed_here_not_recomputed_by_influxdb(
    tmp_path: Path, influx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value derived from a step's rows is stored after them, so a batch can end between a
    # step's logged fields and its derived one: the derived field's newest block is then an
    # older one than the series' newest. Its sums are kept for it, as the series' are; once
    # each batch had InfluxDB recompute that block (`SELECT ... INTO`).
    settings = influx.settings(tmp_path)
    writer, rollups = _writer_and_rollups(settings)
    statements: list[str] = []
    real = influx_rollups._Query.run

    def counting(query: Any, batch: Any) -> Any:
        statements.extend(batch)
        return real(query, batch)

    monkeypatch.setattr(influx_rollups._Query, "run", counting)

    def row(step: int, field: str) -> SampleRow:
        return ("r", NO_RANK, step, "policy", "", field, math.sin(step) + len(field), 0.0)

    cut = 0  # each batch: the logged fields up to its last step, the derived one 40 steps behind
    for last in range(99, 1000, 100):
        rows = [row(s, f) for s in range(cut, last + 1) for f in ("policy_loss", "policy_kl")]
        rows += [row(s, "entropy_gradient") for s in range(max(0, cut - 40), last - 39)]
        writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
        rollups.sent(rows, {"r": None})
        cut = last + 1
    rows = [row(s, "entropy_gradient") for s in range(960, 1000)]  # the last derived values
    writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
    rollups.sent(rows, {"r": None})
    writer.close()
    assert not [s for s in statements if " INTO " in s]
    for field in ("policy_loss", "policy_kl", "entropy_gradient"):
        _assert_exact(influx, "r", "policy", field)


def test_rollups_owed_while_influxdb_is_down_are_recomputed_at_the_next_write(
    tmp_path: Path, influx_server_factory: Any
) -> None:
    server = influx_server_factory()
    server.post_query('CREATE DATABASE "d"')
    settings = InfluxDatabase(server, "d").settings(tmp_path)
    writer, rollups = _writer_and_rollups(settings)

    def batch(first: int) -> list[SampleRow]:
        return [
            ("r", NO_RANK, s, "value", "", "value_loss", s / 3, 0.0)
            for s in range(first, first + 150)
        ]

    for first in (0, 150):
        rows = batch(first)
        writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
        if first == 150:
            server.stop()  # the points are in; their rollups cannot be written now
        rollups.sent(rows, {"r": None})  # never raises
    server.start()
    rows = batch(300)
    writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
    rollups.sent(rows, {"r": None})
    writer.close()
    _assert_exact(InfluxDatabase(server, "d"), "r", "value", "value_loss")


def test_influxdb_2_gets_no_rollups_and_is_read_from_raw_points(tmp_path: Path) -> None:
    settings = exporter.ExporterSettings(
        store=tmp_path,
        influx_url="http://127.0.0.1:9",
        influx_api="v2",
        influx_org="o",
        influx_bucket="b",
        influx_token="t",
    )
    v1 = make_writer(exporter.ExporterSettings(store=tmp_path, influx_url="http://127.0.0.1:9"))
    assert v1 is not None
    assert make_rollups(settings, v1) is None
    assert make_rollups(exporter.ExporterSettings(store=tmp_path), v1) is None


def test_rlvitals_import_and_tail_keep_rollups_equal_to_the_raw_points(
    tmp_path: Path, influx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLVITALS_INFLUX_URL", influx.url)
    monkeypatch.setenv("RLVITALS_INFLUX_DATABASE", influx.name)
    monkeypatch.setenv("RLVITALS_STORE", str(tmp_path / "store"))
    for folder in ("imported", "tailed"):
        log = tmp_path / folder / "metrics.jsonl"
        log.parent.mkdir()
        log.write_text(
            "".join(
                json.dumps({"step": s, "policy_kl": s / 1000, "value_loss": s % 13}) + "\n"
                for s in range(0, 6000, 3)
            )
        )
    assert main(["import", str(tmp_path / "imported"), "--registry", MINI, "--run", "i"]) == 0
    args = ["tail", str(tmp_path / "tailed"), "--registry", MINI, "--run", "t", "--no-follow"]
    assert main(args) == 0
    for run in ("i", "t"):
        assert _marked(influx, run)
        _assert_exact(influx, run, "policy", "policy_kl")
        _assert_exact(influx, run, "value", "value_loss")


def test_columns_sent_sum_into_the_same_blocks_as_the_same_rows() -> None:
    rng = np.random.default_rng(7)
    steps = np.array([0, 1, 5, 63, 64, 200, 4095, 4096, 9000], dtype=np.int64)
    columns = [("policy", "", "policy_kl"), ("policy", "", "clip_fraction"), ("loss", "0", "x")]
    values = rng.uniform(-2, 2, size=(len(steps), len(columns)))
    as_rows = [
        ("r", 1, int(step), m, g, f, float(values[i, j]), 1000.0 + i)
        for i, step in enumerate(steps)
        for j, (m, g, f) in enumerate(columns)
    ]
    from_columns = influx_rollups._block_sums(
        [], [influx_rollups.SentColumns("r", 1, steps, columns, values)]
    )
    assert from_columns == influx_rollups._block_sums(as_rows)
    # rows first, then columns logging step 5 again: the value sent last is the one summed
    again = np.array([[9.0, 9.0, 9.0]])
    mixed = influx_rollups._block_sums(
        as_rows, [influx_rollups.SentColumns("r", 1, np.array([5]), columns, again)]
    )
    replaced = [r if r[2] != 5 else (*r[:6], 9.0, r[7]) for r in as_rows]
    assert mixed == influx_rollups._block_sums(replaced)
    # and rows sent after columns win over them the same way
    later_rows = [(*r[:6], 9.0, r[7]) for r in as_rows if r[2] == 5]
    columns_then_rows = influx_rollups._part_sums(
        [influx_rollups.SentColumns("r", 1, steps, columns, values), later_rows]
    )
    assert columns_then_rows == influx_rollups._block_sums(replaced)


def test_a_field_logged_every_128_steps_keeps_only_its_4096_step_blocks(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    # PPO's rollouts: one value per 128 steps would give every 64-step block one value, five
    # rollup fields for each raw one, and readers use a level only at 8 values per block
    settings = influx.settings(tmp_path)
    run = DirectRun("ppo", project="p", registry=reg, settings=settings, framework=None)
    for step in range(200_000):
        values: dict[str, float] = {}
        if step % 128 == 0:
            values["policy_kl"] = math.sin(step / 3000)
        if step < 20_000:  # logged at every step there: dense
            values["grad_norm"] = step % 11
        if values:
            run.log(step, values)
    assert run.flush(60)
    run.finish(60)
    unkept = _unkept(influx, "ppo")
    assert unkept_key(64, "policy_kl") in unkept
    assert not {k for k in unkept if k.endswith(":grad_norm") or k == unkept_key(4096, "policy_kl")}
    # judged after 8 blocks' worth of steps: no 64-step lines for it past the first batches
    # (a fresh run's first rollup pass sums all InfluxDB holds of it then: a few batches)
    fine = _kept(influx, "ppo", "policy_kl", 64)
    assert fine and max(fine) < 20_000
    _assert_exact(influx, "ppo", "policy", "policy_kl")
    _assert_exact(influx, "ppo", "optimization", "grad_norm")


def test_a_resumed_writer_rebuilds_a_sparse_fields_blocks_from_the_raw_points(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    settings = influx.settings(tmp_path, batch_size=50)
    with exporter.init("r", registry=reg, settings=settings) as run:
        for step in range(0, 20_000, 128):
            run.log(step, {"policy_kl": 1.0, "clip_fraction": step / 20_000})
    assert unkept_key(64, "policy_kl") in _unkept(influx, "r")
    with exporter.init("r", registry=reg, settings=settings, resume=True) as run:
        # from inside a 4096-step block: its 64-step level was never kept, so the 4096-step
        # block is recomputed from the raw points, not from 64-step blocks
        for step in range(10_112, 40_000, 128):
            run.log(step, {"policy_kl": -3.0, "clip_fraction": 0.5})
    _assert_exact(influx, "r", "policy", "policy_kl")
    _assert_exact(influx, "r", "policy", "clip_fraction")
    # steps 8192..9984 of the first run, 10112..12160 of the second
    assert _kept(influx, "r", "policy_kl", 4096)[8192][:2] == (32, 15 * 1.0 - 17 * 3.0)


def test_a_mark_in_a_request_that_failed_is_sent_with_the_next_one(
    tmp_path: Path, influx_server_factory: Any
) -> None:
    server = influx_server_factory()
    server.post_query('CREATE DATABASE "d"')
    db = InfluxDatabase(server, "d")
    settings = db.settings(tmp_path)
    writer, rollups = _writer_and_rollups(settings)
    # judged after 512 steps: in the second request, while InfluxDB is down
    for first, last, down in ((0, 500, False), (500, 3000, True), (3000, 6000, False)):
        rows = [
            ("r", NO_RANK, s, "value", "", "value_loss", s / 3, 0.0)
            for s in range(first, last, 100)
        ]
        writer.write(join_lines(LineRenderer().render(rows, (), {"r": None})))
        if down:
            server.stop()  # judged sparse here: the mark cannot be written now
        rollups.sent(rows, {"r": None})  # never raises
        assert rollups.keeps("r", "value_loss", 64) == (first == 0)
        if down:
            server.start()
    writer.close()
    assert unkept_key(64, "value_loss") in _unkept(db, "r")
    _assert_exact(db, "r", "value", "value_loss")
