"""Running statistics and step rollups of the outbox's samples, kept in the outbox file itself.

`sample_stats` holds per series (run, field, rank, measurement, gpu) the count, sum and sum of
squares of its values, its first and last step and the lowest and highest value seen;
`sample_rollups` holds per (run, field) and fixed step block (`ROLLUP_LEVELS`, block = step //
level, every rank and GPU together) the count, sum, lowest and highest value seen and the block's
last step. Only finite numbers outside the hyperparameter point (`run_config`) count. Readers get
whole-run means and long series from a bounded number of rows however long the run.

Which levels a (run, field) keeps (`rollup_series.levels`, bit i = `ROLLUP_LEVELS[i]`) is chosen
once it has 256 points, from its density: a level whose blocks would hold fewer than 8 values on
average is not kept (a run logging every 128 steps has 4096-step blocks but no 64-step ones, which
would cost a row per value and save readers nothing). Readers use a level only where it is kept.

How they stay exact, cheaply:
- each write transaction sums the rows it stored, read back by their sequence numbers through the
  unsent-rows index, in SQL: first per series and 64-step block into a per-connection temp table,
  then from there into the statistics and each rollup level (`fold`, a few set-based statements
  per batch; no per-sample trigger, no Python loop holding the GIL);
- a re-logged value (a resume replaying steps) is noted by a trigger in the file, which copies
  the value overwritten to `stats_replaced`; the next fold takes those out. Only replays pay;
- every sample written takes a number from the outbox's `sequence`, and `stats_folded` holds the
  last number whose rows are summed. Triggers act only on rows numbered up to it, so a key logged
  twice in one batch counts once; rows another program wrote past it (an older rlvitals, a tool)
  are folded by the next outbox write (`catch_up`, reading them back by number) before its own;
- a delete, or a number overwritten by text, is taken out at once by a trigger, which also finds
  the new first/last step when it was one of those. Min and max are values *seen*: they keep
  overwritten values.

A file from before these tables gets them, its triggers and a backfill from its rows once, on
open, in one transaction (`install`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..schema import MIN_BLOCK_POINTS, ROLLUP_LEVELS, RUN_CONFIG

__all__ = [
    "RUN_TABLES",
    "STATS_VERSION",
    "block_partials",
    "catch_up",
    "delete_samples",
    "disagreements",
    "fold",
    "install",
    "installed",
    "keep_over_numbered_keys",
    "prepare",
]

STATS_VERSION = 2
"""`PRAGMA user_version` of a file with these tables; a lower one gets them when opened."""

_TABLES = (
    """CREATE TABLE IF NOT EXISTS sample_stats (
        run TEXT NOT NULL,
        field TEXT NOT NULL,
        rank INTEGER NOT NULL,
        measurement TEXT NOT NULL,
        gpu TEXT NOT NULL,
        n INTEGER NOT NULL,
        total REAL NOT NULL,
        total_sq REAL NOT NULL,
        first_step INTEGER NOT NULL,
        last_step INTEGER NOT NULL,
        min_seen REAL NOT NULL,
        max_seen REAL NOT NULL,
        PRIMARY KEY (run, field, rank, measurement, gpu)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS sample_rollups (
        run TEXT NOT NULL,
        field TEXT NOT NULL,
        level INTEGER NOT NULL,
        block INTEGER NOT NULL,
        n INTEGER NOT NULL,
        total REAL NOT NULL,
        min_seen REAL NOT NULL,
        max_seen REAL NOT NULL,
        last_step INTEGER NOT NULL,
        PRIMARY KEY (run, field, level, block)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS rollup_series (
        run TEXT NOT NULL,
        field TEXT NOT NULL,
        levels INTEGER NOT NULL,
        PRIMARY KEY (run, field)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS stats_folded (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        seq INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS stats_replaced (
        run TEXT NOT NULL,
        field TEXT NOT NULL,
        rank INTEGER NOT NULL,
        measurement TEXT NOT NULL,
        gpu TEXT NOT NULL,
        step INTEGER NOT NULL,
        value REAL NOT NULL
    )""",
)


def _finite(row: str) -> str:
    """SQL: `row`'s value is a finite number (sqlite stores NaN as NULL)."""
    return (
        f"typeof({row}value) IN ('real', 'integer') AND abs({row}value) <= 1.7976931348623157e308"
    )


def _counted(row: str) -> str:
    """SQL: the row counts (a finite number, not the run_config point); `row` is "s." or ""
    (a row of the `samples` view)."""
    return f"{row}measurement != '{RUN_CONFIG}' AND {_finite(row)}"


def _counted_point(row: str) -> str:
    """`_counted` for a row of `points` ("OLD." / "NEW." in its triggers): its measurement is
    found by its tag set's number."""
    return (
        f"{_finite(row)} AND "
        f"(SELECT measurement FROM tag_sets WHERE id = {row}tag_set) != '{RUN_CONFIG}'"
    )


_OLD_RUN_FIELD = "(SELECT run, field FROM run_fields WHERE id = OLD.run_field)"
_OLD_KEY = (
    "(SELECT f.run, f.field, t.rank, t.measurement, t.gpu FROM run_fields f, tag_sets t "
    "WHERE f.id = OLD.run_field AND t.id = OLD.tag_set)"
)


def _remove() -> str:
    """The OLD point is gone for good (deleted, or its value is no number now): counts and sums
    drop; when it held the first or last step, the next one in from that end among the points
    still counted takes its place (an index walk from OLD.step, not a scan); emptied rows go."""
    same = f"run_field = OLD.run_field AND tag_set = OLD.tag_set AND {_finite('')}"
    sql = f"""
    UPDATE sample_stats SET n = n - 1, total = total - OLD.value,
        total_sq = total_sq - OLD.value * OLD.value,
        first_step = CASE WHEN first_step < OLD.step THEN first_step ELSE coalesce(
            (SELECT step FROM points WHERE {same} AND step > OLD.step ORDER BY step LIMIT 1),
            first_step) END,
        last_step = CASE WHEN last_step > OLD.step THEN last_step ELSE coalesce(
            (SELECT step FROM points WHERE {same} AND step < OLD.step ORDER BY step DESC LIMIT 1),
            last_step) END
    WHERE (run, field, rank, measurement, gpu) = {_OLD_KEY};
    DELETE FROM sample_stats WHERE (run, field, rank, measurement, gpu) = {_OLD_KEY}
        AND n <= 0;"""
    for level in ROLLUP_LEVELS:
        start = f"OLD.step / {level} * {level}"
        block = (
            f"(run, field) = {_OLD_RUN_FIELD} AND level = {level} AND block = OLD.step / {level}"
        )
        sql += f"""
    UPDATE sample_rollups SET n = n - 1, total = total - OLD.value,
        last_step = CASE WHEN last_step > OLD.step THEN last_step ELSE coalesce(
            (SELECT p.step FROM points p JOIN tag_sets t ON t.id = p.tag_set
             WHERE p.run_field = OLD.run_field AND p.step BETWEEN {start} AND OLD.step
                 AND t.measurement != '{RUN_CONFIG}' AND {_finite("p.")}
             ORDER BY p.step DESC LIMIT 1), last_step) END
    WHERE {block};
    DELETE FROM sample_rollups WHERE {block} AND n <= 0;"""
    return sql


_FOLDED = "OLD.seq <= (SELECT seq FROM stats_folded WHERE id = 0)"
_NOTE_REPLACED = """
    INSERT INTO stats_replaced (run, field, rank, measurement, gpu, step, value)
    SELECT f.run, f.field, t.rank, t.measurement, t.gpu, OLD.step, OLD.value
    FROM run_fields f, tag_sets t WHERE f.id = OLD.run_field AND t.id = OLD.tag_set;"""

# (name, event, condition, body); dropped and created again when STATS_VERSION rises.
_TRIGGERS = (
    (
        "samples_stats_relog",
        "UPDATE OF value",
        f"{_counted_point('OLD.')} AND {_finite('NEW.')} AND {_FOLDED}",
        _NOTE_REPLACED,
    ),
    (
        "samples_stats_unset",
        "UPDATE OF value",
        f"{_counted_point('OLD.')} AND NOT ({_finite('NEW.')}) AND {_FOLDED}",
        _remove(),
    ),
    ("samples_stats_delete", "DELETE", f"{_counted_point('OLD.')} AND {_FOLDED}", _remove()),
)

# The statistics of the rows already stored (the rollups follow, per series: `_decide`).
_BACKFILL = (
    "DELETE FROM sample_stats",
    "DELETE FROM sample_rollups",
    "DELETE FROM rollup_series",
    "DELETE FROM stats_replaced",
    f"""INSERT INTO sample_stats (run, field, rank, measurement, gpu, n, total, total_sq,
                                  first_step, last_step, min_seen, max_seen)
        SELECT run, field, rank, measurement, gpu, count(*), total(value), total(value * value),
               min(step), max(step), min(value), max(value)
        FROM samples WHERE {_counted("")} GROUP BY run, field, rank, measurement, gpu""",
    # every row stored is summed now, whatever number it carries: later rows number past it
    """UPDATE sequence SET n = max(n, (SELECT coalesce(max(seq), 0) FROM samples),
                                  (SELECT coalesce(max(seq), 0) FROM events)) WHERE id = 0""",
    "INSERT OR REPLACE INTO stats_folded (id, seq) SELECT 0, n FROM sequence WHERE id = 0",
)


RUN_TABLES = ("sample_stats", "sample_rollups", "rollup_series", "stats_replaced")
"""The tables here keyed by run: what deleting or renaming a run changes."""


def _delete_untriggered(db: sqlite3.Connection, run: str) -> int:
    """Delete `run`'s samples with the triggers that take a deleted row out of the statistics (a
    handful of statements per row: several times the delete itself, bench/bench_run_admin.py)
    dropped, and created
    again after, in the caller's transaction: other connections never see the file without
    them. Only for rows whose statistics are dealt with whole by the caller."""
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for name, _, _, _ in _TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
    deleted = db.execute(
        "DELETE FROM points WHERE run_field IN (SELECT id FROM run_fields WHERE run = ?)", (run,)
    ).rowcount
    db.execute("DELETE FROM run_fields WHERE run = ?", (run,))
    _create_triggers(db, have)
    return int(deleted)


def delete_samples(db: sqlite3.Connection, run: str) -> int:
    """Inside a write transaction: every sample of `run` and everything summed from them, gone.
    Returns the samples deleted."""
    for table in RUN_TABLES:
        db.execute(f"DELETE FROM {table} WHERE run = ?", (run,))
    return _delete_untriggered(db, run)


def disagreements(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Per run, where its statistics or a rollup level it keeps disagree with its rows (count
    or sum of the finite values of a field): what `rlvitals doctor` reports and `--repair`
    rebuilds with `install`. Reads every row: seconds for a large store."""
    raw = db.execute(
        f"SELECT run, field, count(*), total(value) FROM samples WHERE {_counted('')} "
        "GROUP BY run, field"
    ).fetchall()
    stats = {
        (r, f): (int(n), float(t))
        for r, f, n, t in db.execute(
            "SELECT run, field, sum(n), total(total) FROM sample_stats GROUP BY run, field"
        )
    }
    rolled: dict[tuple[str, str], dict[int, tuple[int, float]]] = {}
    for r, f, level, n, t in db.execute(
        "SELECT run, field, level, sum(n), total(total) FROM sample_rollups "
        "GROUP BY run, field, level"
    ):
        rolled.setdefault((r, f), {})[int(level)] = (int(n), float(t))
    kept = {(r, f): int(levels) for r, f, levels in db.execute("SELECT * FROM rollup_series")}
    out: dict[str, list[str]] = {}
    for run, field, n, total in raw:
        found = [("statistics", stats.get((run, field), (0, 0.0)))]
        levels = kept.get((run, field))
        for i, level in enumerate(ROLLUP_LEVELS):
            have = rolled.get((run, field), {}).get(level)
            if levels is not None and levels >> i & 1:
                found.append((f"{level}-step rollups", have or (0, 0.0)))
            elif levels is None and have is not None:
                found.append((f"{level}-step rollups", have))
        for what, (got_n, got_total) in found:
            close = abs(got_total - total) <= 1e-9 * max(1.0, abs(total))
            if got_n != n or not close:
                out.setdefault(run, []).append(f"{field}: {n} value(s), its {what} hold {got_n}")
    return out


def installed(db: sqlite3.Connection) -> bool:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version) >= STATS_VERSION


def _create_triggers(db: sqlite3.Connection, only: Collection[str] | None = None) -> None:
    """The statistics' triggers on `points` (of them, those named in `only`), made anew."""
    for name, event, condition, body in _TRIGGERS:
        if only is not None and name not in only:
            continue
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
        db.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON points WHEN {condition}\nBEGIN{body}\nEND"
        )


def keep_over_numbered_keys(db: sqlite3.Connection, version: int) -> None:
    """Inside the write transaction that moved a file's samples into numbered keys: statistics
    a file already kept (`version`: its `user_version` before the move, 1 being the first) are
    exact for the rows moved, so only their triggers are made again, on `points`; a file
    without them gets them whole when it is opened (`install`). A 2.4M-row store: 6 s to move,
    13 s more to sum its statistics again."""
    if version >= 1:
        _create_triggers(db)
        db.execute(f"PRAGMA user_version = {STATS_VERSION}")
    else:
        db.execute("PRAGMA user_version = 0")


def install(db: sqlite3.Connection) -> None:
    """Tables, triggers and a backfill from the stored rows; call inside a write transaction
    (BEGIN IMMEDIATE) after checking `installed` again under it."""
    for statement in _TABLES:
        db.execute(statement)
    _create_triggers(db)
    for statement in _BACKFILL:
        db.execute(statement)
    _decide(db, _DECIDE_ALL)
    db.execute(f"PRAGMA user_version = {STATS_VERSION}")


_BATCH_TABLE = """CREATE TEMP TABLE IF NOT EXISTS stats_batch (
    run TEXT, field TEXT, rank INTEGER, measurement TEXT, gpu TEXT, block INTEGER,
    n INTEGER, total REAL, total_sq REAL, first_step INTEGER, last_step INTEGER,
    min_seen REAL, max_seen REAL
)"""

_FINE = ROLLUP_LEVELS[0]


def _sum_rows(where: str, rows: str = "samples") -> str:
    """Rows of `rows` (the `samples` view, or a query shaped as it) matching `where`, summed
    per series and finest block."""
    return f"""INSERT INTO stats_batch
    SELECT run, field, rank, measurement, gpu, step / {_FINE}, count(*), total(value),
           total(value * value), min(step), max(step), min(value), max(value)
    FROM {rows} WHERE {where} AND {_counted("")}
    GROUP BY run, field, rank, measurement, gpu, step / {_FINE}"""


# The rows a transaction just stored, found through the unsent-points index (`points.sent` as
# stored, never marked since the forwarder's watermark; the view's `sent` reads the watermark
# and would miss the index: the worker stored 15 % fewer rows a second through it).
_STORED_NOW = """(SELECT f.run AS run, f.field AS field, t.rank AS rank,
        t.measurement AS measurement, t.gpu AS gpu, p.step AS step, p.value AS value
    FROM points p JOIN run_fields f ON f.id = p.run_field JOIN tag_sets t ON t.id = p.tag_set
    WHERE p.sent = 0 AND p.seq BETWEEN :first AND :last)"""
_FOLD_BATCH = _sum_rows("true", _STORED_NOW)
_FOLD_OTHERS = _sum_rows("seq > :first AND seq <= :last")
_FOLD_REPLACED = (
    # out go the count and sums of a replaced value; its step and the min/max seen stay
    f"""INSERT INTO stats_batch
    SELECT run, field, rank, measurement, gpu, step / {_FINE}, -count(*), -total(value),
           -total(value * value), min(step), max(step), NULL, NULL
    FROM stats_replaced GROUP BY run, field, rank, measurement, gpu, step / {_FINE}""",
    "DELETE FROM stats_replaced",
)
_SEEN = """min_seen = coalesce(min(min_seen, excluded.min_seen), min_seen),
    max_seen = coalesce(max(max_seen, excluded.max_seen), max_seen)"""
_APPLY = (
    f"""INSERT INTO sample_stats (run, field, rank, measurement, gpu, n, total, total_sq,
                                  first_step, last_step, min_seen, max_seen)
    SELECT run, field, rank, measurement, gpu, sum(n), total(total), total(total_sq),
           min(first_step), max(last_step), min(min_seen), max(max_seen)
    FROM temp.stats_batch WHERE true GROUP BY run, field, rank, measurement, gpu
    ON CONFLICT DO UPDATE SET n = n + excluded.n, total = total + excluded.total,
        total_sq = total_sq + excluded.total_sq, first_step = min(first_step, excluded.first_step),
        last_step = max(last_step, excluded.last_step), {_SEEN}""",
    *(
        f"""INSERT INTO sample_rollups (run, field, level, block, n, total, min_seen, max_seen,
                                        last_step)
    SELECT b.run, b.field, {level}, b.block / {level // _FINE}, sum(b.n), total(b.total),
           min(b.min_seen), max(b.max_seen), max(b.last_step)
    FROM temp.stats_batch b JOIN rollup_series r ON r.run = b.run AND r.field = b.field
    WHERE r.levels & {1 << i} GROUP BY b.run, b.field, b.block / {level // _FINE}
    ON CONFLICT DO UPDATE SET n = n + excluded.n, total = total + excluded.total,
        last_step = max(last_step, excluded.last_step), {_SEEN}"""
        for i, level in enumerate(ROLLUP_LEVELS)
    ),
    "DELETE FROM stats_batch",
    "UPDATE stats_folded SET seq = max(seq, NEW.last) WHERE id = 0",
)


_DECIDE_AFTER = 256
"""Points a series has before its rollup levels are chosen (reading fewer raw rows is cheap)."""
# Candidates for `_decide_statements`: (run, field, n), n the values the fold being applied adds
# to the series (NULL outside a fold: every row is read back).
_DECIDE_ALL = "SELECT run, field, NULL AS n FROM sample_stats GROUP BY run, field"
_DECIDE_BATCH = "SELECT run, field, sum(n) AS n FROM temp.stats_batch GROUP BY run, field"
_LEVEL_BITS = " | ".join(
    f"(CASE WHEN sum(s.n) * {level} >= {MIN_BLOCK_POINTS} * "
    f"(max(s.last_step) - min(s.first_step) + 1) THEN {1 << i} ELSE 0 END)"
    for i, level in enumerate(ROLLUP_LEVELS)
)
_PARTIALS = """INSERT INTO stats_batch
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
       json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'),
       json_extract(value, '$[9]'), json_extract(value, '$[10]'), json_extract(value, '$[11]'),
       json_extract(value, '$[12]')
FROM json_each(NEW.partials)"""


def _decide_statements(candidates: str) -> tuple[str, ...]:
    """Choose the rollup levels of the candidate series with enough points to tell their
    density (a level is kept when its blocks hold `MIN_BLOCK_POINTS` values on average: a run
    logging every 128 steps gets 4096-step blocks and no 64-step ones), and build them from the
    stored rows. The series decided are left in `temp.decided`; `fresh` marks those whose every
    counted value is the fold's own (its candidate n is the series' whole count: nothing was
    stored before it): their rollups are left to the fold, which sums them from its batch
    (`_APPLY`), instead of read back from the rows (an import's first block of 2,048 steps x 120
    names: 0.7 s of reading its own rows again)."""
    return (
        f"""INSERT INTO decided (run, field, levels, fresh)
        SELECT s.run, s.field, {_LEVEL_BITS}, coalesce(sum(s.n) = max(c.n), 0)
        FROM sample_stats s JOIN ({candidates}) c ON c.run = s.run AND c.field = s.field
        WHERE NOT EXISTS (SELECT 1 FROM rollup_series r WHERE r.run = s.run AND r.field = s.field)
        GROUP BY s.run, s.field HAVING sum(s.n) >= {_DECIDE_AFTER}""",
        "INSERT INTO rollup_series (run, field, levels) SELECT run, field, levels FROM temp.decided",
        # CROSS JOIN: the (mostly empty) decided series drive the loop, never a scan of samples
        *(
            f"""INSERT INTO sample_rollups (run, field, level, block, n, total, min_seen, max_seen,
                                        last_step)
        SELECT s.run, s.field, {level}, s.step / {level}, count(*), total(s.value),
               min(s.value), max(s.value), max(s.step)
        FROM temp.decided d CROSS JOIN samples s
        WHERE NOT d.fresh AND s.run = d.run AND s.field = d.field AND d.levels & {1 << i}
            AND {_counted("s.")}
        GROUP BY s.run, s.field, s.step / {level}"""
            for i, level in enumerate(ROLLUP_LEVELS)
        ),
    )


_TEMP_TABLES = (
    _BATCH_TABLE,
    "CREATE TEMP TABLE IF NOT EXISTS decided "
    "(run TEXT, field TEXT, levels INTEGER, fresh INTEGER NOT NULL DEFAULT 0)",
    "CREATE TEMP TABLE IF NOT EXISTS fold_call (last INTEGER, partials TEXT)",
)
# What a fold does once the rows' sums are in `stats_batch`, as one trigger: each statement the
# writer runs lets go of the GIL and must take it back, which under a pure-Python training loop
# is a wait of up to the interpreter's switch interval (5 ms) each; at 5,000 steps/s those waits
# were most of the delay before a step was stored. (A trigger's INSERT and DELETE name their
# tables unqualified; temp ones are found first.)
_FOLD_CALL = f"""CREATE TEMP TRIGGER IF NOT EXISTS fold_call_apply AFTER INSERT ON fold_call
BEGIN
{_PARTIALS};
{";".join(_FOLD_REPLACED)};
{_APPLY[0]};
{";".join(_decide_statements(_DECIDE_BATCH))};
DELETE FROM stats_batch WHERE (run, field) IN (SELECT run, field FROM temp.decided WHERE NOT fresh);
DELETE FROM decided;
{";".join(_APPLY[1:])};
DELETE FROM fold_call;
END"""


def prepare(db: sqlite3.Connection) -> None:
    """Per connection: the temp tables a fold sums into, and its trigger."""
    for statement in _TEMP_TABLES:
        db.execute(statement)
    db.execute(_FOLD_CALL)


def catch_up(db: sqlite3.Connection) -> None:
    """Inside a write transaction, before taking sequence numbers: fold the rows other programs
    wrote since the last fold (numbers past `stats_folded`), read back by number."""
    folded, current = db.execute(
        "SELECT (SELECT seq FROM stats_folded WHERE id = 0), (SELECT n FROM sequence WHERE id = 0)"
    ).fetchone()
    if folded is None or folded >= current:
        return
    _fold(db, _FOLD_OTHERS, folded, current)


def fold(
    db: sqlite3.Connection,
    first: int,
    last: int,
    *,
    ranges: Sequence[tuple[int, int]] | None = None,
    partials: str | None = None,
) -> None:
    """Inside the write transaction that stored samples numbered `first`..`last` (unsent): add
    their values to the statistics and rollups, take out the values they replaced, and mark
    everything numbered up to `last` summed.

    With `ranges` only the rows numbered in those ranges are read back and summed; `partials`
    (a JSON array of `block_partials` rows) brings the sums of the others, computed by the
    writer from the values it had in hand (a columnar block: `block_partials`)."""
    _fold(db, _FOLD_BATCH, first, last, ranges=ranges, partials=partials)


def block_partials(
    run: str,
    rank: int,
    steps: Sequence[int],
    columns: Sequence[tuple[str, str, str]],
    values: npt.NDArray[np.float64],
) -> list[list[Any]]:
    """The rows `fold` sums into per series and finest block, for a block of finite values at
    rising steps (`values[i, j]`: column j at steps[i]; NaN a hole, no sample), computed with
    numpy instead of read back from the file."""
    at = np.asarray(steps, dtype=np.int64)
    blocks = at // _FINE
    starts = np.flatnonzero(np.r_[True, blocks[1:] != blocks[:-1]])
    ends = np.r_[starts[1:], len(at)]
    ids = blocks[starts].tolist()
    present = ~np.isnan(values)
    if present.all():
        counts = np.repeat((ends - starts)[:, None], values.shape[1], axis=1).tolist()
        first_steps = np.repeat(at[starts][:, None], values.shape[1], axis=1).tolist()
        last_steps = np.repeat(at[ends - 1][:, None], values.shape[1], axis=1).tolist()
        filled = values
        lows = np.minimum.reduceat(values, starts, axis=0).tolist()
        highs = np.maximum.reduceat(values, starts, axis=0).tolist()
    else:
        counts = np.add.reduceat(present.astype(np.int64), starts, axis=0).tolist()
        column_steps = np.broadcast_to(at[:, None], values.shape)
        first_steps = np.minimum.reduceat(
            np.where(present, column_steps, np.iinfo(np.int64).max), starts, axis=0
        ).tolist()
        last_steps = np.maximum.reduceat(
            np.where(present, column_steps, -1), starts, axis=0
        ).tolist()
        filled = np.where(present, values, 0.0)
        lows = np.fmin.reduceat(values, starts, axis=0).tolist()  # fmin/fmax: NaN left out
        highs = np.fmax.reduceat(values, starts, axis=0).tolist()
    # values near a float's limit (1e308) overflow the sums to infinity, which is what the
    # statistics then say (their spread is not known); numpy need not warn on the terminal
    with np.errstate(over="ignore", invalid="ignore"):
        totals = np.add.reduceat(filled, starts, axis=0).tolist()
        squares = np.add.reduceat(filled * filled, starts, axis=0).tolist()
    out: list[list[Any]] = []
    for j, (measurement, gpu, field) in enumerate(columns):
        if measurement == RUN_CONFIG:
            continue
        for g, block in enumerate(ids):
            if not counts[g][j]:
                continue  # only holes in this column's block
            out.append(
                [
                    run,
                    field,
                    rank,
                    measurement,
                    gpu,
                    block,
                    counts[g][j],
                    totals[g][j],
                    squares[g][j],
                    first_steps[g][j],
                    last_steps[g][j],
                    lows[g][j],
                    highs[g][j],
                ]
            )
    return out


def _fold(
    db: sqlite3.Connection,
    rows: str,
    first: int,
    last: int,
    *,
    ranges: Sequence[tuple[int, int]] | None = None,
    partials: str | None = None,
) -> None:
    for lo, hi in [(first, last)] if ranges is None else ranges:
        if lo <= hi:
            db.execute(rows, {"first": lo, "last": hi})
    db.execute("INSERT INTO temp.fold_call (last, partials) VALUES (?, ?)", (last, partials))


def _decide(db: sqlite3.Connection, candidates: str) -> None:
    """`_decide_statements` outside a fold (installing the statistics on stored rows)."""
    for statement in _TEMP_TABLES:
        db.execute(statement)
    for statement in _decide_statements(candidates):
        db.execute(statement)
    db.execute("DELETE FROM temp.decided")
