"""Which source samples a service's GPUs, started and stopped around its windows (the
package docstring)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from specsweep.collect.plan.components import Telemetry
from specsweep.collect.telemetry.sampler import Sampler

log = logging.getLogger("specsweep.collect")


def gpu_list(gpus: str) -> list[int]:
    """The services row's gpus ('0,3', '' on a CPU) as indices."""
    return [int(g) for g in gpus.split(",") if g.strip()]


def open_sampler(host: Any, gpus: list[int], cfg: Telemetry) -> Sampler | None:
    """A started sampler of these GPUs, or None: telemetry off, no GPUs, a host specsweep
    does not run (external), or a source that would not start (a warning says why)."""
    if not cfg.enabled or not gpus or host.cfg.kind not in ("local", "ssh"):
        return None
    try:
        return Sampler(_source(host, gpus, cfg.period_s), gpus, cfg.period_s).start()
    except Exception as exc:  # telemetry never ends a measurement
        log.warning("GPU telemetry not started on GPUs %s of %s: %s", gpus, host.name, exc)
        return None


def _source(host: Any, gpus: list[int], period_s: float) -> Any:
    from specsweep.collect.telemetry import smi

    if host.cfg.kind == "ssh":
        return smi.RemoteSmi(host, gpus, period_s)
    from specsweep.collect.telemetry.nvml import open_nvml

    return open_nvml(gpus, period_s) or smi.LocalSmi(gpus, period_s)


@contextlib.asynccontextmanager
async def sampling(host: Any, gpus: str, cfg: Telemetry) -> AsyncIterator[Sampler | None]:
    """A sampler of a service's GPUs (the services row's gpus) for as long as it measures."""
    sampler = open_sampler(host, gpu_list(gpus), cfg)
    try:
        yield sampler
    finally:
        if sampler is not None:
            sampler.stop()
