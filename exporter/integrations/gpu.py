"""Optional GPU sampler (extra `gpu`, package nvidia-ml-py): utilization, memory used/total,
power and temperature of every device, logged at the run's current step with a `gpu` label.

Names are `gpu/<index>/<reading>` (`utilization_percent`, `memory_used_bytes`,
`memory_total_bytes`, `power_watts`, `temperature_c`); the registry's `gpu/{gpu}/...` aliases
turn `<index>` into the `gpu` tag. Without the package, a driver or a device the sampler says so
once (logging, and a `health` event on the run) and stays off; it never raises into training.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .target import StepLogger

__all__ = ["GpuReading", "GpuSampler", "read_gpus"]

_log = logging.getLogger("exporter")


@dataclass(frozen=True)
class GpuReading:
    """One device at one moment; a reading the device does not support is None."""

    index: int
    utilization_percent: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    power_watts: float | None
    temperature_c: float | None

    def values(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in (
            "utilization_percent",
            "memory_used_bytes",
            "memory_total_bytes",
            "power_watts",
            "temperature_c",
        ):
            value = getattr(self, name)
            if value is not None:
                out[f"gpu/{self.index}/{name}"] = float(value)
        return out


def _try(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # NVMLError_NotSupported and friends: that reading is not available
        return None


def _utilization(nvml: ModuleType, handle: Any) -> Any:
    return nvml.nvmlDeviceGetUtilizationRates(handle).gpu


def read_gpus(nvml: ModuleType) -> list[GpuReading]:
    """Read every device through an initialised `pynvml` module."""
    readings = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        util = _try(functools.partial(_utilization, nvml, handle))
        memory = _try(functools.partial(nvml.nvmlDeviceGetMemoryInfo, handle))
        power = _try(functools.partial(nvml.nvmlDeviceGetPowerUsage, handle))
        temp = _try(
            functools.partial(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
        )
        readings.append(
            GpuReading(
                index=index,
                utilization_percent=None if util is None else float(util),
                memory_used_bytes=None if memory is None else float(memory.used),
                memory_total_bytes=None if memory is None else float(memory.total),
                power_watts=None if power is None else power / 1000.0,
                temperature_c=None if temp is None else float(temp),
            )
        )
    return readings


class GpuSampler:
    """Samples every `interval` seconds on a daemon thread and logs at `current_step()`.

    `start()` returns False (after saying why, once) when there is no NVML, driver or device.
    """

    def __init__(
        self,
        run: StepLogger,
        current_step: Callable[[], int | None],
        *,
        interval: float = 10.0,
        nvml: ModuleType | None = None,
    ) -> None:
        self._run = run
        self._current_step = current_step
        self._interval = interval
        self._nvml = nvml
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.active = False
        self.reason: str | None = None

    def start(self) -> bool:
        nvml = self._nvml
        try:
            if nvml is None:
                import pynvml

                nvml = pynvml
            nvml.nvmlInit()
            count = int(nvml.nvmlDeviceGetCount())
        except ImportError:
            return self._off("nvidia-ml-py is not installed (pip install 'rlvitals[gpu]')")
        except Exception as exc:  # NVMLError: no driver / library on this machine
            return self._off(f"NVML is not available ({exc})")
        if count == 0:
            return self._off("NVML found no GPU")
        self._nvml = nvml
        self.active = True
        self._thread = threading.Thread(target=self._loop, name="rlvitals-gpu", daemon=True)
        self._thread.start()
        return True

    def sample_once(self) -> list[GpuReading]:
        """Read and log all devices now (at the current step); nothing before the first step."""
        if self._nvml is None or not self.active:
            return []
        step = self._current_step()
        readings = read_gpus(self._nvml)
        if step is not None:
            values: dict[str, float] = {}
            for reading in readings:
                values.update(reading.values())
            if values:
                self._run.log(step, values)
        return readings

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.active and self._nvml is not None:
            _try(self._nvml.nvmlShutdown)
        self.active = False

    def _off(self, reason: str) -> bool:
        self.reason = reason
        _log.info("rlvitals GPU sampler off: %s", reason)
        step = _try(self._current_step)
        if step is not None:
            _try(lambda: self._run.event(step, "health", text=f"GPU sampler off: {reason}"))
        return False

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sample_once()
            except Exception as exc:  # a driver hiccup must not end the training
                _log.warning("rlvitals GPU sampler stopped: %s", exc)
                self.active = False
                return
