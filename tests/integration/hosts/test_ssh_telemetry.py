"""GPU telemetry over SSH: `nvidia-smi -lms` runs on the test sshd's machine (127.0.0.1) on
an exec channel of the host's connection, its lines stamped as they arrive. The remote
login PATH cannot be changed through this sshd, so the telemetry module's command names
the scripted nvidia-smi (tests/support/fake_gpus.py) by its path."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost, Telemetry
from specsweep.collect.telemetry import open_sampler, smi
from tests.support import fake_gpus


def _running(script: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    return out.stdout.split()


def test_nvidia_smi_streams_over_the_ssh_connection(
    ssh_cfg: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_gpus.install(tmp_path / "bin", count=3)
    monkeypatch.setattr(smi, "NVIDIA_SMI", str(script))
    with SSH(SSHHost(**{**ssh_cfg, "gpus": [0, 1, 2]})) as host:
        sampler = open_sampler(host, [1, 2], Telemetry(period_s=0.1))
        assert sampler is not None and sampler.name == "nvidia-smi"
        taken, t0, t1 = fake_gpus.sample_for(sampler, 1.0)
        assert host.run(["true"])[0] == 0  # the connection outlives the stream
    assert {s.gpu for s in taken} == {1, 2}
    for gpu in (1, 2):
        inside = [s.t for s in taken if s.gpu == gpu and t0 <= s.t <= t1]
        assert 6 <= len(inside) <= 12, inside
    assert {s.values["throttle_reasons"] for s in taken if s.gpu == 1} == {"sw_power_cap"}
    assert {s.values["power_w"] for s in taken if s.gpu == 2} == {200.0, 210.0, 220.0, 230.0}
    assert "-lms 100 -i 1,2" in (script.parent / "calls.log").read_text()
    deadline = time.monotonic() + 5
    while _running(script) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(script), "the remote nvidia-smi outlived its channel"


def test_a_missing_remote_nvidia_smi_warns_and_samples_nothing(
    ssh_cfg: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(smi, "NVIDIA_SMI", str(tmp_path / "no-such-nvidia-smi"))
    with SSH(SSHHost(**{**ssh_cfg, "gpus": [0]})) as host:
        sampler = open_sampler(host, [0], Telemetry(period_s=0.1))
        assert sampler is not None
        sampler._thread.join(10)
        assert not sampler.alive() and sampler.take(0, time.perf_counter()) == []
        sampler.stop()
    assert "GPU telemetry (nvidia-smi) failed" in caplog.text
    assert "no-such-nvidia-smi" in caplog.text
