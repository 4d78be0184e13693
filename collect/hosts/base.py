"""What every host shares: the `Process` a host started, and the protocols the runner, the
service lifecycle and the planner are typed against: `Site` (where a campaign runs, as the
runner asks of it before and around its services), `Host` (a `Site` that starts services:
local, SSH, external) and `Cluster` (a `Site` whose jobs run elsewhere:
`collect.cluster.driver.RayCluster`, handed the runner's queue)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol, runtime_checkable


@dataclass
class Process:
    """A server started by a host."""

    pid: int
    log_path: PurePath
    popen: subprocess.Popen[bytes] | None = None


class HostUnreachable(RuntimeError):
    """The host cannot be reached: `host` (the plan's name), `address` (user@host:port) and
    `reason` (one line: name not resolved, refused, timed out, host key, authentication).
    `specsweep` prints it as one line and exits 4."""

    def __init__(self, host: str, address: str, reason: str, retry: bool = False):
        self.host, self.address, self.retry = host, address, retry
        self.reason = " ".join(reason.split())
        super().__init__(f"host {host} ({address}) cannot be reached: {self.reason}")


class Site(Protocol):
    """Where a campaign runs, as the runner sees it: its name and plan model, its facts, the
    GPUs it offers, the files engines read to prepare; closed when the campaign ends."""

    name: str
    cfg: Any  # the host's plan model: every kind answers gpus, gpu_wait_s, pack, ...

    def read_file(self, path: str) -> str: ...
    def close(self) -> None: ...
    def gpu_indices(self) -> list[int]: ...
    def busy_gpus(self) -> set[int]: ...
    def fingerprint(self) -> dict[str, str]: ...
    def reap_orphans(self) -> list[int]:
        """Stop servers an interrupted run left behind; pids stopped (none on most hosts)."""
        ...


@runtime_checkable
class Host(Site, Protocol):
    """Runs a service's server and reports on the machine it runs on (local, SSH, external)."""

    def start(self, argv: list[str], env: dict[str, str], log_path: Path) -> Process: ...
    def alive(self, proc: Process) -> bool: ...
    def stop(self, proc: Process, grace_s: float = 10.0) -> None: ...
    def log_tail(self, proc: Process, lines: int = 40) -> str: ...
    def free_port(self, address: str) -> int: ...
    def endpoint(self, address: str, port: int) -> str: ...
    def transport(self, address: str) -> str: ...
    def log_dir(self, default: Path) -> Path: ...
    def describe(self, command: str) -> str: ...


class Cluster(Site, Protocol):
    """A site whose configurations run elsewhere, each where the cluster places it: the runner
    hands it its job queue and it runs every job (collect.cluster.driver.RayCluster). The
    campaign and queue are the runner's (`collect.run`, a layer above this one)."""

    def run_jobs(self, c: Any, queue: Any) -> None: ...


class Runner(Protocol):
    """What a manager needs from the SSH host."""

    def run(self, cmd: list[str], timeout_s: float = 60.0) -> tuple[int, str, str]: ...

    def write_file(self, path: str, text: str) -> None: ...
