"""The SSH host over a real OpenSSH sshd on 127.0.0.1 (see conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from specsweep.collect.hosts import facts
from specsweep.collect.hosts.base import Process
from specsweep.collect.hosts.facts import parse_fingerprint
from specsweep.collect.hosts.managers import systemd_unit
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost
from tests.support.sshd import wait_for


@pytest.fixture
def host(ssh_cfg: dict[str, Any]) -> Iterator[SSH]:
    """An SSH host that stops, at teardown, every server a failed test left running."""
    with SSH(SSHHost(**ssh_cfg)) as h:
        started: list[Process] = []
        start = h.start

        def tracked(argv: list[str], env: dict[str, str], log_path: Path) -> Process:
            started.append(start(argv, env, log_path))
            return started[-1]

        h.start = tracked  # type: ignore[method-assign]
        yield h
        for proc in started:
            h.stop(proc, grace_s=1)


def pid_exists(host: SSH, pid: int) -> bool:
    return host.run(["kill", "-0", str(pid)])[0] == 0


def gone(host: SSH, pid: int) -> bool:
    """kill -0 fails within 3 s (a dead process answers until PID 1 reaps its zombie)."""
    return wait_for(lambda: not pid_exists(host, pid), timeout_s=3)


# --- commands --------------------------------------------------------------------------------


# --- connecting ------------------------------------------------------------------------------


# --- the process manager ---------------------------------------------------------------------


# --- tunnels ---------------------------------------------------------------------------------


def _get(url: str) -> str | None:
    try:
        response = httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


# --- facts -----------------------------------------------------------------------------------


FAKE_NVIDIA_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=index,uuid) printf '0, GPU-aaa\\n1, GPU-bbb\\n2, GPU-ccc\\n' ;;
  --query-gpu=index) printf '0\\n1\\n2\\n' ;;
  --query-gpu=*) printf '0, NVIDIA H100 80GB HBM3, 81559, 1, 550.54.15\\n' ;;
  --query-compute-apps=*) printf 'GPU-bbb, 4242, 70000 MiB\\n' ;;
esac
"""


class LocalRunner:
    """Runs the managers' real scripts on this machine, with a fake nvidia-smi on PATH."""

    def __init__(self, bin_dir: Path):
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(self, cmd: list[str], timeout_s: float = 60.0) -> tuple[int, str, str]:
        done = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout_s)
        return done.returncode, done.stdout, done.stderr

    def write_file(self, path: str, text: str) -> None:
        Path(path).write_text(text)


def test_gpu_facts_from_nvidia_smi(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    runner = LocalRunner(tmp_path)
    assert facts.gpu_indices(runner) == [0, 1, 2]
    assert facts.busy_gpus(runner) == {1}
    processes = facts.gpu_processes(runner)
    assert processes == [{"gpu_uuid": "GPU-bbb", "pid": "4242", "used_memory": "70000 MiB"}]
    seen = facts.fingerprint(runner)
    assert (seen["gpus"], seen["gpu.0.name"]) == ("1", "NVIDIA H100 80GB HBM3")


def test_parse_fingerprint_reads_nvidia_smi_rows() -> None:
    out = (
        "os=Linux 6.1 x86_64 GNU/Linux\ncpu.count=64\nmemory.total_kb=2097152\n"
        "gpu=0, NVIDIA H100 80GB HBM3, 81559, 1, 550.54.15\n"
        "gpu=1, NVIDIA H100 80GB HBM3, 81559, 70000, 550.54.15\n"
    )
    facts = parse_fingerprint(out)
    assert facts["gpus"] == "2"
    assert facts["memory.total_gb"] == "2.0"
    assert facts["gpu.1.name"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpu.1.memory_used_mib"] == "70000"
    assert facts["gpu.driver"] == "550.54.15"


# --- systemd units ---------------------------------------------------------------------------

ENV = {"PLAIN": "1", "TRICKY": 'a "quoted" \\ back 100% $HOME\nline2'}
ARGV = ["/bin/sleep", "300", "--flag=50%", "$HOME", 'say "hi"', "semi ;", "back\\slash"]


def test_systemd_unit_content() -> None:
    text = systemd_unit("specsweep-x.service", ARGV, ENV, "/var/log/s x.log", "/srv/work")
    lines = text.splitlines()
    assert lines[:2] == ["[Unit]", "Description=specsweep-x.service"]
    assert "[Service]" in lines and "Type=exec" in lines
    assert 'Environment="PLAIN=1"' in lines
    assert 'Environment="TRICKY=a \\"quoted\\" \\\\ back 100%% $HOME\\nline2"' in lines
    assert (
        'ExecStart="/bin/sleep" "300" "--flag=50%%" "$$HOME" "say \\"hi\\"" "semi ;" '
        '"back\\\\slash"'
    ) in lines
    for line in ("KillMode=control-group", "TimeoutStopSec=10", "WorkingDirectory=/srv/work"):
        assert line in lines
    assert "StandardOutput=append:/var/log/s x.log" in lines


def test_systemd_unit_refuses_what_systemd_would_misread() -> None:
    with pytest.raises(ValueError, match="ExecStart"):
        systemd_unit("u", ["-/bin/sleep"], {}, "/l.log", "/w")
    with pytest.raises(ValueError, match="ExecStart"):
        systemd_unit("u", ["bin/sleep"], {}, "/l.log", "/w")
    with pytest.raises(ValueError, match="environment variable"):
        systemd_unit("u", ["/bin/sleep"], {"A=B": "1"}, "/l.log", "/w")
    with pytest.raises(ValueError, match="absolute"):
        systemd_unit("u", ["/bin/sleep"], {}, "relative.log", "/w")


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is needed: apt-get install -y systemd")
    unit = tmp_path / "specsweep-verify.service"
    unit.write_text(systemd_unit(unit.name, ARGV, ENV, tmp_path / "out.log", tmp_path))
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "notice"}
    result = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert unit.name not in result.stdout + result.stderr, result.stdout + result.stderr
