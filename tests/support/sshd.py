"""A real OpenSSH sshd on 127.0.0.1, for the SSH host tests (conftest.py's `sshd` fixture)
and for scripts (tests/bench/bench_tunnel.py): `running_sshd(folder)` starts one with its
own host key, a user key in a private authorized_keys and a known_hosts line for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
INSTALL = "apt-get install -y openssh-server"


class SshdError(RuntimeError):
    """The test sshd is missing or would not start (the message says why)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    """Direct children of pid, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


@dataclass
class Sshd:
    """The running test sshd."""

    port: int
    proc: subprocess.Popen[bytes]
    folder: Path
    key_file: Path
    known_hosts: Path
    host_key_line: str

    def kill_sessions(self) -> int:
        """SIGKILL every per-connection sshd process: each client's link drops at once."""
        sessions = children(self.proc.pid)
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)
        return len(sessions)


def _keygen(path: Path) -> None:
    cmd = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)]
    subprocess.run(cmd, check=True)


def _config(folder: Path, port: int) -> Path:
    config = folder / "sshd_config"
    (folder / "home").mkdir(exist_ok=True)
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
        "StrictModes no\nUsePAM no\nPermitRootLogin yes\nPubkeyAuthentication yes\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "Subsystem sftp internal-sftp\nMaxStartups 100\nLogLevel INFO\n"
        # The sessions run root's login shell, and bash started by sshd reads $HOME/.bashrc.
        # Where that runs `pyenv init -` (this project's machine image does), every session
        # takes pyenv's rehash lock, and a session killed while holding it (the link-drop
        # tests kill sessions) leaves a stale lock that makes every later session wait 60 s
        # or print pyenv's complaint. A home of the test's own keeps the sessions off the
        # machine's rc files.
        f"SetEnv HOME={folder / 'home'}\n"
    )
    return config


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SshdError(f"sshd exited with {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SshdError(f"sshd not listening on {port} within 15 s:\n{log.read_text()}")


@contextlib.contextmanager
def running_sshd(folder: Path) -> Iterator[Sshd]:
    """An sshd on 127.0.0.1:<free port> with its keys in folder; stopped (with every
    session it forked) on exit. SshdError when OpenSSH is missing or sshd fails."""
    if not SSHD.exists() or shutil.which("ssh-keygen") is None:
        raise SshdError(f"OpenSSH sshd and ssh-keygen are needed: {INSTALL}")
    _keygen(folder / "host_key")
    _keygen(folder / "user_key")
    (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege-separation directory
    port = free_port()
    log = folder / "sshd.log"
    with open(log, "wb") as out:
        cmd = [str(SSHD), "-D", "-e", "-f", str(_config(folder, port))]
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(proc, port, log)
        key_type, key = (folder / "host_key.pub").read_text().split()[:2]
        line = f"[127.0.0.1]:{port} {key_type} {key}\n"
        (folder / "known_hosts").write_text(line)
        yield Sshd(port, proc, folder, folder / "user_key", folder / "known_hosts", line)
    finally:
        sessions = children(proc.pid)
        proc.terminate()
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll check every 50 ms until it is true (True) or timeout_s passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False
