"""The sampler: a source's GPU samples collected in a thread, taken by each window by time.

A source yields `Sample`s stamped with `time.perf_counter()` (the clock of the windows'
`start_s`) until it is closed. The sampler keeps them; a window takes the ones of each GPU
inside its span plus the last one before and the first one after it, so that an analysis
can interpolate power or the energy counter at the window's edges. A source that fails,
or ends by itself, stops the sampling with a warning and never the measurement.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("specsweep.collect")

VALUE_COLUMNS = (
    "power_w",
    "energy_j",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "util_gpu_pct",
    "util_mem_pct",
    "memory_used_mib",
    "temperature_c",
    "throttle_reasons",
)


@dataclass(frozen=True)
class Sample:
    """One reading of one GPU: `t` is perf_counter when it was taken (NVML) or arrived
    (nvidia-smi), `values` the gpu_samples value columns."""

    t: float
    gpu: int
    values: dict[str, Any]


class Source(Protocol):
    name: str  # stored per service in `environment` (nvml | nvidia-smi)

    def samples(self) -> Iterator[Sample]:
        """Samples as they come, until close(); raises when the source fails."""
        ...

    def close(self) -> None: ...


class Sampler:
    """Runs a source in a daemon thread and hands windows their samples."""

    def __init__(self, source: Source, gpus: list[int], period_s: float):
        self.source, self.gpus, self.period_s = source, gpus, period_s
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"specsweep-telemetry-{source.name}"
        )

    @property
    def name(self) -> str:
        return self.source.name

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            for sample in self.source.samples():
                with self._lock:
                    self._samples.append(sample)
        except Exception as exc:  # a failing sampler must never end the measurement
            if not self._closing:
                log.warning("GPU telemetry (%s) failed, no more samples: %s", self.name, exc)
            return
        if not self._closing:
            log.warning("GPU telemetry (%s) ended by itself, no more samples", self.name)

    def take(self, t_start: float, t_end: float) -> list[Sample]:
        """Each GPU's samples in [t_start, t_end] with its last one before and its first one
        after; what is older than t_end is dropped (windows do not overlap)."""
        with self._lock:
            samples = self._samples
            self._samples = [s for s in samples if s.t > t_end]
        taken: list[Sample] = []
        for gpu in sorted({s.gpu for s in samples}):
            mine = [s for s in samples if s.gpu == gpu]
            before = [s for s in mine if s.t < t_start][-1:]
            after = [s for s in mine if s.t > t_end][:1]
            taken += before + [s for s in mine if t_start <= s.t <= t_end] + after
        return taken

    def has_after(self, t: float) -> bool:
        """Every GPU has a sample later than t."""
        with self._lock:
            return {s.gpu for s in self._samples if s.t > t} >= set(self.gpus)

    async def wait_past(self, t: float) -> None:
        """Wait (a few periods at most) until every GPU has a sample later than t."""
        deadline = time.perf_counter() + 3 * self.period_s + 0.5
        while self.alive() and not self.has_after(t) and time.perf_counter() < deadline:
            await asyncio.sleep(min(0.01, self.period_s / 4))

    def stop(self) -> None:
        """Close the source and let the thread end (idempotent)."""
        self._closing = True
        try:
            self.source.close()
        except Exception as exc:
            log.warning("GPU telemetry (%s) did not close cleanly: %s", self.name, exc)
        self._thread.join(timeout=5)
