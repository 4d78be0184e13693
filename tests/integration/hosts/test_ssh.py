"""The SSH host over a real OpenSSH sshd on 127.0.0.1 (see conftest.py).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/hosts/test_ssh.py."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from specsweep.collect.hosts.base import HostUnreachable
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost
from specsweep.collect.run.service import failure_cause
from tests.support.fixtures.hosts import Sshd, free_port
from tests.support.sshd import wait_for
from tests.unit.hosts.test_ssh import _get, gone, host, pid_exists  # noqa: F401


def test_run_passes_arguments_literally(host: SSH, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    nasty = [
        f"; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"' ; touch {marker}; '",
        f'" ; touch {marker}; "',
        f"a\nb\ntouch {marker}",
        "*",
        "/*/..",
        "~",
        "$HOME ${PATH} %s %%",
        "back\\slash\\",
        "",
        "-n",
        "tab\there | cat > /dev/null && exit 7",
        "ünïcödé ✓",
    ]
    rc, out, err = host.run(["printf", "%s\\0", *nasty])
    assert (rc, err) == (0, "")
    assert out.split("\0")[:-1] == nasty
    assert not marker.exists()


def test_run_returns_exit_code_and_both_streams(host: SSH) -> None:
    assert host.run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, "out\n", "err\n")


def test_large_output_on_both_streams_does_not_stall(host: SSH) -> None:
    script = "head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2"
    rc, out, err = host.run(["sh", "-c", script], timeout_s=30)
    assert (rc, len(out), len(err)) == (0, 3_000_000, 3_000_000)


def test_read_file(host: SSH, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("line 1\nlïne 2\n")
    assert host.read_file(str(tmp_path / "notes.txt")) == "line 1\nlïne 2\n"
    with pytest.raises(FileNotFoundError):
        host.read_file(str(tmp_path / "missing.txt"))


def test_unknown_host_key_is_rejected_by_default(ssh_cfg: dict[str, Any], tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostUnreachable, match="key is unknown.*accept_unknown_host_key"):
        SSH(SSHHost(**{**ssh_cfg, "known_hosts_file": str(empty)}))


def test_unknown_host_key_is_accepted_and_remembered_when_allowed(
    ssh_cfg: dict[str, Any], sshd: Sshd, tmp_path: Path
) -> None:
    known = tmp_path / "new" / "known_hosts"
    cfg = {**ssh_cfg, "known_hosts_file": str(known), "accept_unknown_host_key": True}
    with SSH(SSHHost(**cfg)) as h:
        assert h.run(["echo", "hi"])[1] == "hi\n"
    assert sshd.host_key_line.split()[2] in known.read_text()


def test_changed_host_key_is_rejected(ssh_cfg: dict[str, Any], sshd: Sshd, tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    other_key = " ".join((sshd.folder / "user_key.pub").read_text().split()[:2])
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other_key}\n")
    cfg = {**ssh_cfg, "known_hosts_file": str(wrong), "accept_unknown_host_key": True}
    with pytest.raises(HostUnreachable, match="host key rejected: the key changed"):
        SSH(SSHHost(**cfg))


def test_ssh_config_alias(
    ssh_cfg: dict[str, Any], sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host sweepbox\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
        f"  User {ssh_cfg['user']}\n  IdentityFile {sshd.key_file}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    cfg = {"kind": "ssh", "address": "sweepbox", "known_hosts_file": str(sshd.known_hosts)}
    with SSH(SSHHost(**cfg, workdir=str(tmp_path / "w"))) as h:
        assert h.name == "sweepbox"
        assert h.run(["echo", "via config"])[1] == "via config\n"


def test_password_env_must_be_set(ssh_cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECSWEEP_TEST_PASSWORD", raising=False)
    with pytest.raises(HostUnreachable, match="SPECSWEEP_TEST_PASSWORD"):
        SSH(SSHHost(**{**ssh_cfg, "password_env": "SPECSWEEP_TEST_PASSWORD"}))


def test_reconnects_after_the_link_drops(host: SSH, sshd: Sshd) -> None:
    assert host.run(["echo", "before"])[1] == "before\n"
    assert sshd.kill_sessions() >= 1
    assert host.run(["echo", "after"]) == (0, "after\n", "")
    host._client.get_transport().close()  # type: ignore[union-attr]  # a transport seen dead
    assert host.run(["echo", "again"]) == (0, "again\n", "")
    assert host.read_file(str(sshd.known_hosts)) == sshd.host_key_line


def test_process_start_alive_log_and_stop_kills_the_group(host: SSH, tmp_path: Path) -> None:
    script = 'echo started; sleep 300 & echo "child $!"; wait'
    proc = host.start(["sh", "-c", script], {}, host.log_dir(tmp_path) / "server.log")
    assert proc.log_path == host.workdir / "logs" / "server.log"
    assert wait_for(lambda: "child" in host.log_tail(proc))
    child = int(host.log_tail(proc).split("child ")[1].split()[0])
    assert host.alive(proc)
    assert pid_exists(host, proc.pid) and pid_exists(host, child)
    host.stop(proc, grace_s=5)
    assert not host.alive(proc)
    assert gone(host, proc.pid)
    assert gone(host, child)
    host.stop(proc)  # idempotent


def test_stop_kills_a_group_that_ignores_sigterm(host: SSH, tmp_path: Path) -> None:
    script = 'trap "" TERM; echo ready; sleep 300'
    proc = host.start(["sh", "-c", script], {}, tmp_path / "stubborn.log")
    assert wait_for(lambda: "ready" in host.log_tail(proc))
    t0 = time.perf_counter()
    host.stop(proc, grace_s=0.5)
    assert time.perf_counter() - t0 >= 0.5
    assert gone(host, proc.pid)


def test_command_that_exits_at_once_is_not_alive(host: SSH) -> None:
    proc = host.start(["sh", "-c", "echo bye; exit 3"], {}, Path("quick.log"))
    assert proc.log_path == host.workdir / "quick.log"  # relative: under workdir
    assert wait_for(lambda: not host.alive(proc))
    assert host.log_tail(proc) == "bye"


def test_environment_values_reach_the_server_literally(host: SSH, tmp_path: Path) -> None:
    value = "$(id) `id` ; rm -rf / 'q' \"dq\" * \\ %s\nnext"
    argv = ["sh", "-c", 'printf %s "$WEIRD"']
    proc = host.start(argv, {"WEIRD": value, "PLAIN": "x"}, tmp_path / "env.log")
    assert wait_for(lambda: not host.alive(proc))
    assert host.read_file(str(proc.log_path)) == value


def test_missing_executable_is_reported_in_the_log(host: SSH, tmp_path: Path) -> None:
    proc = host.start(["/nonexistent/server"], {}, tmp_path / "missing.log")
    assert wait_for(lambda: not host.alive(proc))
    cause = failure_cause(host.log_tail(proc)) or ""  # what the services row's error says
    assert cause.startswith("env: ") and "/nonexistent/server" in cause, host.log_tail(proc)
    assert cause.endswith(": No such file or directory")


def test_forward_reaches_a_server_started_on_the_host(host: SSH, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("through the tunnel")
    port = free_port()
    argv = ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(site)]
    proc = host.start(argv, {}, tmp_path / "http.log")
    try:
        local = host.forward(port)
        url = f"http://127.0.0.1:{local}/hello.txt"
        assert wait_for(lambda: _get(url) == "through the tunnel", timeout_s=15)
        assert [_get(url) for _ in range(3)] == ["through the tunnel"] * 3
    finally:
        host.stop(proc)
    host.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=2)


def test_endpoint_free_port_and_gpus_as_service_uses_them(
    ssh_cfg: dict[str, Any], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ok.txt").write_text("ok")
    with SSH(SSHHost(**{**ssh_cfg, "gpus": [0, 1]})) as h:
        port = h.free_port("127.0.0.1")
        argv = ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(site)]
        proc = h.start(argv, {}, h.log_dir(tmp_path) / "http.log")
        try:
            base = h.endpoint("127.0.0.1", port)  # loopback only: reached through a forward
            assert base.startswith("http://127.0.0.1:") and base != f"http://127.0.0.1:{port}"
            assert h.endpoint("127.0.0.1", port) == base  # one forward per remote port
            assert wait_for(lambda: _get(base + "/ok.txt") == "ok", timeout_s=15)
        finally:
            h.stop(proc)
        assert h.endpoint("10.1.2.3", 8000) == "http://10.1.2.3:8000"
        assert h.endpoint("0.0.0.0", 8000) == "http://127.0.0.1:8000"  # the SSH address
        assert h.gpu_indices() == [0, 1]  # the plan's list wins over nvidia-smi
        if shutil.which("nvidia-smi") is None:
            assert h.busy_gpus() == set()


def test_fingerprint_and_gpu_processes(host: SSH) -> None:
    facts = host.fingerprint()
    for key in ("os", "hostname", "cpu.count", "cpu.model", "memory.total_gb", "gpus", "python"):
        assert facts[key] and facts[key] != "unknown", key
    assert int(facts["cpu.count"]) >= 1
    if shutil.which("nvidia-smi") is None:  # the test sshd is this machine
        assert facts["gpus"] == "none"
        assert host.gpu_processes() == []
        assert host.gpu_indices() == []


def test_servers_left_by_a_killed_run_are_reaped(ssh_cfg: dict[str, Any]) -> None:
    """A run whose specsweep died leaves its server running remotely; the next run's host
    stops it before anything starts."""
    with SSH(SSHHost(**ssh_cfg)) as first:
        proc = first.start(["sleep", "300"], {}, Path("logs/left-behind.log"))
        assert first.alive(proc)
    # `first` is gone without stopping its server, as after kill -9 of specsweep
    with SSH(SSHHost(**ssh_cfg)) as second:
        assert second.reap_orphans() == [proc.pid]
        assert not second.alive(proc)
        assert second.reap_orphans() == []
