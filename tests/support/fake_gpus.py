"""A scripted stand-in for `nvidia-smi`: a bash script answering the exact queries specsweep
sends (collect/hosts/facts.py and the telemetry stream of collect/telemetry/smi.py), for
tests on a machine without GPUs. Every call's arguments are appended to calls.log beside it.

Telemetry (`-lms N -i ids`): every N ms one line per GPU, at most `limit` rounds. GPU g in
round k (1-based) draws 100 + 50 g + 10 (k mod 4) W; GPU 1 reports power as [N/A] and the
reasons idle + sw_power_cap; GPU 2 reports temperature as [Not Supported] and hw_slowdown +
hw_thermal_slowdown; every other GPU is idle only (no throttle reason).

`sample_for` reads what a started sampler (of these GPUs or real ones) takes in a while.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specsweep.collect.telemetry import Sample, Sampler

_SCRIPT = r"""#!/bin/bash
echo "$*" >> "{log}"
GPUS={count}
BUSY=" {busy} "
case "$1" in
  "")
    echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |"
    ;;
  --query-gpu=index,name,memory.total,memory.used,driver_version)
    for ((g = 0; g < GPUS; g++)); do
      echo "$g, NVIDIA H200, {memory}, 4, 550.54.15"
    done
    ;;
  --query-gpu=index)
    for ((g = 0; g < GPUS; g++)); do echo "$g"; done
    ;;
  --query-gpu=index,memory.total)
    for ((g = 0; g < GPUS; g++)); do echo "$g, {memory}"; done
    ;;
  --query-gpu=index,uuid)
    for ((g = 0; g < GPUS; g++)); do echo "$g, GPU-fake-$g"; done
    ;;
  --query-compute-apps=gpu_uuid,pid,used_memory)
    for ((g = 0; g < GPUS; g++)); do
      case "$BUSY" in *" $g "*) echo "GPU-fake-$g, 4242$g, 1024 MiB" ;; esac
    done
    ;;
  --query-gpu=index,power.draw,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,\
memory.used,temperature.gpu,clocks_event_reasons.active|\
--query-gpu=index,power.draw,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,\
memory.used,temperature.gpu,clocks_throttle_reasons.active)
    if [ {old_driver} = 1 ] && [ "${{1%clocks_event_reasons.active}}" != "$1" ]; then
      echo 'Field "clocks_event_reasons.active" is not a valid field to query.'
      exit 2
    fi
    ms=100 ids=0
    while [ $# -gt 0 ]; do
      case "$1" in -lms) ms=$2; shift ;; -i) ids=$2; shift ;; esac
      shift
    done
    pause=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
    for ((k = 1; k <= {limit}; k++)); do
      for g in ${{ids//,/ }}; do
        power=$((100 + 50 * g + 10 * (k % 4))).00 temp=45 reasons=0x0000000000000001
        [ "$g" = 1 ] && power="[N/A]" reasons=0x0000000000000005
        [ "$g" = 2 ] && temp="[Not Supported]" reasons=0x0000000000000048
        echo "$g, $power, 1980, 2619, $((k % 101)), 7, 20480, $temp, $reasons"
      done
      sleep "$pause"
    done
    ;;
  *)
    echo "fake nvidia-smi: no answer for $*" >&2
    exit 2
    ;;
esac
"""

NO_DRIVER = """#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
Make sure that the latest NVIDIA driver is installed and running."
exit 9
"""


def install(
    folder: Path,
    count: int = 2,
    busy: tuple[int, ...] = (),
    memory_mib: int = 143771,
    limit: int = 600,
    old_driver: bool = False,
) -> Path:
    """Write folder/nvidia-smi for `count` GPUs of which `busy` run a compute process;
    returns the script's path (put `folder` first on PATH). `old_driver`: like drivers
    before R535, refuse clocks_event_reasons.active and know clocks_throttle_reasons.active."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(
        _SCRIPT.format(
            log=folder / "calls.log",
            count=count,
            limit=limit,
            busy=" ".join(map(str, busy)),
            memory=memory_mib,
            old_driver=int(old_driver),
        )
    )
    script.chmod(0o755)
    return script


def install_without_driver(folder: Path) -> Path:
    """An nvidia-smi that fails as it does where the driver is not loaded (exit 9)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(NO_DRIVER)
    script.chmod(0o755)
    return script


def sample_for(sampler: Sampler, seconds: float) -> tuple[list[Sample], float, float]:
    """Let a started sampler run for `seconds`, then stop it; returns the samples it took
    between the two perf_counter() stamps t0 and t1 around the wait, and t0 and t1."""
    try:
        t0 = time.perf_counter()
        time.sleep(seconds)
        t1 = time.perf_counter()
        taken = sampler.take(t0, t1)
    finally:
        sampler.stop()
    return taken, t0, t1
