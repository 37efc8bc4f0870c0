"""The GPU sampler: readings per device at the current step, or off (said once) without NVML.

There is no GPU on these machines, so NVML is played by a small stand-in module that answers the
same calls pynvml makes; the real pynvml is used for the no-driver case."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from installed import installed

from exporter.integrations.gpu import GpuSampler


class _Recorder:
    def __init__(self) -> None:
        self.logs: list[tuple[int, dict[str, float]]] = []
        self.events: list[tuple[int, str, str]] = []

    def log(self, step: int, values: Mapping[str, float], **kw: Any) -> None:
        self.logs.append((step, dict(values)))

    def event(self, step: int, kind: str, text: str = "", **fields: object) -> None:
        self.events.append((step, kind, text))


class _NotSupported(Exception):
    pass


def _fake_nvml(devices: int) -> ModuleType:
    nvml = ModuleType("pynvml")
    nvml.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: devices  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=50 + h, memory=10)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(used=2**30, total=2**34, free=0)  # type: ignore[attr-defined]

    def power(h: int) -> int:
        if h == 1:
            raise _NotSupported("power not supported")
        return 250_000  # milliwatts

    nvml.nvmlDeviceGetPowerUsage = power  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetTemperature = lambda h, sensor: 60 + h  # type: ignore[attr-defined]
    return nvml


def test_sampler_logs_each_device_at_the_current_step() -> None:
    run = _Recorder()
    sampler = GpuSampler(run, lambda: 1200, interval=3600, nvml=_fake_nvml(2))
    assert sampler.start()
    readings = sampler.sample_once()
    sampler.stop()
    assert [r.index for r in readings] == [0, 1]
    ((step, values),) = run.logs
    assert step == 1200
    assert values["gpu/0/utilization_percent"] == 50.0
    assert values["gpu/1/temperature_c"] == 61.0
    assert values["gpu/0/power_watts"] == 250.0
    assert "gpu/1/power_watts" not in values  # unsupported reading: left out, not an error
    assert values["gpu/0/memory_total_bytes"] == float(2**34)


def test_sampler_without_a_driver_says_so_once_and_stays_off() -> None:
    installed("pynvml", "nvidia-ml-py")
    run = _Recorder()
    sampler = GpuSampler(run, lambda: 7, interval=3600)
    if sampler.start():  # a machine with a GPU: nothing to check here
        sampler.stop()
        pytest.skip("this machine has a GPU")
    assert sampler.reason and "NVML" in sampler.reason
    assert sampler.sample_once() == []
    assert run.logs == []
    assert [(s, k) for s, k, _ in run.events] == [(7, "health")]


def test_sampler_before_the_first_step_logs_nothing() -> None:
    run = _Recorder()
    sampler = GpuSampler(run, lambda: None, interval=3600, nvml=_fake_nvml(1))
    assert sampler.start()
    assert len(sampler.sample_once()) == 1
    sampler.stop()
    assert run.logs == []
