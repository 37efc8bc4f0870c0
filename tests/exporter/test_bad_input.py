"""Every kind of bad input has its declared outcome, and the training loop keeps running."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import exporter
import registry


def _local(tmp_path: Path, reg: registry.Registry, policy: str, name: str = "r") -> exporter.Run:
    settings = exporter.ExporterSettings(store=tmp_path)
    return exporter.init(name, registry=reg, settings=settings, policy=policy)


@pytest.mark.parametrize(
    ("step", "values", "needle"),
    [
        (-1, {"losses/clipfrac": 0.1}, "step -1 is negative"),
        (1.5, {"losses/clipfrac": 0.1}, "not an integer"),
        ("7", {"losses/clipfrac": 0.1}, "not an integer"),
        (
            3,
            {"losses/clipfrac": "high"},
            "'high' (str) of 'losses/clipfrac' at step 3 is not a number",
        ),
        (3, {"losses/clipfrac": None}, "is not a number"),
        (3, {"no/such_metric": 1.0}, "'no/such_metric' at step 3"),
        (3, {"kl": 0.1}, "means different things"),
        (
            3,
            {"losses/clipfrac": 1.5},
            "clip_fraction=1.5 (from 'losses/clipfrac', identity) at step 3 is outside",
        ),
        (3, [("losses/clipfrac", 0.1)], "must be a mapping"),
    ],
)
def test_strict_policy_raises_invalid_sample_naming_the_problem(
    tmp_path: Path, reg: registry.Registry, step: Any, values: Any, needle: str
) -> None:
    with _local(tmp_path, reg, "strict") as run:
        with pytest.raises(exporter.InvalidSample) as info:
            run.log(step, values)
        assert needle in str(info.value)
        assert isinstance(info.value, ValueError) and isinstance(info.value, exporter.ExporterError)
        assert info.value.step == step
        run.log(4, {"losses/clipfrac": 0.2})  # the loop goes on
        assert run.flush()
        assert run.stats.accepted == 1


def test_strict_limits_apply_to_the_transformed_value(
    tmp_path: Path, reg: registry.Registry
) -> None:
    settings = exporter.ExporterSettings(store=tmp_path)
    with exporter.init(
        "sb3", registry=reg, settings=settings, policy="strict", framework="sb3"
    ) as run:
        with pytest.raises(
            exporter.InvalidSample, match=r"policy_entropy=-0\.5 \(from 'train/entropy_loss'"
        ):
            run.log(1, {"train/entropy_loss": 0.5})
        run.log(1, {"train/entropy_loss": -0.5})


def test_strict_policy_rejects_bad_events(tmp_path: Path, reg: registry.Registry) -> None:
    with _local(tmp_path, reg, "strict") as run:
        with pytest.raises(exporter.InvalidSample, match="reserved"):
            run.event(1, "checkpoint", wall_time=3.0)
        with pytest.raises(exporter.InvalidSample, match="non-empty"):
            run.event(1, "")
        with pytest.raises(exporter.InvalidSample, match="must be a str"):
            run.event(1, "x", blob=[1, 2])


def test_nan_and_inf_become_counters_and_a_health_event_never_values(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    with exporter.init("nan", registry=reg, settings=influx.settings(tmp_path)) as run:
        run.log(1, {"losses/clipfrac": 0.1, "train/approx_kl": float("nan")})
        run.log(2, {"losses/clipfrac": float("inf"), "train/approx_kl": np.float32("nan")})
        run.log(3, {"losses/clipfrac": 0.3, "train/approx_kl": 0.01})
        assert run.flush()
        stats = run.stats
    assert stats.nonfinite == {"policy_kl": 2, "clip_fraction": 1}
    rows = influx.query('SELECT "clip_fraction", "policy_kl" FROM "policy"')
    assert [(r["time"], r["clip_fraction"], r["policy_kl"]) for r in rows] == [
        (1, 0.1, None),
        (3, 0.3, 0.01),
    ]
    health = influx.query('SELECT "text" FROM "events" WHERE "kind" = \'health\'')
    assert [r["time"] for r in health] == [1, 2]
    assert "policy_kl=nan" in health[0]["text"] and "clip_fraction=inf" in health[1]["text"]


def test_warn_policy_logs_once_per_name_and_stores_unknown_names_as_unregistered(
    tmp_path: Path, reg: registry.Registry, influx: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = influx.settings(tmp_path, policy="warn")
    with (
        caplog.at_level(logging.WARNING),
        exporter.init("w", registry=reg, settings=settings) as run,
    ):
        for step in range(5):
            run.log(
                step,
                {"my custom/thing": float(step), "losses/clipfrac": 2.0, "train/approx_kl": "x"},
            )
        run.log(-3, {"losses/clipfrac": 0.1})
        assert run.flush()
        stats = run.stats
    assert (stats.unregistered, stats.rejected, stats.accepted) == (5, 11, 0)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("my custom/thing" in m for m in messages) == 1
    assert sum("outside its physical limits" in m for m in messages) == 1
    assert sum("is not a number" in m for m in messages) == 1
    assert sum("negative" in m for m in messages) == 1
    rows = influx.query('SELECT "my custom/thing" FROM "unregistered"')
    assert [r["my custom/thing"] for r in rows] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert influx.query('SELECT * FROM "policy"') == []


def test_drop_policy_counts_and_drops_silently(
    tmp_path: Path, reg: registry.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), _local(tmp_path, reg, "drop") as run:
        run.log(1, {"unknown": 1.0, "losses/clipfrac": -1.0, "losses/value_loss": 0.5})
        run.log(-1, {"losses/clipfrac": 0.5})
        assert run.flush()
        stats = run.stats
    assert (stats.rejected, stats.unregistered, stats.accepted) == (3, 0, 1)
    assert not [r for r in caplog.records if r.name == "exporter"]
    with exporter.Outbox(tmp_path / "outbox.sqlite") as box:
        assert box.fields("r", measurement="unregistered") == []


def test_odd_value_types_that_are_numbers_are_accepted(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _local(tmp_path, reg, "strict") as run:
        run.log(np.int64(2), {"losses/clipfrac": np.float32(0.5), "losses/value_loss": 3})
        assert run.flush()
        assert run.stats.accepted == 2


def _deep_dict(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    cur = top
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return top


@pytest.mark.parametrize("where", ["as a value", "as the mapping"])
def test_strict_raises_invalid_sample_for_a_10000_deep_dict(
    tmp_path: Path, reg: registry.Registry, where: str
) -> None:
    deep = _deep_dict(10_000)
    values = {"losses/clipfrac": deep} if where == "as a value" else deep
    with _local(tmp_path, reg, "strict") as run:
        with pytest.raises(exporter.InvalidSample) as info:
            run.log(3, values)
        assert "is not a number" in str(info.value)
        assert len(str(info.value)) < 400  # names the value without printing 10,000 levels
        run.log(4, {"losses/clipfrac": 0.2})
        assert run.flush()


class _Hostile(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise RuntimeError("items() exploded")


def test_strict_raises_invalid_sample_when_the_mapping_itself_fails(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with (
        _local(tmp_path, reg, "strict") as run,
        pytest.raises(exporter.InvalidSample, match=r"RuntimeError: 'items\(\) exploded'"),
    ):
        run.log(3, _Hostile(x=1))


def test_strict_refuses_steps_influxdb_cannot_store_exactly_where_the_server_does(
    tmp_path: Path, reg: registry.Registry, influx: Any
) -> None:
    """The limit is InfluxDB's, measured on the real server: the last step it accepts (at the
    exporter's precision, seconds) is logged, the next one and 10**12 are refused."""
    edge = exporter.schema.INFLUX_MAX_STEP
    influx.write(f"probe v=1 {edge}")  # the server takes the edge...
    with pytest.raises(Exception, match="400"):  # ...and refuses one more
        influx.write(f"probe v=1 {edge + 1}")
    settings = influx.settings(tmp_path)
    with exporter.init("big", registry=reg, settings=settings, policy="strict") as run:
        for step in (edge + 1, 10**12, 2**63 - 1):
            with pytest.raises(exporter.InvalidSample, match="largest step InfluxDB can store"):
                run.log(step, {"losses/clipfrac": 0.1})
            with pytest.raises(exporter.InvalidSample, match="largest step InfluxDB can store"):
                run.event(step, "checkpoint")
        run.log(edge, {"losses/clipfrac": 0.1})
        assert run.flush()
    group = reg.metric("clip_fraction").group
    rows = influx.query(f'SELECT "clip_fraction" FROM "{group}"')
    assert [(r["time"], r["clip_fraction"]) for r in rows] == [(edge, 0.1)]


def test_without_influxdb_strict_stores_steps_up_to_64_bits(
    tmp_path: Path, reg: registry.Registry
) -> None:
    with _local(tmp_path, reg, "strict") as run:
        run.log(10**12, {"losses/clipfrac": 0.1})
        assert run.flush()
        assert run.stats.accepted == 1
