"""The local host: this machine runs commands and server processes.

Its GPUs are read as the SSH host reads them (`collect.hosts.facts`, nvidia-smi through
`run`): no nvidia-smi, no driver or no GPU is a normal case, a CPU-only machine.

A host starts a server as its own process group with output to a log file, and stops it
with SIGTERM to the server itself, then SIGKILL to whatever of its group is left once it has
exited or after a grace period, so no child (a llama.cpp worker, a Python engine's
tensor-parallel ranks) outlives the service.

The server first, not its whole group: SGLang's launcher reads its scheduler's exit on the
same SIGTERM as a crashed child and sleeps 5 s for crash diagnostics before it exits (5 of 6
stops on an H200 took 5.7-6.7 s; the one where the launcher handled the signal first, 0.6 s:
docs/measurements/2026-12-04-sglang-draft-vllm-k2-h200.md). Every engine's launcher stops its
own children on SIGTERM; the group's SIGKILL is for what it leaves behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import signal
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from specsweep.collect.hosts import facts
from specsweep.collect.hosts.base import Process
from specsweep.collect.plan.components import LocalHost


class Local:
    """This machine."""

    def __init__(self, cfg: LocalHost):
        self.cfg, self.name = cfg, cfg.name

    def start(self, argv: list[str], env: dict[str, str], log_path: Path) -> Process:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            popen = (
                _spawner()
                .submit(
                    subprocess.Popen,
                    argv,
                    env={**os.environ, **env},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=functools.partial(_die_with_parent, os.getpid()),
                )
                .result()
            )
        return Process(pid=popen.pid, log_path=log_path, popen=popen)

    def run(self, cmd: list[str], timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run a command (argv, no shell); (returncode, stdout, stderr)."""
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 127, "", str(exc)
        return done.returncode, done.stdout, done.stderr

    def free_port(self, address: str) -> int:
        """A port nothing listens on now (the server binds it moments later)."""
        with socket.socket() as s:
            s.bind((address, 0))
            return s.getsockname()[1]

    def endpoint(self, address: str, port: int) -> str:
        """Base URL the client uses for a server bound to address:port on this host."""
        return f"http://{address}:{port}"

    def transport(self, address: str) -> str:
        """How the client reaches a server bound to address: straight to its socket."""
        return "direct"

    def log_dir(self, default: Path) -> Path:
        return default

    def read_file(self, path: str) -> str:
        return Path(path).expanduser().read_text()

    def describe(self, command: str) -> str:
        """How the services row shows a launch."""
        return command

    def close(self) -> None:
        """Nothing to release for this machine."""

    def gpu_indices(self) -> list[int]:
        """GPUs services may use: the plan's list, else what nvidia-smi lists ([] without)."""
        return list(self.cfg.gpus) if self.cfg.gpus is not None else facts.gpu_indices(self)

    def busy_gpus(self) -> set[int]:
        """GPUs running at least one compute process (a service's own included)."""
        return facts.busy_gpus(self)

    def gpu_processes(self) -> list[dict[str, str]]:
        """Compute processes on the GPUs (gpu_uuid, pid, used_memory); [] without nvidia-smi."""
        return facts.gpu_processes(self)

    def alive(self, proc: Process) -> bool:
        return proc.popen is not None and proc.popen.poll() is None

    def stop(self, proc: Process, grace_s: float = 10.0) -> None:
        """SIGTERM the server, then SIGKILL its process group once the server has exited or
        after grace_s (what its children left, or all of it); idempotent."""
        if proc.popen is None:
            return
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=grace_s)
        _signal_group(proc.pid, signal.SIGKILL)
        proc.popen.wait(timeout=grace_s)

    def log_tail(self, proc: Process, lines: int = 40) -> str:
        try:
            with open(proc.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def reap_orphans(self) -> list[int]:
        """Nothing to reap: servers started here die with specsweep (or were never ours)."""
        return []

    def fingerprint(self) -> dict[str, str]:
        """Hardware and OS facts stored in `environment`; the GPU keys are the SSH host's
        (gpus, gpu.<i>.name, gpu.<i>.memory_total_mib, gpu.<i>.memory_used_mib, gpu.driver,
        cuda.version), gpus 'none' on a machine without them."""
        return {
            "os": platform.platform(),
            "hostname": platform.node(),
            "python": platform.python_version(),
            "cpu.count": str(os.cpu_count()),
            "cpu.model": _cpu_model(),
            "memory.total_gb": _mem_total_gb(),
            **facts.gpu_facts(self),
        }


@functools.cache
def _spawner() -> ThreadPoolExecutor:
    """The one thread that forks every server, alive as long as specsweep is: Linux sends
    the parent-death signal (below) when the THREAD that forked exits, not the process, so
    a server forked by a short-lived worker thread would be SIGKILLed as soon as that
    thread ended, in the middle of its measurements."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="specsweep-spawner")


def _die_with_parent(parent: int) -> None:
    """In the child before exec: ask Linux to SIGKILL it when specsweep dies, so even a
    `kill -9` of the campaign leaves no server running (prctl PR_SET_PDEATHSIG; it follows
    the forking thread, hence `_spawner`). SIGKILL, not SIGTERM: llama-server swallows a
    SIGTERM that arrives while it loads the model.
    If the parent died between fork and prctl, the signal will never come: exit at once."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: the normal stop path still applies
    if os.getppid() != parent:
        os._exit(1)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gb() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f}"
    except OSError:
        pass
    return "unknown"
