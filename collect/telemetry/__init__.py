"""GPU telemetry: every GPU a service holds is sampled at a fixed period (plan `telemetry`)
while its windows run, into the raw table gpu_samples (power, energy, clocks, utilisation,
memory, temperature, clock-event reasons), stamped on the clock of requests.start_s.

`sampling(host, gpus, cfg)` picks the source: NVML in process on a local host (`nvml`),
`nvidia-smi -lms` as a local subprocess where NVML cannot be loaded, and over an exec
channel of the connection on an SSH host (`smi`); `sampler` keeps the samples for the
windows to take. A sampler that fails never ends a measurement: a warning is logged and
what it missed is not stored (endpoint_errors records server endpoints only).
"""

from specsweep.collect.telemetry.sampler import Sample, Sampler
from specsweep.collect.telemetry.sampling import gpu_list, open_sampler, sampling

__all__ = ["Sample", "Sampler", "gpu_list", "open_sampler", "sampling"]
