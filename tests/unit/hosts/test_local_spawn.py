"""Servers the local host starts outlive the thread that started them (Linux's parent-death
signal follows the forking thread, not the process) and still die with specsweep (the
`kill -9` case is tests/e2e/test_end_to_end.py's)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specsweep.collect.hosts.base import Process
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.components import LocalHost

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


def test_a_server_outlives_the_short_lived_thread_that_started_it(tmp_path: Path) -> None:
    host = Local(LocalHost(kind="local"))
    started: list[Process] = []
    worker = threading.Thread(
        target=lambda: started.append(host.start(["sleep", "30"], {}, tmp_path / "s.log"))
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and started
    try:
        time.sleep(0.5)  # the signal, were it sent, comes as the thread exits
        assert host.alive(started[0]), "the server died with the thread that started it"
    finally:
        host.stop(started[0], grace_s=2)
    assert not host.alive(started[0])


CHILD = """
import sys, threading
from pathlib import Path
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.components import LocalHost
out = []
t = threading.Thread(target=lambda: out.append(
    Local(LocalHost(kind="local")).start(["sleep", "30"], {}, Path(sys.argv[1]))))
t.start(); t.join()
print(out[0].pid, flush=True)
sys.stdin.read()  # until the test kills this process
"""


def test_the_server_still_dies_with_specsweep(tmp_path: Path) -> None:
    """Started from a thread that is gone, the server is SIGKILLed when the process dies."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "s.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.stdout is not None
    server = int(proc.stdout.readline())
    assert _running(server)
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 5
    while _running(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(server), "the server outlived specsweep"


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
