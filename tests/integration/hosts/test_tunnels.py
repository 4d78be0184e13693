"""Port forwards through the test sshd: paramiko's (threads in this process) and OpenSSH's
(`ssh -L` process with the same host-key policy). Each reaches a server on the host and says
its kind (services.transport); the ssh process ends with close() and with a killed parent,
comes back after a dropped link, and 'auto' falls back to paramiko where ssh fails."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.hosts.tunnel import close_quietly
from specsweep.collect.plan.components import SSHHost
from tests.support.fixtures.hosts import Sshd, children, free_port
from tests.support.sshd import wait_for
from tests.unit.hosts.test_ssh import _get

TEXT = "through the tunnel"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[int]:
    """Port of an HTTP server on the host (the test sshd is this machine) serving TEXT."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "hello.txt").write_text(TEXT)
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "http.server",
        str(port),
        "--bind",
        "127.0.0.1",
        "-d",
        str(tmp_path / "site"),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: _get(f"http://127.0.0.1:{port}") is not None)
        yield port
    finally:
        proc.kill()
        proc.wait()


def ssh_pids(local_port: int) -> list[int]:
    """Live ssh processes forwarding 127.0.0.1:local_port (from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        forwards = any(a.startswith(f"127.0.0.1:{local_port}:".encode()) for a in argv)
        if argv[0] == b"ssh" and forwards and state != "Z":
            found.append(int(cmdline.parent.name))
    return found


def remote_sleeps(sshd: Sshd) -> int:
    """How many `sleep` commands of ssh -tt sessions run under the test sshd."""

    def tree(pid: int) -> list[int]:
        return [pid, *(p for c in children(pid) for p in tree(c))]

    count = 0
    for pid in tree(sshd.proc.pid):
        with contextlib.suppress(OSError):
            count += Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x002147483647\x00"
    return count


@pytest.mark.parametrize(
    ("forward", "kind"), [("openssh", "ssh-tunnel"), ("paramiko", "paramiko-tunnel")]
)
def test_each_forward_reaches_the_server_and_says_its_kind(
    forward: str, kind: str, ssh_cfg: dict[str, Any], site: int
) -> None:
    with SSH(SSHHost(**{**ssh_cfg, "tunnel": True, "forward": forward})) as h:
        base = h.endpoint("0.0.0.0", site)
        assert (h.transport("0.0.0.0"), h.transport("10.1.2.3")) == (kind, kind)
        assert [_get(f"{base}/hello.txt") for _ in range(3)] == [TEXT] * 3
        local = int(base.rsplit(":", 1)[1])
        assert len(ssh_pids(local)) == (forward == "openssh")
    assert ssh_pids(local) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(base, timeout=2)
    cfg = SSHHost(**{**ssh_cfg, "forward": forward})
    with SSH(cfg) as h:  # no tunnel: only a loopback-only server is forwarded
        assert (h.transport("127.0.0.1"), h.transport("10.1.2.3")) == (kind, "direct")


def test_ssh_process_dies_with_a_killed_parent(ssh_cfg: dict[str, Any], site: int) -> None:
    """SIGKILL of the process that opened the forward (a crash, kill -9): no ssh left."""
    code = (
        "import json, sys, time\n"
        "from specsweep.collect.hosts.ssh import SSH\n"
        "from specsweep.collect.plan.components import SSHHost\n"
        "h = SSH(SSHHost(**json.loads(sys.argv[1])))\n"
        "print(h.forward(int(sys.argv[2])), flush=True)\ntime.sleep(60)\n"
    )
    cfg = json.dumps({**ssh_cfg, "forward": "openssh"})
    parent = subprocess.Popen(
        [sys.executable, "-c", code, cfg, str(site)], stdout=subprocess.PIPE, text=True
    )
    try:
        local = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert _get(f"http://127.0.0.1:{local}/hello.txt") == TEXT
        assert len(ssh_pids(local)) == 1
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=5)
        assert wait_for(lambda: ssh_pids(local) == [], timeout_s=5)
    finally:
        parent.kill()
        parent.wait()


def test_ssh_forward_comes_back_after_the_link_drops(
    ssh_cfg: dict[str, Any], sshd: Sshd, site: int
) -> None:
    with SSH(SSHHost(**{**ssh_cfg, "forward": "openssh"})) as h:
        local = h.forward(site)
        url = f"http://127.0.0.1:{local}/hello.txt"
        before = ssh_pids(local)
        assert _get(url) == TEXT and len(before) == 1
        # the session's shell has run its rc files (killed inside pyenv's rehash, the
        # machine's .bashrc would leave its lock behind) and runs the remote sleep
        assert wait_for(lambda: remote_sleeps(sshd) == 1)
        assert sshd.kill_sessions() >= 2  # paramiko's link and ssh's
        assert wait_for(lambda: _get(url) == TEXT and ssh_pids(local) not in ([], before))
        assert h.run(["echo", "ok"])[1] == "ok\n"


def test_auto_falls_back_to_paramiko_where_ssh_refuses(
    ssh_cfg: dict[str, Any], sshd: Sshd, site: int, tmp_path: Path
) -> None:
    """ssh checks the same known_hosts, strictly: emptied after paramiko connected, ssh
    refuses the host; 'auto' then forwards through paramiko, 'openssh' says why."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.host_key_line)
    cfg = {**ssh_cfg, "known_hosts_file": str(known), "tunnel": True}
    with SSH(SSHHost(**cfg)) as auto, SSH(SSHHost(**cfg, forward="openssh")) as strict:
        assert auto.transport("127.0.0.1") == "ssh-tunnel"
        known.write_text("")
        base = auto.endpoint("127.0.0.1", site)
        assert auto.transport("127.0.0.1") == "paramiko-tunnel"
        assert _get(f"{base}/hello.txt") == TEXT
        with pytest.raises(OSError, match="Host key verification failed"):
            strict.forward(site)


def test_a_channel_of_a_broken_link_closes_without_a_traceback(
    ssh_cfg: dict[str, Any], site: int
) -> None:
    """A channel whose transport's socket broke raises EOFError as it sends its close, before
    paramiko's reader notices (CI saw it once: a link's thread ended in a traceback after the
    link dropped). close_quietly, which a paramiko tunnel's link threads and close() use,
    closes it without one."""
    with SSH(SSHHost(**{**ssh_cfg, "forward": "paramiko"})) as h:
        transport = h._transport()
        plain, quiet = (
            transport.open_channel("direct-tcpip", ("127.0.0.1", site), ("127.0.0.1", 0))
            for _ in range(2)
        )
        client, _ = socket.socketpair()
        # the link breaks under open channels: shutdown(2) through ctypes.PyDLL keeps the GIL,
        # so paramiko's reader thread cannot mark them closed before plain.close() sends
        ctypes.PyDLL(None).shutdown(transport.sock.fileno(), socket.SHUT_WR)
        with pytest.raises(EOFError):
            plain.close()
        close_quietly(client, quiet)
        assert client.fileno() == -1
