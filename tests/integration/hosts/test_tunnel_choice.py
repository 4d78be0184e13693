"""Which forward a host opens, and what the OpenSSH forward's command line holds: the plan's
key and known_hosts, strict host-key checking, batch mode, never a secret (the process list
of the machine shows every argument to every user)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.hosts.tunnel import forward_kind
from specsweep.collect.plan.components import SSHHost
from tests.integration.hosts.test_tunnels import TEXT, _get, site, ssh_pids  # noqa: F401 - site: fixture

SECRET = "hunter2-not-on-any-command-line"
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")


@needs_ssh
def test_auto_takes_openssh_unless_a_password_is_needed(ssh_cfg: dict[str, Any]) -> None:
    assert forward_kind(SSHHost(**ssh_cfg)) == "ssh-tunnel"
    with_password = SSHHost(**{**ssh_cfg, "password_env": "SPECSWEEP_TEST_PW"})
    assert forward_kind(with_password) == "paramiko-tunnel"  # ssh runs in batch mode


def test_auto_takes_paramiko_without_an_ssh_client(
    ssh_cfg: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert forward_kind(SSHHost(**ssh_cfg)) == "paramiko-tunnel"
    assert forward_kind(SSHHost(**{**ssh_cfg, "forward": "openssh"})) == "ssh-tunnel"


@needs_ssh
def test_ssh_command_line_checks_keys_and_holds_no_secret(
    ssh_cfg: dict[str, Any],
    site: int,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECSWEEP_TEST_PW", SECRET)  # paramiko may use it; ssh must not see it
    cfg = {**ssh_cfg, "forward": "openssh", "password_env": "SPECSWEEP_TEST_PW"}
    with SSH(SSHHost(**cfg)) as host:
        local = host.forward(site)
        assert _get(f"http://127.0.0.1:{local}/hello.txt") == TEXT
        (pid,) = ssh_pids(local)
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert SECRET not in " ".join(argv)
    assert {
        "StrictHostKeyChecking=yes",
        "BatchMode=yes",
        "GlobalKnownHostsFile=/dev/null",
        f"UserKnownHostsFile={ssh_cfg['known_hosts_file']}",
        f"IdentityFile={ssh_cfg['key_file']}",
    } <= set(argv)
