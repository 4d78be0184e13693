"""The external host: a server someone else runs, measured but never started or stopped."""

from __future__ import annotations

from pathlib import Path, PurePath
from urllib.parse import urlsplit

from specsweep.collect.hosts.base import Process
from specsweep.collect.plan.components import ExternalHost


class External:
    """A server someone else runs: nothing to start or stop, no files to read."""

    def __init__(self, cfg: ExternalHost):
        self.cfg, self.name, self.url = cfg, cfg.name, cfg.url.rstrip("/")

    def start(self, argv: list[str], env: dict[str, str], log_path: PurePath) -> Process:
        return Process(pid=0, log_path=log_path)

    def alive(self, proc: Process) -> bool:
        return True  # not ours to watch; a dead server shows as failed requests

    def stop(self, proc: Process, grace_s: float = 10.0) -> None:
        """Not ours to stop."""

    def log_tail(self, proc: Process, lines: int = 40) -> str:
        return ""

    def free_port(self, address: str) -> int:
        return int(urlsplit(self.url).port or (443 if self.url.startswith("https") else 80))

    def endpoint(self, address: str, port: int) -> str:
        return self.url

    def transport(self, address: str) -> str:
        """How the client reaches a server bound to address: straight to its socket."""
        return "direct"

    def log_dir(self, default: Path) -> Path:
        return default

    def read_file(self, path: str) -> str:
        raise OSError(f"no file access on an external server ({self.url})")

    def describe(self, command: str) -> str:
        return f"external server at {self.url} (not started by specsweep)"

    def close(self) -> None:
        """Nothing to release."""

    def gpu_indices(self) -> list[int]:
        return []

    def busy_gpus(self) -> set[int]:
        return set()

    def reap_orphans(self) -> list[int]:
        """Nothing to reap: servers started here die with specsweep (or were never ours)."""
        return []

    def fingerprint(self) -> dict[str, str]:
        return {"host.kind": "external", "host.url": self.url}
