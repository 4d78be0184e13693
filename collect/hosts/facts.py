"""A machine's facts read over a host's command runner: OS, CPU, memory, GPUs (nvidia-smi) and
the compute processes on them. No nvidia-smi (or no driver) is a normal case: no GPUs."""

from __future__ import annotations

from specsweep.collect.hosts.base import Runner

GPU_QUERY = "index,name,memory.total,memory.used,driver_version"
APP_QUERY = "gpu_uuid,pid,used_memory"

_HOST_FACTS = r"""echo "os=$(uname -srmo 2>/dev/null || uname -a)"
echo "hostname=$(uname -n)"
echo "cpu.count=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "cpu.model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
echo "memory.total_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo 2>/dev/null)"
echo "python=$(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null)"
"""
# Without a driver nvidia-smi fails or prints "No devices were found": no gpu= lines then.
_GPU_FACTS = rf"""if command -v nvidia-smi >/dev/null 2>&1 && \
  gpus=$(nvidia-smi --query-gpu={GPU_QUERY} --format=csv,noheader,nounits 2>/dev/null) && \
  [ -n "$gpus" ]; then
  printf '%s\n' "$gpus" | sed 's/^/gpu=/'
  echo "cuda.version=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
fi
"""

_NVIDIA_SMI = 'command -v nvidia-smi >/dev/null 2>&1 || exit 0; exec nvidia-smi "$@"'


# nvidia-smi's exit codes for a machine without a usable GPU: 9 the driver is not loaded,
# 12 libnvidia-ml is missing; 6 with "No devices were found" on stdout, no GPU at all.
NO_DRIVER = {9, 12}


def nvidia_smi(runner: Runner, *args: str) -> str:
    """nvidia-smi's output, or "" on a machine without it, its driver or a GPU."""
    rc, out, err = runner.run(["sh", "-c", _NVIDIA_SMI, "sh", *args])
    if rc in NO_DRIVER or "No devices were found" in out + err:
        return ""
    if rc != 0:
        raise RuntimeError(f"nvidia-smi {' '.join(args)} failed (rc {rc}): {err.strip()}")
    return out


def parse_csv(text: str, fields: list[str]) -> list[dict[str, str]]:
    """nvidia-smi csv,noheader rows as dicts."""
    rows = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values)))
    return rows


def fingerprint(runner: Runner) -> dict[str, str]:
    """Hardware and OS facts, in one round trip."""
    return parse_fingerprint(runner.run(["sh", "-c", _HOST_FACTS + _GPU_FACTS])[1])


def gpu_facts(runner: Runner) -> dict[str, str]:
    """The GPU part of `fingerprint` (gpus, gpu.<i>.*, gpu.driver, cuda.version)."""
    return parse_gpu_facts(runner.run(["sh", "-c", _GPU_FACTS])[1])


def parse_fingerprint(out: str) -> dict[str, str]:
    """The `key=value` lines of the fingerprint script as `environment` facts."""
    facts: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key and key != "gpu":
            facts[key] = value.strip() or "unknown"
    kb = facts.pop("memory.total_kb", "unknown")
    facts["memory.total_gb"] = f"{int(kb) / 1024**2:.1f}" if kb.isdigit() else "unknown"
    return {**facts, **parse_gpu_facts(out)}


def parse_gpu_facts(out: str) -> dict[str, str]:
    """The `gpu=` and `cuda.version=` lines as `environment` facts; gpus 'none' without."""
    facts: dict[str, str] = {}
    gpu_lines = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key == "gpu":
            gpu_lines.append(value)
        elif key == "cuda.version":
            facts[key] = value.strip() or "unknown"
    gpus = parse_csv("\n".join(gpu_lines), GPU_QUERY.split(","))
    facts["gpus"] = str(len(gpus)) if gpus else "none"
    for gpu in gpus:
        i = gpu["index"]
        facts[f"gpu.{i}.name"] = gpu["name"]
        facts[f"gpu.{i}.memory_total_mib"] = gpu["memory.total"]
        facts[f"gpu.{i}.memory_used_mib"] = gpu["memory.used"]
        facts["gpu.driver"] = gpu["driver_version"]
    return facts


def gpu_processes(runner: Runner) -> list[dict[str, str]]:
    """Compute processes on the GPUs (gpu_uuid, pid, used_memory); [] without nvidia-smi."""
    out = nvidia_smi(runner, f"--query-compute-apps={APP_QUERY}", "--format=csv,noheader")
    return parse_csv(out, APP_QUERY.split(","))


def gpu_indices(runner: Runner) -> list[int]:
    """Indices of the GPUs nvidia-smi lists; [] without it."""
    out = nvidia_smi(runner, "--query-gpu=index", "--format=csv,noheader")
    return [int(row["index"]) for row in parse_csv(out, ["index"])]


def gpu_memory_mib(runner: Runner) -> dict[int, float]:
    """Total memory (MiB) of each GPU nvidia-smi lists, by index; {} without it."""
    out = nvidia_smi(runner, "--query-gpu=index,memory.total", "--format=csv,noheader,nounits")
    return {int(r["index"]): float(r["memory"]) for r in parse_csv(out, ["index", "memory"])}


def busy_gpus(runner: Runner) -> set[int]:
    """Indices of the GPUs running at least one compute process."""
    out = nvidia_smi(runner, "--query-gpu=index,uuid", "--format=csv,noheader")
    index = {row["uuid"]: int(row["index"]) for row in parse_csv(out, ["index", "uuid"])}
    return {index[p["gpu_uuid"]] for p in gpu_processes(runner) if p["gpu_uuid"] in index}
