"""Fuzzing `log()` and `event()`: whatever invalid calls are mixed in, every valid sample logged
before and after them is stored exactly, and the run's counts add up."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exporter
import registry

_VALID_NAMES = ("losses/clipfrac", "losses/value_loss")

_junk_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=12
) | st.sampled_from(["\udc80", "a\\", "x\ny", "\x00", "", " ", "train/approx_kl", "kl"])
_junk_step = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.just(2**63),
)
_junk_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.just(2.0),  # outside clip_fraction's limits
)
_junk_call = st.one_of(
    st.tuples(
        st.just("log"),
        _junk_step,
        st.dictionaries(
            st.one_of(_junk_text, st.sampled_from(_VALID_NAMES)), _junk_value, max_size=4
        )
        | st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    ),
    st.tuples(
        st.just("event"),
        _junk_step,
        _junk_text | st.integers(),
        _junk_text,
        st.dictionaries(_junk_text, _junk_value | _junk_text, max_size=3),
    ),
)
_valid_value = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def _is_valid_sample(name: Any, value: Any) -> bool:
    return name == "losses/clipfrac" and isinstance(value, float) and 0.0 <= value <= 1.0


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    valid=st.lists(_valid_value, min_size=1, max_size=40),
    junk=st.lists(st.tuples(st.integers(min_value=0, max_value=40), _junk_call), max_size=25),
    policy=st.sampled_from(["warn", "drop"]),
)
def test_every_valid_sample_around_invalid_calls_is_stored_exactly(
    reg: registry.Registry, valid: list[float], junk: list[tuple[int, Any]], policy: str
) -> None:
    # valid samples at steps 10**6 + i: no junk call can name a step there with a valid value
    base = 10**6
    at: dict[int, list[Any]] = {}
    for position, call in junk:
        at.setdefault(position, []).append(call)
    with tempfile.TemporaryDirectory() as store:
        settings_ = exporter.ExporterSettings(store=Path(store))
        with exporter.init("fuzz", registry=reg, settings=settings_, policy=policy) as run:
            for i, value in enumerate(valid):
                for call in at.get(i, []):
                    _call(run, call)
                run.log(base + i, {"losses/clipfrac": value})
            for call in at.get(len(valid), []) + [
                c for p, cs in at.items() if p > len(valid) for c in cs
            ]:
                _call(run, call)
            assert run.flush(timeout=30)
            stats = run.stats
        with exporter.Outbox(Path(store) / "outbox.sqlite") as box:
            steps, values = box.series("fuzz", "clip_fraction", start=base)
    assert [int(s) for s in steps] == [base + i for i in range(len(valid))]
    assert [float(v) for v in values] == valid
    assert stats.dropped == 0 and stats.refused_disk == 0


def _call(run: exporter.Run, call: Any) -> None:
    if call[0] == "log":
        _, step, values = call
        if isinstance(values, dict) and any(_is_valid_sample(k, v) for k, v in values.items()):
            values = {k: v for k, v in values.items() if not _is_valid_sample(k, v)}
        run.log(step, values)
    else:
        _, step, kind, text, fields = call
        clean = {str(k): v for k, v in fields.items() if k not in ("step", "kind", "text")}
        run.event(step, kind, text, **clean)
