"""A host that cannot be reached: `specsweep run` and `check --probe` say in one line
which host, which address and why, exit 4, and `run` marks the campaign unreachable with the
line in `environment` (host.last_error). Real sockets only: a name under .invalid (resolution
fails locally), a closed port, a listener that never sends the SSH banner, and the test sshd
with a wrong known_hosts or a key it does not accept."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from specsweep.collect.hosts.base import HostUnreachable
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost
from tests.support.fixtures.hosts import Sshd, free_port
from tests.support.sshd import running_sshd

SECRET = "hunter2-not-printed"


def _plan(host: dict[str, Any]) -> str:
    return yaml.safe_dump({
        "name": "unreachable",
        "repeat": 1,  # one round: this is about the host, not the rounds
        "host": host,
        "engine": {"kind": "llamacpp", "binary": "/opt/llama-server", "model": "/m/x.gguf"},
        "methods": [{"name": "autoregressive", "args": ["--spec-type", "none"]}],
        "workloads": [{"name": "w", "prompts": {"kind": "inline", "texts": ["hi"]},
                       "max_tokens": [4]}],
    }, sort_keys=False)  # fmt: skip


def _cli(tmp_path: Path, host: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    plan = tmp_path / "plan.yaml"
    plan.write_text(_plan(host))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SPECSWEEP_TEST_PW": SECRET}
    return subprocess.run(
        [sys.executable, "-m", "specsweep.collect", *args, str(plan)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never sends the SSH banner."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def _cases(ssh_cfg: dict[str, Any], sshd: Sshd, tmp_path: Path, silent: int) -> dict[str, Any]:
    wrong = tmp_path / "wrong_known_hosts"
    other = " ".join((sshd.folder / "user_key.pub").read_text().split()[:2])
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    user = ssh_cfg["user"]
    return {
        "unresolved": ({"address": "no-such-box.invalid", "port": 22},
                       f"{user}@no-such-box.invalid:22", "name not resolved"),
        "refused": ({"port": free_port()}, None, "connection refused"),
        "timeout": ({"port": silent, "connect_timeout_s": 1}, None,
                    "timed out after 1 s waiting for the SSH banner"),
        "unknown key": ({"known_hosts_file": str(empty)}, None,
                        "host key rejected: the key is unknown: ssh-ed25519 SHA256:"),
        "changed key": ({"known_hosts_file": str(wrong), "accept_unknown_host_key": True}, None,
                        "host key rejected: the key changed"),
        "auth": ({"key_file": str(stranger), "password_env": "SPECSWEEP_TEST_PW"}, None,
                 f"authentication failed (tried publickey ({stranger}), password "
                 "($SPECSWEEP_TEST_PW); the server accepts publickey)"),
    }  # fmt: skip


CASES = ["unresolved", "refused", "timeout", "unknown key", "changed key", "auth"]


@pytest.mark.parametrize("case", CASES)
def test_unreachable_host_one_line_exit_4_and_stored(
    case: str, ssh_cfg: dict[str, Any], sshd: Sshd, tmp_path: Path, silent_listener: int
) -> None:
    change, address, reason = _cases(ssh_cfg, sshd, tmp_path, silent_listener)[case]
    host = {**ssh_cfg, **change}
    address = address or f"{ssh_cfg['user']}@127.0.0.1:{host['port']}"
    line = f"error: host test-sshd ({address}) cannot be reached: {reason}"
    db = tmp_path / "r.duckdb"
    done = _cli(tmp_path, host, "run", "--db", str(db), "--no-progress")
    assert (done.returncode, done.stderr.count("\n")) == (4, 1), done.stderr
    assert done.stderr.startswith(line), done.stderr
    assert SECRET not in done.stderr + done.stdout
    with duckdb.connect(str(db), read_only=True) as con:
        status = con.execute("SELECT status, finished_at FROM campaigns").fetchall()
        stored = con.execute(
            "SELECT host, value FROM environment WHERE key = 'host.last_error'"
        ).fetchall()
    assert status == [("unreachable", None)]
    assert stored == [("test-sshd", done.stderr.removeprefix("error: ").strip())]
    probe = _cli(tmp_path, host, "check", "--probe")
    assert (probe.returncode, probe.stderr.count("\n")) == (4, 1), probe.stderr
    assert probe.stderr.startswith(line), probe.stderr


def test_a_link_that_stays_down_ends_in_one_line(ssh_cfg: dict[str, Any], tmp_path: Path) -> None:
    """An sshd of its own, stopped while the host is connected: the next call reconnects
    reconnect_attempts times (backoff 0.5 s, 1 s) and raises HostUnreachable, refused."""
    (tmp_path / "own").mkdir()
    with running_sshd(tmp_path / "own") as own:
        cfg = {
            **ssh_cfg,
            "port": own.port,
            "key_file": str(own.key_file),
            "known_hosts_file": str(own.known_hosts),
            "reconnect_attempts": 3,
        }
        host = SSH(SSHHost(**cfg))
        assert host.run(["echo", "up"])[1] == "up\n"
    started = time.monotonic()
    with host, pytest.raises(HostUnreachable) as caught:
        host.run(["echo", "down"])
    assert 1.4 < time.monotonic() - started < 10
    assert str(caught.value) == (
        f"host test-sshd ({cfg['user']}@127.0.0.1:{own.port}) cannot be "
        "reached: connection refused (nothing listens on that port) "
        "(3 attempts)"
    )
