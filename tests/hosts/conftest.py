"""A real OpenSSH sshd on 127.0.0.1 for the SSH host tests (started by tests/hosts/sshd.py).

One sshd per test session, with its own host key, a user key in a private authorized_keys
and a known_hosts line for it; every test gets a fresh `SSHHost` config dict pointing at it.
Missing tools fail the tests with the install command (they are never skipped).
"""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.sshd import Sshd, SshdError, children, free_port, running_sshd

__all__ = ["Sshd", "children", "free_port", "servers_in"]


def servers_in(binary: str, workdir: str) -> list[str]:
    """Pids of `binary` processes running in workdir: the servers a test's host started
    (the process manager runs them there), not those of other test runs on the machine."""
    out = subprocess.run(["pgrep", "-f", binary], capture_output=True, text=True, check=False)
    return [pid for pid in out.stdout.split() if _cwd(pid) == Path(workdir).resolve()]


def _cwd(pid: str) -> Path | None:
    try:
        return Path(f"/proc/{pid}/cwd").resolve(strict=True)
    except OSError:
        return None


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    try:
        with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
            yield server
    except SshdError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def ssh_cfg(sshd: Sshd, tmp_path: Path) -> dict[str, Any]:
    """An SSHHost config dict for the test sshd, with its own workdir."""
    return {
        "kind": "ssh",
        "name": "test-sshd",
        "address": "127.0.0.1",
        "port": sshd.port,
        "user": getpass.getuser(),
        "key_file": str(sshd.key_file),
        "known_hosts_file": str(sshd.known_hosts),
        "use_ssh_config": False,
        "workdir": str(tmp_path / "remote"),
        "connect_timeout_s": 5,
        "reconnect_attempts": 3,
    }
