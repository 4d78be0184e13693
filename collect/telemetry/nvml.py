"""The NVML source (package nvidia-ml-py, `import pynvml`): this machine's GPUs read in
process every period, with the total-energy counter that nvidia-smi's stream lacks.

`open_nvml` returns None where libnvidia-ml cannot be loaded or initialised (no driver):
the caller falls back to nvidia-smi. A reading a GPU does not support is None. Each
sample is stamped with perf_counter halfway through its GPU's calls. NVML's power reading
is, like nvidia-smi's power.draw, a one-second average on Ampere and newer GPUs (except
GA100); the energy counter (Volta and newer) is exact, so energy over a window is best
taken from energy_j where it is present.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from specsweep.collect.telemetry.sampler import Sample
from specsweep.collect.telemetry.smi import reason_names

MIB = 1 << 20


def open_nvml(gpus: list[int], period_s: float) -> Nvml | None:
    """An NVML source for these GPUs (NVML indices = nvidia-smi's), or None without NVML."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        handles = {g: pynvml.nvmlDeviceGetHandleByIndex(g) for g in gpus}
    except pynvml.NVMLError:
        pynvml.nvmlShutdown()
        raise
    return Nvml(pynvml, handles, period_s)


class Nvml:
    """Reads every GPU each period on an absolute schedule (no drift), until close()."""

    name = "nvml"

    def __init__(self, nvml: Any, handles: dict[int, Any], period_s: float):
        self.nvml, self.handles, self.period_s = nvml, handles, period_s
        self._closed = threading.Event()

    def samples(self) -> Iterator[Sample]:
        due = time.perf_counter()
        try:
            while not self._closed.is_set():
                for gpu, handle in self.handles.items():
                    t0 = time.perf_counter()
                    values = self.read(handle)
                    yield Sample((t0 + time.perf_counter()) / 2, gpu, values)
                due += self.period_s
                self._closed.wait(max(0.0, due - time.perf_counter()))
        finally:  # here, not in close(): no call may run after the shutdown
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlShutdown()

    def read(self, handle: Any) -> dict[str, Any]:
        """One GPU's gpu_samples values."""
        n = self.nvml
        util = self._get(n.nvmlDeviceGetUtilizationRates, handle)
        memory = self._memory(handle)
        power = self._get(n.nvmlDeviceGetPowerUsage, handle)  # mW
        energy = self._get(n.nvmlDeviceGetTotalEnergyConsumption, handle)  # mJ
        reasons = self._get(_reasons_call(n), handle)
        return {
            "power_w": power / 1000 if power is not None else None,
            "energy_j": energy / 1000 if energy is not None else None,
            "sm_clock_mhz": _float(self._get(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_SM)),
            "mem_clock_mhz": _float(self._get(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_MEM)),
            "util_gpu_pct": _float(util.gpu) if util is not None else None,
            "util_mem_pct": _float(util.memory) if util is not None else None,
            "memory_used_mib": memory.used / MIB if memory is not None else None,
            "temperature_c": _float(
                self._get(n.nvmlDeviceGetTemperature, handle, n.NVML_TEMPERATURE_GPU)
            ),
            "throttle_reasons": reason_names(reasons) if reasons is not None else "",
        }

    def _memory(self, handle: Any) -> Any:
        """Memory info as nvidia-smi's memory.used counts it (v2: without the driver's
        reserved memory, about 600 MiB on an H200), else the v1 figure."""
        v2 = getattr(self.nvml, "nvmlMemory_v2", None)
        info = self._get(self.nvml.nvmlDeviceGetMemoryInfo, handle, v2) if v2 else None
        return info if info is not None else self._get(self.nvml.nvmlDeviceGetMemoryInfo, handle)

    def _get(self, call: Callable[..., Any], *args: Any) -> Any:
        """call(*args), or None where the GPU does not support it."""
        try:
            return call(*args)
        except self.nvml.NVMLError:
            return None

    def close(self) -> None:
        """Stop after the current round (the sampling thread shuts NVML down)."""
        self._closed.set()


def _reasons_call(nvml: Any) -> Callable[..., Any]:
    """Clock-event reasons: the current name, or the older 'throttle' one."""
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None
